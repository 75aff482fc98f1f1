"""A healthy run that only warns: DDP is told to look for unused parameters
(find_unused_parameters=True, often set once to silence an earlier error) while every parameter
takes part in the loss. The reducer then prints its performance warning, and training finishes
normally: nothing is wrong but an extra pass over the autograd graph each step."""

from common import TokenDataset, batches, ddp_step, hf_args, hf_init_gloo, init_gloo, lightning_module_class, lightning_trainer, parse, say, tiny_net


def plain():
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init_gloo()
    model = DDP(tiny_net(), find_unused_parameters=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in enumerate(batches(6, seed=rank), 1):
        loss = ddp_step(model, optimizer, batch)
        if rank == 0:
            say(f"step {step} loss {loss:.4f}")
    say("training finished")
    # end as a healthy job does: every rank leaves together, DDP (its reducer and autograd hooks) is
    # released, and the group is torn down; a rank that exits with them alive can abort in torch
    # 2.13's teardown ("terminate called without an active exception")
    torch.distributed.barrier()
    del model, optimizer
    import gc

    gc.collect()
    torch.distributed.destroy_process_group()


def lightning():
    from lightning.pytorch.strategies import DDPStrategy

    from common import TIMEOUT

    strategy = DDPStrategy(process_group_backend="gloo", timeout=TIMEOUT, find_unused_parameters=True)
    lightning_trainer(strategy=strategy).fit(lightning_module_class()())
    say("training finished")


def hf():
    hf_init_gloo()
    import transformers
    from transformers import Trainer

    from common import tiny_llama

    args = hf_args(ddp_find_unused_parameters=True)
    if args.should_log:
        transformers.utils.logging.set_verbosity_info()
    Trainer(model=tiny_llama(), args=args, train_dataset=TokenDataset()).train()
    say("training finished")


if __name__ == "__main__":
    args = parse(("torch", "lightning", "hf"))
    {"torch": plain, "lightning": lightning, "hf": hf}[args.framework]()
