"""A save that is a collective, called on one rank only: after training, the script saves under a
rank check (`if trainer.is_global_zero:` / `if rank == 0:`), but the save ends in a barrier
(Lightning's Trainer.save_checkpoint; a hand-written save helper that waits for everyone), so
rank 0 waits in it for a rank that has moved on to its own final collective, or has exited."""

from common import batches, ddp_step, init_gloo, lightning_module_class, lightning_trainer, parse, say, tiny_net


def plain():
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    def save_checkpoint(model, path):
        torch.save(model.module.state_dict(), path)
        dist.barrier()  # "make sure the file is complete before anyone reads it"

    rank, world = init_gloo()
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in enumerate(batches(6, seed=rank), 1):
        loss = ddp_step(model, optimizer, batch)
        if rank == 0:
            say(f"step {step} loss {loss:.4f}")
    if rank == 0:
        say("saving final checkpoint to final.pt")
        save_checkpoint(model, "final.pt")
    total = torch.tensor([float(step)])
    dist.all_reduce(total)  # the steps every rank ran, for the summary line
    if rank == 0:
        say(f"done: {int(total.item())} steps in all")
    dist.destroy_process_group()


def lightning():
    trainer = lightning_trainer(max_steps=6)
    trainer.fit(lightning_module_class()())
    if trainer.is_global_zero:
        print("saving final checkpoint to final.ckpt", flush=True)
        trainer.save_checkpoint("final.ckpt")  # ends in strategy.barrier("Trainer.save_checkpoint")
    trainer.strategy.barrier("end of script")


if __name__ == "__main__":
    args = parse(("torch", "lightning"))
    {"torch": plain, "lightning": lightning}[args.framework]()
