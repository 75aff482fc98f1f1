"""Guided-question dialogue, simulated on the labelled cases.

For every case: diagnose the log, then answer the advisor's first question the way the case's
reporter would (from the case's metadata; `unknown` when the field is null or not recorded), and
repeat until the advisor asks nothing more (or 8 rounds). Reports top-1 accuracy after the
dialogue (the label or an also_acceptable code) and the number of questions asked per case.
Target: top-1 >= 0.90 with <= 2 questions per case on average.

Usage:  python benchmarks/dialogue.py [--cases DIR] [--verbose]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CASES = ROOT.parent / "shared" / "cases"
MAX_ROUNDS = 8


@functools.lru_cache(maxsize=1)
def _accuracy():
    """benchmarks/accuracy.py, whose metadata_answer says how a case's reporter answers."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("accuracy_benchmark", Path(__file__).resolve().parent / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def simulate(case: dict, kb) -> dict:
    from advisor.diagnose import conclude, read_log
    from advisor.models import DiagnoseRequest

    accept = {case["cause"], *(case.get("also_acceptable") or [])}
    reading = read_log(kb, case["log"])
    answers: dict[str, str] = {}
    asked: list[str] = []
    for _ in range(MAX_ROUNDS):
        d = conclude(kb, reading, DiagnoseRequest(log=case["log"], answers=answers))
        if not d.questions:
            break
        q = d.questions[0]
        answers[q.id] = _accuracy().metadata_answer(case, q.id)
        asked.append(q.id)
    top = d.causes[0] if d.causes else None
    return {"id": case["id"], "asked": asked, "top": top.code if top else None, "correct": bool(top and top.code in accept),
            "cause": case["cause"]}


def main(argv: list[str] | None = None) -> int:
    from advisor.knowledge import load_kb

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    paths = sorted(args.cases.glob("*.yaml"))
    if not paths:
        print(f"no cases at {args.cases}", file=sys.stderr)
        return 2
    kb = load_kb()
    rows = [simulate(yaml.safe_load(p.read_text(encoding="utf-8")), kb) for p in paths]
    top1 = sum(r["correct"] for r in rows) / len(rows)
    per_case = [len(r["asked"]) for r in rows]
    print(f"{len(rows)} cases: top-1 after the dialogue {top1:.2f}; questions asked per case: "
          f"mean {statistics.mean(per_case):.2f}, median {statistics.median(per_case):g}, max {max(per_case)}")
    print("target: top-1 >= 0.90 with <= 2 questions per case on average")
    for r in rows:
        if args.verbose or not r["correct"]:
            mark = "ok  " if r["correct"] else "MISS"
            print(f"  {mark} {r['id']}: asked {r['asked'] or '-'} -> {r['top']} (label {r['cause']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
