"""What the scenario programs share: the short collective timeout, tiny models and data built in
code (nothing is downloaded), and the few lines every distributed script writes anyway.

Each scenario is an ordinary training script that fails in one way; the launcher (torchrun,
`python -m torch.distributed.run`, `torch.multiprocessing.spawn`, `accelerate launch`, Lightning's
own launcher) and the framework are chosen on the command line, so the same failure is printed by
each stack in its own words. Frameworks are imported only by the variant that uses them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta

# Collective timeout of every process group the scenarios create. Short, so that a run ends in
# well under a minute, yet long enough for every rank to reach the rendezvous on a loaded machine.
TIMEOUT_S = int(os.environ.get("REPRO_TIMEOUT_S", "15"))
TIMEOUT = timedelta(seconds=TIMEOUT_S)
# A straggler's busy time: longer than any timeout, so the waiting ranks always give up first (the
# launcher then stops the straggler, so the run never lasts this long).
STRAGGLE_S = 6 * TIMEOUT_S

VOCAB = 64
SEQ = 16


def parse(frameworks: tuple[str, ...], known: bool = False, **extra):
    """`--framework` (the stack that runs the training loop) and any scenario-specific options.
    With `known`, the other arguments (LightningCLI's) are returned too; sys.argv stays whole, as
    Lightning's launcher starts the other ranks with it."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__)
    parser.add_argument("--framework", choices=frameworks, default=frameworks[0])
    for name, kwargs in extra.items():
        parser.add_argument("--" + name.replace("_", "-"), **kwargs)
    if not known:
        return parser.parse_args()
    return parser.parse_known_args()


def env_rank() -> int:
    """This process's global rank: from the launcher's RANK, else the process group (Lightning's
    own launcher does not export RANK), else LOCAL_RANK."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"])
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("LOCAL_RANK", "0"))


def say(text: str) -> None:
    """A progress line as a training script prints it (stdout; the launcher adds nothing)."""
    print(text, flush=True)


def busy(seconds: float) -> None:
    """Stand-in for work that takes long on one rank (slow storage, a slow metric, a slow upload)."""
    time.sleep(seconds)


# --- plain torch.distributed ----------------------------------------------------------------------


def init_gloo(rank: int | None = None, world_size: int | None = None, timeout: timedelta = TIMEOUT):
    """The default process group over gloo, from the launcher's environment (env://) unless the
    rank and world size are given (torch.multiprocessing.spawn)."""
    import torch.distributed as dist

    kwargs = {} if rank is None else {"rank": rank, "world_size": world_size}
    dist.init_process_group("gloo", timeout=timeout, **kwargs)
    return dist.get_rank(), dist.get_world_size()


def tiny_net():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


def batches(n: int, seed: int = 0, size: int = 4):
    """`n` random regression batches (inputs, targets)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(size, 8, generator=g), torch.randn(size, 1, generator=g)) for _ in range(n)]


def ddp_step(model, optimizer, batch) -> float:
    import torch

    x, y = batch
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()  # DDP all-reduces the gradients here
    optimizer.step()
    return loss.item()


# --- Hugging Face (transformers, TRL, accelerate) -------------------------------------------------


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    import torch

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    import torch

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=2, n_head=2, n_positions=64))


def tiny_tokenizer():
    """A word-level tokenizer over the words w0..w59 plus specials, built locally."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(["<pad>", "<eos>", "<unk>", "<bos>"] + [f"w{i}" for i in range(VOCAB - 4)])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>", bos_token="<bos>")


class TokenDataset:
    """`n` causal-LM samples of integer tokens (a torch map-style dataset for the Trainer)."""

    def __init__(self, n: int = 64, seed: int = 0):
        self.n, self.seed = n, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        import torch

        ids = torch.randint(4, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(self.seed * 100003 + i))
        return {"input_ids": ids, "labels": ids.clone()}


def text_dataset(n: int = 64):
    """A `datasets.Dataset` of short texts over the tiny tokenizer's words (for .map and TRL)."""
    import random

    from datasets import Dataset

    rng = random.Random(0)
    return Dataset.from_dict({"text": [" ".join(f"w{rng.randrange(VOCAB - 4)}" for _ in range(SEQ)) for _ in range(n)]})


def hf_init_gloo() -> None:
    """Initialise the process group before the Trainer does. On CPU (`use_cpu=True`) transformers
    5.23 builds it through accelerate without `ddp_timeout`, so the group would get torch's
    30-minute default; an existing group is used as is."""
    import torch.distributed as dist

    if "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group("gloo", timeout=TIMEOUT)


def hf_args(cls=None, **overrides):
    """Training arguments (or a TRL config class) for two CPU ranks and a short run."""
    if cls is None:
        from transformers import TrainingArguments as cls

    kwargs = dict(output_dir="out", use_cpu=True, report_to="none", per_device_train_batch_size=2,
                  per_device_eval_batch_size=2, logging_steps=1, save_strategy="no", ddp_timeout=TIMEOUT_S,
                  max_steps=8, learning_rate=1e-3, dataloader_num_workers=0)
    kwargs.update(overrides)
    return cls(**kwargs)


# --- Lightning ------------------------------------------------------------------------------------


def lightning_module_class():
    import lightning as L
    import torch

    class TinyRegressor(L.LightningModule):
        """A two-layer regressor; scenarios subclass it to misbehave."""

        def __init__(self, n_batches: int = 16):
            super().__init__()
            self.net = tiny_net()
            self.n_batches = n_batches

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y), sync_dist=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def train_dataloader(self):
            return regression_loader(self.n_batches)

        def val_dataloader(self):
            return regression_loader(4)

    return TinyRegressor


def regression_loader(n_batches: int, seed: int = 0, num_workers: int = 0, dataset=None):
    import torch

    if dataset is None:
        g = torch.Generator().manual_seed(seed)
        dataset = torch.utils.data.TensorDataset(torch.randn(n_batches * 4, 8, generator=g),
                                                 torch.randn(n_batches * 4, 1, generator=g))
    return torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=num_workers)


def lightning_trainer(**overrides):
    """Two CPU processes over gloo with the short timeout. Under torchrun Lightning joins the
    launcher's processes; run as `python script.py` it starts the second rank itself."""
    import lightning as L
    from lightning.pytorch.strategies import DDPStrategy

    kwargs = dict(accelerator="cpu", devices=2, max_steps=12, logger=False, enable_checkpointing=False,
                  enable_model_summary=False, enable_progress_bar=False, limit_val_batches=0,
                  strategy=DDPStrategy(process_group_backend="gloo", timeout=TIMEOUT))
    kwargs.update(overrides)
    return L.Trainer(**kwargs)
