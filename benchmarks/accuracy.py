"""Accuracy of the diagnosis on every labelled set, in three modes, with the verdict's honesty.

Sets (each skipped when absent):
  shared     ../shared/cases: the development set handed to the project
  dev        benchmarks/cases/dev: our own public-thread corpus, the half we may learn from
  heldout    benchmarks/cases/heldout: the other half, never tuned against (report, do not study)
  recorded   kb/recorded/manifest.yaml: logs printed by the real software in repro/ scenarios

Modes, per case:
  log        the log alone
  guided     the advisor's own questions, answered from the case's metadata ("unknown" when the
             case does not say), one at a time until it asks nothing more (at most 8 rounds)
  answers    every metadata field given up front

Figures: top-1 / top-3 (the label or an `also_acceptable` code; strict = the label only), the
precision of "diagnosed" verdicts (exit 0: how often a confident answer is right), the rate of an
empty cause list, and the questions asked in guided mode. Targets (issue 10): log alone top-1 >= 0.80
and top-3 >= 0.90; guided top-1 >= 0.90 with <= 1.5 questions; diagnosed precision >= 0.95; empty
list <= 0.10.

Usage:  python benchmarks/accuracy.py [--set NAME ...] [--cases DIR] [--json] [--misses]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SETS = {
    "shared": ROOT.parent / "shared" / "cases",
    "dev": ROOT / "benchmarks" / "cases" / "dev",
    "heldout": ROOT / "benchmarks" / "cases" / "heldout",
    "recorded": ROOT / "kb" / "recorded" / "manifest.yaml",
}
DEFAULT_CASES = SETS["shared"]  # kept for callers of evaluate(DEFAULT_CASES)
ANSWER_FIELDS = ("framework", "framework_version", "torch_version", "nodes", "gpus_per_node", "model_size_b", "phase")
MAX_ROUNDS = 8
TARGETS = {"log_top1": 0.80, "log_top3": 0.90, "guided_top1": 0.90, "guided_questions": 1.5,
           "diagnosed_precision": 0.95, "empty_rate": 0.10}


def load_cases(source: Path) -> list[dict]:
    """Cases from a folder of case files, or from a recording manifest (logs beside it)."""
    if source.is_dir():
        return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(source.glob("*.yaml"))]
    if source.is_file():
        manifest = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
        cases = []
        for run in manifest.get("runs", []):
            log_path = source.parent / run["log"]
            if not log_path.is_file():
                continue
            case = {k: run.get(k) for k in ("framework", "framework_version", "torch_version", "nodes", "gpus_per_node", "model_size_b", "phase")}
            case.update(run.get("answers") or {})  # what the job's owner would answer (phase, peer_fate, ...)
            case.update(id=run["id"], cause=run["cause"], also_acceptable=run.get("also_acceptable") or [],
                        log=log_path.read_text(encoding="utf-8", errors="replace"))
            cases.append(case)
        return cases
    return []


def metadata_answer(case: dict, question_id: str) -> str:
    """What the case's reporter would answer: its metadata field of that name; a package's version
    (`trl_version`) is the framework version when the framework is that package."""
    value = case.get(question_id)
    if value is None and question_id.endswith("_version") and question_id[: -len("_version")] == case.get("framework"):
        value = case.get("framework_version")
    if value is None or (question_id == "phase" and value == "unknown"):
        return "unknown"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _outcome(d, accept: set[str], label: str) -> dict:
    codes = [c.code for c in d.causes]
    return {
        "top": codes[:3],
        "score": round(d.causes[0].score, 3) if d.causes else None,  # the lead's confidence: calibration
        "status": d.status,
        "top1": bool(codes) and codes[0] in accept,
        "top3": any(c in accept for c in codes[:3]),
        "top1_strict": bool(codes) and codes[0] == label,
        "top3_strict": label in codes[:3],
        "diagnosed_right": d.status == "diagnosed" and bool(codes) and codes[0] in accept,
        "empty": not codes,
    }


def evaluate_case(case: dict, kb) -> dict:
    from advisor.diagnose import conclude, read_log
    from advisor.models import DiagnoseRequest

    accept = {case["cause"], *(case.get("also_acceptable") or [])}
    reading = read_log(kb, case["log"])
    row = {"id": case["id"], "cause": case["cause"], "accept": sorted(accept)}
    row["log"] = _outcome(conclude(kb, reading, DiagnoseRequest(max_causes=10)), accept, case["cause"])
    answers = {f: metadata_answer(case, f) for f in ANSWER_FIELDS}
    row["answers"] = _outcome(conclude(kb, reading, DiagnoseRequest(max_causes=10, answers=answers)), accept, case["cause"])
    given: dict[str, str] = {}
    asked: list[str] = []
    for _ in range(MAX_ROUNDS):
        d = conclude(kb, reading, DiagnoseRequest(max_causes=10, answers=given))
        if not d.questions:
            break
        q = d.questions[0]
        given[q.id] = metadata_answer(case, q.id)
        asked.append(q.id)
    row["guided"] = _outcome(d, accept, case["cause"]) | {"asked": asked}
    return row


def summarize(rows: list[dict]) -> dict:
    n = len(rows)

    def rate(mode: str, key: str) -> float:
        return round(sum(r[mode][key] for r in rows) / n, 3) if n else 0.0

    out = {"cases": n}
    for mode in ("log", "guided", "answers"):
        diagnosed = [r for r in rows if r[mode]["status"] == "diagnosed"]
        out[mode] = {k: rate(mode, k) for k in ("top1", "top3", "top1_strict", "top3_strict")}
        out[mode]["diagnosed"] = len(diagnosed)
        out[mode]["diagnosed_precision"] = round(sum(r[mode]["diagnosed_right"] for r in diagnosed) / len(diagnosed), 3) if diagnosed else None
        out[mode]["empty_rate"] = rate(mode, "empty")
        out[mode]["no_match_rate"] = round(sum(r[mode]["status"] == "no-match" for r in rows) / n, 3) if n else 0.0
    out["guided"]["questions_mean"] = round(statistics.mean(len(r["guided"]["asked"]) for r in rows), 2) if n else 0.0
    return out


def evaluate(source: Path, kb=None) -> dict:
    """Every case of one set (a folder of cases or a recording manifest): rows and summary."""
    from advisor.knowledge import load_kb

    kb = kb or load_kb()
    rows = [evaluate_case(case, kb) for case in load_cases(source)]
    summary = summarize(rows)
    # the earlier report's names, kept for existing callers
    summary["log_alone"], summary["with_answers"] = summary["log"], summary["answers"]
    return {"summary": summary, "cases": rows}


def _line(name: str, s: dict) -> str:
    log, guided, ans = s["log"], s["guided"], s["answers"]

    def p(x):
        return "  -  " if x is None else f"{x:.2f}"

    return (f"{name:<9} {s['cases']:>4}  log {log['top1']:.2f}/{log['top3']:.2f}  "
            f"guided {guided['top1']:.2f}/{guided['top3']:.2f} ({guided['questions_mean']:.2f} q)  "
            f"answers {ans['top1']:.2f}/{ans['top3']:.2f}  "
            f"diagnosed-precision {p(log['diagnosed_precision'])}/{p(guided['diagnosed_precision'])} "
            f"(n={log['diagnosed']}/{guided['diagnosed']})  empty {log['empty_rate']:.2f}  no-match {log['no_match_rate']:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", action="append", choices=sorted(SETS), help="which set(s); default: every set present")
    parser.add_argument("--cases", type=Path, help="a folder of case files (or a recording manifest) instead of the sets")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.add_argument("--misses", action="store_true", help="list the cases a mode gets wrong (not for the held-out set: do not study it)")
    args = parser.parse_args(argv)
    from advisor.knowledge import load_kb

    kb = load_kb()
    chosen = {"cases": args.cases} if args.cases else {name: SETS[name] for name in (args.set or SETS)}
    reports = {name: evaluate(path, kb) for name, path in chosen.items() if path.exists()}
    reports = {name: r for name, r in reports.items() if r["summary"]["cases"]}
    if not reports:
        print("no labelled cases found (looked for: " + ", ".join(str(p) for p in chosen.values()) + ")", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(reports, indent=2))
        return 0
    print("set       cases  top-1/top-3 per mode; diagnosed precision log/guided (verdicts); empty list; no-match")
    for name, r in reports.items():
        print(_line(name, r["summary"]))
    t = TARGETS
    print(f"targets: log top-1 >= {t['log_top1']} top-3 >= {t['log_top3']}; guided top-1 >= {t['guided_top1']} with <= "
          f"{t['guided_questions']} questions; diagnosed precision >= {t['diagnosed_precision']}; empty <= {t['empty_rate']}")
    if args.misses:
        for name, r in reports.items():
            if name == "heldout":
                continue
            for row in r["cases"]:
                wrong = [m for m in ("log", "guided") if not row[m]["top1"]]
                bad_verdict = [m for m in ("log", "guided") if row[m]["status"] == "diagnosed" and not row[m]["diagnosed_right"]]
                if wrong or bad_verdict:
                    print(f"  [{name}] {row['id']}: label {row['cause']}; log {row['log']['top']} ({row['log']['status']}); "
                          f"guided {row['guided']['top']} ({row['guided']['status']}, asked {row['guided']['asked']})"
                          + ("  CONFIDENTLY WRONG" if bad_verdict else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
