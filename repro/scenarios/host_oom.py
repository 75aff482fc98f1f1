"""Host memory exhausted: rank 1 asks for a buffer larger than the machine's memory (an oversized
sample materialised in host RAM) and the CPU allocator refuses it.

Needs the kernel's default heuristic overcommit (vm.overcommit_memory 0 or 2), which refuses an
allocation of many times the physical memory at once."""

import os

from common import parse
from drivers import FRAMEWORKS, drive


def oversized_sample():
    import torch

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    side = int((16 * physical / 4) ** 0.5)  # float32 elements: 16 times the machine's memory
    return torch.empty((side, side), dtype=torch.float32)


if __name__ == "__main__":
    args, rest = parse(FRAMEWORKS, known=True)
    drive(args.framework, oversized_sample, cli_args=rest)
