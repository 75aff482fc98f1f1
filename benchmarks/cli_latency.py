"""End-to-end wall time of `advisor suggest --error "<one line>"`, against interpreter baselines.

Each command runs as a fresh process (what a user at a terminal pays), round-robin over the commands
so that machine noise hits every row alike; the table shows the median and the spread, and each row
as a ratio of `python -c pass` measured in the same run. One warm-up run of each command first fills
the OS page cache and the advisor's KB cache, as on any second use; `--cold` clears the KB cache
before every advisor run instead, to show first-use cost.

Usage:  python benchmarks/cli_latency.py [--runs 21] [--cold]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ERROR_LINE = (
    "[rank3]:[E506 08:41:53.511 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=59709, OpType=_ALLGATHER_BASE, NumelIn=194510848, NumelOut=1556086784, Timeout(ms)=1800000) "
    "ran for 1800098 milliseconds before timing out."
)
TARGET_S = 0.2


def advisor_command() -> list[str]:
    """The installed console script next to this interpreter, else `python -m advisor`."""
    script = Path(sys.executable).with_name("advisor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "advisor"]


def time_once(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1 = "not sure", still a complete answer
        raise SystemExit(f"{' '.join(command[:3])}... failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return elapsed


def measure(rows, runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    """Round-robin over the commands, so machine noise (a 2-core VM is noisy) hits all alike."""
    samples: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    for _, command, before in rows:  # warm-up: page cache, KB cache
        if before:
            before()
        time_once(command, env)
    for _ in range(runs):
        for label, command, before in rows:
            if before:
                before()
            samples[label].append(time_once(command, env))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="rounds over all commands (default 21)")
    parser.add_argument("--cold", action="store_true", help="clear the KB cache before every advisor run")
    args = parser.parse_args()

    cache_dir = tempfile.mkdtemp(prefix="advisor-bench-cache-")
    env = dict(os.environ, ADVISOR_CACHE_DIR=cache_dir, NO_COLOR="1")
    env.pop("ADVISOR_NO_CACHE", None)

    def clear_cache() -> None:
        shutil.rmtree(cache_dir, ignore_errors=True)

    before = clear_cache if args.cold else None
    suggest = [*advisor_command(), "suggest", "--error", ERROR_LINE]
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"], None),
        ("python -c 'import advisor'", [sys.executable, "-c", "import advisor"], None),
        ("advisor --version", [*advisor_command(), "--version"], None),
        ("advisor suggest --error <line>", suggest, before),
        ("advisor suggest --error <line> --json", [*suggest, "--json"], before),
    ]
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"{args.runs} rounds over all commands after one warm-up each; KB cache "
          f"{'cleared before each advisor run' if args.cold else 'warm'}\n")
    print(f"{'command':<42} {'median':>9} {'min':>9} {'p90':>9} {'x pass':>8}")
    try:
        results = {}
        baseline = None
        for label, samples in measure(rows, args.runs, env).items():
            samples.sort()
            median = statistics.median(samples)
            baseline = baseline or median
            p90 = samples[min(len(samples) - 1, int(0.9 * len(samples)))]
            results[label] = median
            print(f"{label:<42} {median * 1000:>7.0f}ms {samples[0] * 1000:>7.0f}ms {p90 * 1000:>7.0f}ms "
                  f"{median / baseline:>7.1f}x")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)

    got = results["advisor suggest --error <line>"]
    own = got - results["python -c pass"]
    print(f"\nsuggest median {got:.3f} s (target <= {TARGET_S} s: {'met' if got <= TARGET_S else 'NOT met'}); "
          f"above a bare interpreter: {own:.3f} s")


if __name__ == "__main__":
    main()
