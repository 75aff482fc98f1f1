"""A healthy DDP training script (it succeeds when launched right): the launch-configuration
scenarios (ports, node ranks, rendezvous, network interface) start it wrongly."""

import os

from common import batches, ddp_step, init_gloo, parse, say, tiny_net


def train(rank=None, world_size=None):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init_gloo(rank, world_size)
    say(f"[rank {rank}] joined a world of {world}")
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in enumerate(batches(8, seed=rank), 1):
        loss = ddp_step(model, optimizer, batch)
        if rank == 0:
            say(f"step {step} loss {loss:.4f}")
    say(f"[rank {rank}] done")
    torch.distributed.destroy_process_group()


def spawned(rank: int, world_size: int):
    train(rank, world_size)


def accelerate():
    import torch
    from accelerate import Accelerator, InitProcessGroupKwargs

    from common import TIMEOUT

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=TIMEOUT)])
    model = tiny_net()
    model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.01))
    for step, batch in enumerate(batches(8, seed=accelerator.process_index), 1):
        loss = ddp_step(model, optimizer, batch)  # accelerate's DDP wrapper all-reduces in backward
        accelerator.print(f"step {step} loss {loss:.4f}")


def lightning(num_nodes: int, devices: int):
    from common import lightning_module_class, lightning_trainer

    lightning_trainer(num_nodes=num_nodes, devices=devices).fit(lightning_module_class()())


if __name__ == "__main__":
    args = parse(("torch", "spawn", "accelerate", "lightning"), world_size={"type": int, "default": None,
                                                 "help": "the world size the job's config claims (spawn: processes start 2)"},
                 num_nodes={"type": int, "default": 1, "help": "Lightning: nodes"},
                 devices={"type": int, "default": 2, "help": "Lightning: processes per node"})
    if args.framework == "spawn":
        import torch.multiprocessing as mp

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        mp.spawn(spawned, args=(args.world_size or 2,), nprocs=2)
    elif args.framework == "accelerate":
        accelerate()
    elif args.framework == "lightning":
        lightning(args.num_nodes, args.devices)
    elif args.world_size:
        train(int(os.environ["RANK"]), args.world_size)  # the world size from the job's config, not the launcher's
    else:
        train()
