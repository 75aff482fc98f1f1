"""Wall time of `advisor env` (its budget: under 2 s, nvidia-smi included) and `advisor preflight`,
each a fresh process, against `python -c pass` measured in the same run (round-robin, median and
spread, as cli_latency.py does). On a GPU node the `advisor env` row includes nvidia-smi's own time.

Usage:  python benchmarks/env_preflight.py [--runs 11]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cli_latency import advisor_command, measure  # noqa: E402

FIX = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "preflight"
BUDGET_S = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    env = dict(os.environ, ADVISOR_CACHE_DIR=tempfile.mkdtemp(prefix="advisor-bench-cache-"), NO_COLOR="1")
    advisor = advisor_command()
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"], None),
        ("advisor env --json", [*advisor, "env", "--json"], None),
        ("advisor env --json --mask-hosts", [*advisor, "env", "--json", "--mask-hosts"], None),
        ("advisor preflight (this machine)", [*advisor, "preflight"], None),
        ("advisor preflight --config (LLaMA-Factory 70 B)", [*advisor, "preflight", "--no-local-env", "--config",
                                                            str(FIX / "configs" / "llamafactory_llama2_70b_full_sft.yaml")], None),
        ("advisor preflight, 2 nodes + config", [*advisor, "preflight", "--env", str(FIX / "env" / "node0.json"), "--env",
                                                 str(FIX / "env" / "node1.json"), "--config",
                                                 str(FIX / "configs" / "trl_sft_qwen.yaml")], None),
    ]
    samples = measure(rows, args.runs, env)
    base = statistics.median(samples["python -c pass"])
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, {args.runs} runs each\n")
    print(f"| command | median | min-max | x python -c pass |\n| --- | --- | --- | --- |")
    for label, values in samples.items():
        median = statistics.median(values)
        print(f"| {label} | {median * 1000:.0f} ms | {min(values) * 1000:.0f}-{max(values) * 1000:.0f} ms | {median / base:.1f} |")
    worst = max(samples["advisor env --json"])
    print(f"\nadvisor env: slowest run {worst:.2f} s, budget {BUDGET_S:g} s: {'met' if worst < BUDGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
