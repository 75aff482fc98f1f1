"""Evaluation straggler: rank 0 runs a slow evaluation (a generation-based metric only the main
process computes) for longer than the collective timeout while the other rank has gone back to
training and waits in its next collective."""

import os

from common import (STRAGGLE_S, TokenDataset, batches, busy, ddp_step, hf_args, hf_init_gloo, init_gloo,
                    lightning_module_class, lightning_trainer, parse, say, tiny_llama, tiny_net)

EVAL_EVERY = 4


def plain():
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init_gloo()
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    held_out = batches(4, seed=99)
    for step, batch in enumerate(batches(12, seed=rank), 1):
        loss = ddp_step(model, optimizer, batch)
        if rank == 0:
            say(f"step {step} loss {loss:.4f}")
        if step % EVAL_EVERY == 0 and rank == 0:
            say(f"evaluating at step {step}")
            with torch.no_grad():
                val = sum(torch.nn.functional.mse_loss(model.module(x), y).item() for x, y in held_out) / len(held_out)
            busy(STRAGGLE_S)  # generating samples for a slow metric
            say(f"eval loss {val:.4f}")


def hf():
    hf_init_gloo()
    import transformers
    from transformers import Trainer

    def compute_metrics(prediction):
        if int(os.environ.get("RANK", "0")) == 0:
            busy(STRAGGLE_S)  # a slow generation-based metric, computed by the main process only
        return {"n": float(len(prediction.label_ids))}

    args = hf_args(eval_strategy="steps", eval_steps=EVAL_EVERY, eval_accumulation_steps=1)
    if args.should_log:  # as the transformers example scripts do
        transformers.utils.logging.set_verbosity_info()
    trainer = Trainer(model=tiny_llama(), args=args, train_dataset=TokenDataset(), eval_dataset=TokenDataset(8, seed=1),
                      compute_metrics=compute_metrics)
    trainer.train()


def lightning():
    Base = lightning_module_class()

    class SlowSampling(Base):
        def on_validation_epoch_end(self):
            if self.trainer.is_global_zero:
                busy(STRAGGLE_S)  # generating samples from the main process only

    trainer = lightning_trainer(limit_val_batches=2, val_check_interval=EVAL_EVERY)
    trainer.fit(SlowSampling())


if __name__ == "__main__":
    args = parse(("torch", "hf", "lightning"))
    {"torch": plain, "hf": hf, "lightning": lightning}[args.framework]()
