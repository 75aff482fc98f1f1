"""Checkpoint save straggler: rank 0 writes a checkpoint to slow storage for longer than the
collective timeout while the other rank goes on to the next step's all-reduce (plain DDP, HF
Trainer, TRL SFTTrainer) or waits in the barrier after the save (Lightning)."""

from common import (STRAGGLE_S, batches, busy, ddp_step, hf_args, hf_init_gloo, init_gloo, lightning_module_class,
                    lightning_trainer, parse, say, tiny_llama, tiny_net, tiny_tokenizer, text_dataset, TokenDataset)

SAVE_EVERY = 4


def plain():
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init_gloo()
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in enumerate(batches(12, seed=rank), 1):
        loss = ddp_step(model, optimizer, batch)
        if rank == 0:
            say(f"step {step} loss {loss:.4f}")
        if step % SAVE_EVERY == 0 and rank == 0:
            save_checkpoint(model, optimizer, f"checkpoint-{step}.pt")


def save_checkpoint(model, optimizer, path):
    import torch

    say(f"saving checkpoint to {path}")
    torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}, path)
    busy(STRAGGLE_S)  # the write to a slow network filesystem
    say("checkpoint saved")


def hf(trl: bool = False):
    hf_init_gloo()
    import transformers
    from transformers import Trainer

    class SlowStorage:
        def _save(self, output_dir=None, state_dict=None):
            super()._save(output_dir, state_dict)
            if self.args.should_save:
                busy(STRAGGLE_S)  # save_pretrained to a slow network filesystem

    save = dict(save_strategy="steps", save_steps=SAVE_EVERY)
    if trl:
        from trl import SFTConfig, SFTTrainer

        class SlowStorageSFTTrainer(SlowStorage, SFTTrainer):
            pass

        config = hf_args(SFTConfig, max_length=32, bf16=False, **save)
        if config.should_log:  # as the transformers example scripts do
            transformers.utils.logging.set_verbosity_info()
        trainer = SlowStorageSFTTrainer(model=tiny_llama(), args=config, train_dataset=text_dataset(),
                                        processing_class=tiny_tokenizer())
    else:
        class SlowStorageTrainer(SlowStorage, Trainer):
            pass

        config = hf_args(**save)
        if config.should_log:  # as the transformers example scripts do
            transformers.utils.logging.set_verbosity_info()
        trainer = SlowStorageTrainer(model=tiny_llama(), args=config, train_dataset=TokenDataset())
    trainer.train()


def lightning():
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.plugins.io import TorchCheckpointIO

    class SlowStorageIO(TorchCheckpointIO):
        def save_checkpoint(self, checkpoint, path, storage_options=None):
            super().save_checkpoint(checkpoint, path, storage_options)
            busy(STRAGGLE_S)  # a slow network filesystem

    trainer = lightning_trainer(enable_checkpointing=True, plugins=[SlowStorageIO()],
                                callbacks=[ModelCheckpoint(dirpath="checkpoints", every_n_train_steps=SAVE_EVERY)])
    trainer.fit(lightning_module_class()())


if __name__ == "__main__":
    args = parse(("torch", "hf", "trl", "lightning"))
    {"torch": plain, "hf": hf, "trl": lambda: hf(trl=True), "lightning": lightning}[args.framework]()
