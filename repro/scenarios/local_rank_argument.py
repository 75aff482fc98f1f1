"""A training script written for torch 1.x's launcher: it reads its local rank from a
`--local_rank` argument. torch >= 2.0's `torch.distributed.launch` passes `--local-rank=N` instead
(torch/distributed/run.py), and torchrun passes no argument at all (LOCAL_RANK in the environment),
so argparse stops every rank before it joins the process group (exit status 2)."""

import argparse
import os

import torch
import torch.distributed as dist

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    # --required: the script insists on the argument (torchrun then fails it); without it, an
    # unknown --local-rank=N from the launcher fails it
    parser.add_argument("--local_rank", type=int, required=os.environ.get("REPRO_REQUIRE_ARG") == "1")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(args.local_rank)
    t = torch.ones(4)
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()}: all_reduce gave {t.tolist()}")
    dist.destroy_process_group()
