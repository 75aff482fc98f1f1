"""Logging straggler: rank 0 blocks on a metrics upload (an experiment tracker whose endpoint is
slow) for longer than the collective timeout while the other rank waits in the next step's
collective."""

from common import (STRAGGLE_S, TokenDataset, batches, busy, ddp_step, hf_args, hf_init_gloo, init_gloo,
                    lightning_module_class, lightning_trainer, parse, say, tiny_llama, tiny_net)

STALL_AT = 4


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
            if step == STALL_AT:
                say("uploading metrics to the experiment tracker")
                busy(STRAGGLE_S)  # the tracker's HTTP endpoint does not answer


def hf():
    hf_init_gloo()
    import transformers
    from transformers import Trainer, TrainerCallback

    class TrackerCallback(TrainerCallback):
        """Sends the logged metrics to an experiment tracker (main process only)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and state.global_step == STALL_AT:
                busy(STRAGGLE_S)  # the tracker's HTTP endpoint does not answer

    args = hf_args()
    if args.should_log:  # as the transformers example scripts do
        transformers.utils.logging.set_verbosity_info()
    trainer = Trainer(model=tiny_llama(), args=args, train_dataset=TokenDataset(), callbacks=[TrackerCallback()])
    trainer.train()


def lightning():
    from lightning.pytorch.loggers import Logger
    from lightning.pytorch.utilities import rank_zero_only

    class TrackerLogger(Logger):
        """An experiment tracker's logger (Lightning calls it on global rank 0 only)."""

        name, version = "tracker", "0"

        @rank_zero_only
        def log_metrics(self, metrics, step=None):
            if step == STALL_AT:
                busy(STRAGGLE_S)  # the tracker's HTTP endpoint does not answer

        @rank_zero_only
        def log_hyperparams(self, params, *args, **kwargs):
            pass

    trainer = lightning_trainer(logger=TrackerLogger(), log_every_n_steps=1)
    trainer.fit(lightning_module_class()())


if __name__ == "__main__":
    args = parse(("torch", "hf", "lightning"))
    {"torch": plain, "hf": hf, "lightning": lightning}[args.framework]()
