"""Uneven inputs: the ranks get different numbers of batches (each rank reads its own shard of a
different size), so one rank finishes its loop while the other still trains and waits in a
collective no one else will enter."""

from common import TIMEOUT, batches, ddp_step, init_gloo, lightning_module_class, lightning_trainer, parse, regression_loader, say, text_dataset, tiny_llama, tiny_net, tiny_tokenizer


def shard_batches(rank: int) -> int:
    return 8 if rank == 0 else 5  # shard sizes the data pipeline produced


def plain():
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init_gloo()
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in enumerate(batches(shard_batches(rank), seed=rank), 1):
        loss = ddp_step(model, optimizer, batch)
        if rank == 0:
            say(f"step {step} loss {loss:.4f}")
    say(f"[rank {rank}] finished training")
    torch.distributed.destroy_process_group()


def lightning():
    import os

    Base = lightning_module_class()

    class ShardedData(Base):
        def train_dataloader(self):
            return regression_loader(shard_batches(self.global_rank), seed=self.global_rank)

    # each rank reads its own shard: the distributed sampler is turned off
    trainer = lightning_trainer(max_steps=-1, max_epochs=2, use_distributed_sampler=False)
    trainer.fit(ShardedData())


def accelerate():
    import torch
    from accelerate import Accelerator, DataLoaderConfiguration, InitProcessGroupKwargs

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=TIMEOUT)],
                              dataloader_config=DataLoaderConfiguration(even_batches=False))
    model = tiny_net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    dataset = torch.utils.data.TensorDataset(torch.randn(26, 8, generator=g), torch.randn(26, 1, generator=g))
    loader = torch.utils.data.DataLoader(dataset, batch_size=4)  # 7 batches over 2 ranks
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        accelerator.print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    args = parse(("torch", "lightning", "accelerate"))
    {"torch": plain, "lightning": lightning, "accelerate": accelerate}[args.framework]()
