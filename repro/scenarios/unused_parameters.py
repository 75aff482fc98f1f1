"""DDP unused parameters: the model has a head that takes no part in the loss (an auxiliary head
left unused), and DDP runs with find_unused_parameters=False, so the reducer stops at the second
step with its own error (Lightning's strategy words it in its own way)."""

from common import TIMEOUT, TokenDataset, batches, hf_args, hf_init_gloo, init_gloo, lightning_module_class, lightning_trainer, parse, say


def two_headed():
    import torch

    class TwoHeaded(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
            self.head = torch.nn.Linear(16, 1)
            self.aux_head = torch.nn.Linear(16, 4)  # only used by an auxiliary loss that is switched off

        def forward(self, x):
            return self.head(self.body(x))

    return TwoHeaded()


def plain():
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init_gloo()
    model = DDP(two_headed())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(batches(6, seed=rank), 1):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if rank == 0:
            say(f"step {step} loss {loss.item():.4f}")


def lightning():
    Base = lightning_module_class()

    class WithAuxHead(Base):
        def __init__(self):
            super().__init__()
            self.net = two_headed()

    # the default strategy "ddp" has find_unused_parameters=False
    lightning_trainer().fit(WithAuxHead())


def hf():
    hf_init_gloo()
    import torch
    import transformers
    from transformers import Trainer

    from common import tiny_llama

    model = tiny_llama()
    model.aux_head = torch.nn.Linear(16, 4)  # a value head added for a later stage, unused here
    args = hf_args(ddp_find_unused_parameters=False)  # the usual advice for speed
    if args.should_log:
        transformers.utils.logging.set_verbosity_info()
    Trainer(model=model, args=args, train_dataset=TokenDataset()).train()


def accelerate():
    import torch
    from accelerate import Accelerator, InitProcessGroupKwargs

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=TIMEOUT)])
    model = two_headed()
    model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.01))
    for step, (x, y) in enumerate(batches(6, seed=accelerator.process_index), 1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        accelerator.print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    args = parse(("torch", "lightning", "hf", "accelerate"))
    {"torch": plain, "lightning": lightning, "hf": hf, "accelerate": accelerate}[args.framework]()
