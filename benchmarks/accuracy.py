"""Accuracy of the diagnosis on the labelled cases, through the CLI's JSON contract.

For every case in ../shared/cases (or --cases DIR): run `advisor suggest --json` on its log, once
with the log alone and once with the case's metadata given as answers (`--answer id=value` for each
known metadata field, `unknown` for nulls), and compare the ranked cause codes with the label. A
prediction counts as correct when its code is the case's `cause` or one of its `also_acceptable`
codes; the strict figures (primary label only) are printed too.

Usage:  python benchmarks/accuracy.py [--cases DIR] [--json] [--strict-only]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CASES = ROOT.parent / "shared" / "cases"
ANSWER_FIELDS = ("framework", "framework_version", "torch_version", "nodes", "gpus_per_node", "model_size_b", "phase")


def case_answers(case: dict) -> list[str]:
    args = []
    for field in ANSWER_FIELDS:
        value = case.get(field)
        if value is None or (field == "phase" and value == "unknown"):
            value = "unknown"
        args += ["--answer", f"{field}={value}"]
    return args


def run_cli(argv: list[str]) -> dict:
    from advisor.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    if code not in (0, 1):
        raise RuntimeError(f"advisor exited {code}: {err.getvalue().strip()}")
    return json.loads(out.getvalue())


def evaluate(cases_dir: Path) -> dict:
    rows = []
    for path in sorted(cases_dir.glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        accept = {case["cause"], *(case.get("also_acceptable") or [])}
        row = {"id": case["id"], "cause": case["cause"], "accept": sorted(accept)}
        for mode, extra in (("log", []), ("answers", case_answers(case))):
            result = run_cli(["suggest", "--error", case["log"], "--json", "--max-causes", "10", *extra])
            codes = [c["code"] for c in result["causes"]]  # the order the advisor presents
            row[mode] = {
                "top": codes[:3],
                "top1": bool(codes[:1]) and codes[0] in accept,
                "top3": any(c in accept for c in codes[:3]),
                "top1_strict": bool(codes[:1]) and codes[0] == case["cause"],
                "top3_strict": case["cause"] in codes[:3],
                "questions": [q["id"] for q in result["questions"]],
                "status": result["status"],
            }
        rows.append(row)
    n = len(rows)

    def rate(mode: str, key: str) -> float:
        return sum(r[mode][key] for r in rows) / n if n else 0.0

    summary = {
        "cases": n,
        "log_alone": {k: round(rate("log", k), 3) for k in ("top1", "top3", "top1_strict", "top3_strict")},
        "with_answers": {k: round(rate("answers", k), 3) for k in ("top1", "top3", "top1_strict", "top3_strict")},
    }
    return {"summary": summary, "cases": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = parser.parse_args(argv)
    if not args.cases.is_dir():
        print(f"no cases directory at {args.cases}", file=sys.stderr)
        return 2
    report = evaluate(args.cases)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    s = report["summary"]
    print(f"{s['cases']} cases (correct = label or an also_acceptable code; strict = label only)")
    print(f"log alone:     top-1 {s['log_alone']['top1']:.2f}  top-3 {s['log_alone']['top3']:.2f}   "
          f"(strict top-1 {s['log_alone']['top1_strict']:.2f}, top-3 {s['log_alone']['top3_strict']:.2f})")
    print(f"with answers:  top-1 {s['with_answers']['top1']:.2f}  top-3 {s['with_answers']['top3']:.2f}   "
          f"(strict top-1 {s['with_answers']['top1_strict']:.2f}, top-3 {s['with_answers']['top3_strict']:.2f})")
    print("targets: top-1 >= 0.90 with answers, top-3 >= 0.90 from the log alone")
    misses = [r for r in report["cases"] if not r["answers"]["top1"] or not r["log"]["top3"]]
    if misses:
        print("\nmisses:")
        for r in misses:
            what = []
            if not r["answers"]["top1"]:
                what.append(f"with answers top-1 {r['answers']['top'][:1]}")
            if not r["log"]["top3"]:
                what.append(f"log-alone top-3 {r['log']['top']}")
            print(f"  {r['id']}: expected {r['cause']} (or {', '.join(a for a in r['accept'] if a != r['cause']) or '-'}); " + "; ".join(what))
    return 0


if __name__ == "__main__":
    sys.exit(main())
