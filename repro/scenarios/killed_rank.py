"""A killed rank: rank 1 is killed with SIGKILL mid-training (as the kernel's OOM killer or a
scheduler does), so it prints nothing; the other rank's collective fails or times out."""

import os
import signal

from common import parse
from drivers import FRAMEWORKS, drive


def killed():
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    args, rest = parse(FRAMEWORKS, known=True)
    drive(args.framework, killed, cli_args=rest)
