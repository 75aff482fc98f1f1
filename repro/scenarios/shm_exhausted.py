"""/dev/shm too small for the DataLoader: worker processes hand their batches to the training
process through shared memory, and a container's default /dev/shm (64 MB in Docker) fills up. The
run is started in a mount namespace whose /dev/shm is a 1 MB tmpfs (repro/scenarios.yaml), so a
worker's 4 MB batch cannot be backed: the worker dies of SIGBUS, or the allocation fails."""

from common import init_gloo, parse, say, tiny_net


class BigSamples:
    """Samples of 1 M floats (4 MB): one batch no longer fits the small /dev/shm."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        import torch

        return torch.full((1024, 1024), float(i)), torch.zeros(1)


def plain():
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler

    rank, world = init_gloo()
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = BigSamples()
    loader = DataLoader(data, batch_size=2, sampler=DistributedSampler(data), num_workers=2)
    for step, (x, y) in enumerate(loader, 1):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[:, 0, :8]), y)
        loss.backward()
        optimizer.step()
        if rank == 0:
            say(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    args = parse(("torch",))
    {"torch": plain}[args.framework]()
