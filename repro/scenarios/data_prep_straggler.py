"""Data preparation straggler: the main process tokenizes the dataset first (main_process_first,
or `if rank != 0: barrier()`), for longer than the collective timeout, while the other rank waits
in the barrier."""

from common import STRAGGLE_S, TIMEOUT, busy, ddp_step, hf_args, hf_init_gloo, init_gloo, parse, say, text_dataset, tiny_llama, tiny_net, tiny_tokenizer, batches

N = 32


def slow_tokenize(tokenizer):
    def tokenize(example):
        busy(STRAGGLE_S / N)  # a slow tokenizer / feature extractor, per example
        return tokenizer(example["text"])
    return tokenize


def plain():
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = init_gloo()
    if rank != 0:
        dist.barrier()  # wait for rank 0 to build the cache
    else:
        say("building the tokenized dataset cache (rank 0 first)")
        busy(STRAGGLE_S)
        dist.barrier()
    model = DDP(tiny_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in enumerate(batches(8, seed=rank), 1):
        ddp_step(model, optimizer, batch)


def hf():
    hf_init_gloo()
    import transformers
    from transformers import Trainer, DataCollatorForLanguageModeling

    args = hf_args()
    if args.should_log:  # as the transformers example scripts do
        transformers.utils.logging.set_verbosity_info()
    tokenizer = tiny_tokenizer()
    with args.main_process_first(desc="dataset map tokenization"):
        dataset = text_dataset(N).map(slow_tokenize(tokenizer), remove_columns=["text"], desc="Running tokenizer on dataset")
    trainer = Trainer(model=tiny_llama(), args=args, train_dataset=dataset,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    trainer.train()


def accelerate():
    import torch
    from accelerate import Accelerator, InitProcessGroupKwargs

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=TIMEOUT)])
    tokenizer = tiny_tokenizer()
    with accelerator.main_process_first():
        dataset = text_dataset(N).map(slow_tokenize(tokenizer), remove_columns=["text"], desc="Running tokenizer on dataset")
    model = tiny_llama()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    for example in dataset.with_format("torch"):
        ids = example["input_ids"][None]
        accelerator.backward(model(input_ids=ids, labels=ids).loss)
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    args = parse(("torch", "hf", "accelerate"))
    {"torch": plain, "hf": hf, "accelerate": accelerate}[args.framework]()
