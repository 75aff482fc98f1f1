"""Start-up skew: rank 1 spends longer loading its model from slow storage than the timeout
allows before it joins the process group, so rank 0 gives up waiting for it at initialisation."""

import os

from common import STRAGGLE_S, batches, busy, ddp_step, init_gloo, parse, say, tiny_net


def train(rank=None, world_size=None):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    me = rank if rank is not None else int(os.environ["RANK"])
    say(f"[rank {me}] loading model weights")
    if me == 1:
        busy(STRAGGLE_S)  # the model is read from a slow network filesystem on this node
    rank, world = init_gloo(rank, world_size)
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in enumerate(batches(8, seed=rank), 1):
        ddp_step(model, optimizer, batch)


if __name__ == "__main__":
    args = parse(("torch", "spawn"))
    if args.framework == "spawn":
        import torch.multiprocessing as mp

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        mp.spawn(train, args=(2,), nprocs=2)
    else:
        train()
