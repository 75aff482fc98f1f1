"""Mismatched collectives: the ranks call different collectives at the same point of the program
(`--kind op`: rank 0 all_reduce, rank 1 all_gather, from a rank-conditional branch), the same
collective with different shapes (`--kind shape`), or (Lightning) a metric synced with
`sync_dist=True` from inside an `if self.trainer.is_global_zero:` block."""

import os

from common import batches, init_gloo, lightning_module_class, lightning_trainer, parse, say, tiny_net


def average_gradients(model, world: int) -> None:
    """Data parallelism by hand, as torch's "Writing Distributed Applications" tutorial does."""
    import torch.distributed as dist

    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def plain(kind: str, rank=None, world_size=None):
    import torch
    import torch.distributed as dist

    rank, world = init_gloo(rank, world_size)
    model = tiny_net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(batches(6, seed=rank), 1):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        average_gradients(model, world)
        optimizer.step()
        loss = loss.item()
        if step == 3:
            stat = torch.tensor([loss])
            if kind == "op":
                if rank == 0:
                    dist.all_reduce(stat)  # the mean loss for the log
                else:
                    gathered = [torch.zeros(1) for _ in range(world)]
                    dist.all_gather(gathered, stat)  # every rank's loss for a histogram
            else:
                # each rank reports the per-sample losses of its own, differently sized, last batch
                per_sample = torch.full((4 + rank * 3,), loss)
                dist.all_reduce(per_sample)
            if rank == 0:
                say(f"step {step} loss {stat.item():.4f}")


def spawned(rank: int, kind: str):
    plain(kind, rank, 2)


def lightning():
    Base = lightning_module_class()

    class MainRankMetric(Base):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            if self.trainer.is_global_zero and batch_idx == 2:
                self.log("loss_synced", loss, sync_dist=True)  # only rank 0 enters the all_reduce
            return loss

    lightning_trainer().fit(MainRankMetric())


if __name__ == "__main__":
    args = parse(("torch", "spawn", "lightning"), kind={"choices": ("op", "shape"), "default": "op"})
    if args.framework == "spawn":
        import torch.multiprocessing as mp

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        mp.spawn(spawned, args=(args.kind,), nprocs=2)
    elif args.framework == "lightning":
        lightning()
    else:
        plain(args.kind)
