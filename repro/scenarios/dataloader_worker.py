"""DataLoader worker death on rank 1: a worker process is killed with SIGKILL (`--how kill`, as the
OOM killer does to a worker) or raises on a corrupt sample (`--how raise`); the rank's main
process reports it and dies while the other rank waits in a collective."""

import os
import signal

from common import parse
from drivers import FRAMEWORKS, drive


def killed():
    os.kill(os.getpid(), signal.SIGKILL)


def corrupt_sample():
    raise ValueError("sample 37: truncated record (expected 8 features, got 5)")


if __name__ == "__main__":
    args, rest = parse(FRAMEWORKS, known=True, how={"choices": ("kill", "raise"), "default": "kill"})
    drive(args.framework, killed if args.how == "kill" else corrupt_sample, workers=2, after=3, cli_args=rest)
