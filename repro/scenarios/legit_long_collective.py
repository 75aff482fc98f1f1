"""A collective that is simply longer than the timeout: rank 0 broadcasts 1 GiB of model weights
(what DDP's constructor does to sync the initial parameters) in a process group created with a
100 ms timeout, and sending that much over gloo takes longer; nothing is wrong with any rank."""

import os
from datetime import timedelta

from common import init_gloo, parse, say

SYNC_TIMEOUT = timedelta(milliseconds=100)
NUMEL = 256 * 1024 * 1024  # float32: 1 GiB


def run(rank=None, world_size=None):
    import torch
    import torch.distributed as dist

    rank, world = init_gloo(rank, world_size)
    dist.barrier()
    sync_group = dist.new_group(timeout=SYNC_TIMEOUT)  # the group for the weight sync, with its own timeout
    weights = torch.ones(NUMEL)
    if rank == 0:
        say(f"broadcasting {NUMEL * 4 / 2**30:.1f} GiB of initial weights from rank 0")
    dist.broadcast(weights, src=0, group=sync_group)
    if rank == 0:
        say("synced")
    dist.destroy_process_group()


def spawned(rank: int):
    run(rank, 2)


if __name__ == "__main__":
    args = parse(("torch", "spawn"))
    if args.framework == "spawn":
        import torch.multiprocessing as mp

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        mp.spawn(spawned, nprocs=2)
    else:
        run()
