"""One small training job per framework, over a dataset the scenario may rig: the scenarios in
which a rank fails (an exception, SIGKILL, an allocation failure, a DataLoader worker's death) only
say how the failure happens and let the framework's own loop meet it.

`Trap` wraps a dataset: on rank 1, the n-th sample read runs the failure (in the training
process, or in a DataLoader worker when the loader has workers), as a corrupt record, an
oversized sample or the kernel's OOM killer would.
"""

from __future__ import annotations

import os

from common import (TIMEOUT, TokenDataset, env_rank, hf_args, hf_init_gloo, init_gloo, lightning_module_class, lightning_trainer, say,
                    text_dataset, tiny_llama, tiny_net, tiny_tokenizer)

FRAMEWORKS = ("torch", "spawn", "hf", "trl", "lightning", "lightning-cli", "accelerate")


class Trap:
    """`dataset` whose `after`-th read on rank `rank` calls `failure()` first."""

    def __init__(self, dataset, failure, after: int = 10, rank: int = 1):
        self.dataset, self.failure, self.after, self.rank = dataset, failure, after, rank
        self.reads = 0

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        self.reads += 1
        if env_rank() == self.rank and self.reads == self.after:
            self.failure()
        return self.dataset[i]


def regression_dataset(n: int = 64):
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g))


def drive(framework: str, failure, workers: int = 0, after: int = 10, cli_args: list[str] | None = None) -> None:
    """Train with `framework` (launched as its run in scenarios.yaml says) over a trapped dataset."""
    if framework == "spawn":
        import torch.multiprocessing as mp

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        mp.spawn(_spawned, args=(failure, workers, after), nprocs=2)
    elif framework == "hf":
        _hf(Trap(TokenDataset(), failure, after), workers)
    elif framework == "trl":
        _trl(failure, workers, after)
    elif framework in ("lightning", "lightning-cli"):
        _lightning(framework, Trap(regression_dataset(), failure, after), workers, cli_args or [])
    elif framework == "accelerate":
        _accelerate(Trap(regression_dataset(), failure, after), workers)
    else:
        _plain(Trap(regression_dataset(), failure, after), workers)


def _spawned(rank: int, failure, workers: int, after: int) -> None:
    os.environ["RANK"] = str(rank)  # what the trap reads; mp.spawn only passes the index
    _plain(Trap(regression_dataset(), failure, after), workers, rank=rank, world_size=2)


def _plain(dataset, workers: int, rank=None, world_size=None) -> None:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler

    rank, world = init_gloo(rank, world_size)
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset, shuffle=False), num_workers=workers)
    for epoch in range(2):
        for step, (x, y) in enumerate(loader, 1):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            if rank == 0:
                say(f"epoch {epoch} step {step} loss {loss.item():.4f}")


def _hf(dataset, workers: int) -> None:
    hf_init_gloo()
    import transformers
    from transformers import Trainer

    args = hf_args(dataloader_num_workers=workers)
    if args.should_log:  # as the transformers example scripts do
        transformers.utils.logging.set_verbosity_info()
    Trainer(model=tiny_llama(), args=args, train_dataset=dataset).train()


def _trl(failure, workers: int, after: int) -> None:
    """TRL's SFTTrainer over texts it tokenizes itself; the trap wraps the tokenized dataset, so the
    failure meets TRL's own collator and training loop."""
    hf_init_gloo()
    import transformers
    from trl import SFTConfig, SFTTrainer

    config = hf_args(SFTConfig, max_length=32, bf16=False, dataloader_num_workers=workers)
    if config.should_log:  # as the transformers example scripts do
        transformers.utils.logging.set_verbosity_info()
    trainer = SFTTrainer(model=tiny_llama(), args=config, train_dataset=text_dataset(), processing_class=tiny_tokenizer())
    tokenized = trainer.train_dataset
    if "text" in tokenized.column_names:  # the raw text: TRL's collator reads only the token columns
        tokenized = tokenized.remove_columns("text")
    trainer.train_dataset = Trap(tokenized, failure, after)
    trainer.train()


def _lightning(framework: str, dataset, workers: int, cli_args: list[str]) -> None:
    from common import regression_loader

    Base = lightning_module_class()

    class Regressor(Base):
        def __init__(self, num_workers: int = 0):
            super().__init__()
            self.num_workers = num_workers

        def train_dataloader(self):
            return regression_loader(0, dataset=dataset, num_workers=self.num_workers)

    if framework == "lightning":
        lightning_trainer().fit(Regressor(workers))
        return
    from jsonargparse import lazy_instance
    from lightning.pytorch.cli import LightningCLI
    from lightning.pytorch.strategies import DDPStrategy

    # the command line carries `fit --model.num_workers N --trainer.max_steps ...`
    LightningCLI(Regressor, save_config_callback=None, args=cli_args,
                 trainer_defaults=dict(accelerator="cpu", devices=2, logger=False, enable_checkpointing=False,
                                       strategy=lazy_instance(DDPStrategy, process_group_backend="gloo", timeout=TIMEOUT)))


def _accelerate(dataset, workers: int) -> None:
    import torch
    from accelerate import Accelerator, InitProcessGroupKwargs

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=TIMEOUT)])
    model = tiny_net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=workers)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        accelerator.print(f"epoch {epoch} loss {loss.item():.4f}")
