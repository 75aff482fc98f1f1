"""`advisor kb check`: validate the KB, then run every cause's example logs like tests.

A positive example must rank its cause at or above its declared position; a negative (near-miss)
example must not rank it first, and, when it names `expect_top`, must rank that cause first.
Every failure is reported, not just the first (semgrep#4365).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from advisor.diagnose import diagnose
from advisor.knowledge import KBInvalid, load_kb
from advisor.models import DiagnoseRequest


def run_example(kb, log: str, answers: dict[str, str]):
    return diagnose(DiagnoseRequest(log=log, answers=answers, max_causes=10, max_questions=0), kb)


def check_example(kb, cause_id: str, kind: str, example) -> str | None:
    """None when the example behaves as declared, else what went wrong."""
    d = run_example(kb, example.log, example.answers)
    ids = [c.id for c in d.causes]
    top = ids[0] if ids else None
    if kind == "positive":
        position = ids.index(cause_id) + 1 if cause_id in ids else None
        if position is None:
            return f"not ranked at all (top: {top})"
        if position > example.rank:
            return f"ranked {position}, expected <= {example.rank} (top: {top})"
        return None
    if top == cause_id:
        return "ranked first on a near-miss"
    if example.expect_top and top != example.expect_top:
        return f"expected {example.expect_top} first, got {top}"
    return None


def check_kb(extra_dirs: Iterable[str | Path] = ()) -> dict:
    try:
        kb = load_kb(extra_dirs)
    except KBInvalid as exc:
        return {"ok": False, "errors": [str(e) for e in exc.errors], "failures": [], "causes": 0, "examples": 0, "passed": 0}
    failures = []
    total = passed = 0
    for cause in kb.causes.values():
        for kind in ("positive", "negative"):
            for example in getattr(cause.examples, kind):
                total += 1
                problem = check_example(kb, cause.id, kind, example)
                if problem is None:
                    passed += 1
                else:
                    failures.append({"cause": cause.id, "kind": kind, "example": example.name, "problem": problem,
                                     "file": str(kb.sources[cause.id])})
    for timer in kb.timers.values():
        for example in timer.examples:
            total += 1
            problem = check_timer_example(kb, timer, example)
            if problem is None:
                passed += 1
            else:
                failures.append({"cause": f"timer:{timer.id}", "kind": "timer", "example": example.name, "problem": problem,
                                 "file": str(kb.sources.get("timers", "timers.yaml"))})
    return {"ok": not failures, "errors": [], "failures": failures, "causes": len(kb.causes), "examples": total, "passed": passed}


def check_timer_example(kb, timer, example) -> str | None:
    """None when the log shows this clock (a setting: the clock it feeds, with its value in force)
    firing with the declared value and reachability, else what went wrong."""
    t = run_example(kb, example.log, example.answers).timeout
    if t is None:
        return "no clock seen firing"
    want = timer.id if timer.kind == "clock" else timer.feeds
    if t.clock != want:
        return f"clock {t.clock}, expected {want}"
    source = example.value_from or (timer.id if timer.kind == "setting" else None)
    if source and t.source != source:
        return f"value from {t.source}, expected {source}"
    if example.seconds is not None and t.seconds != example.seconds:
        return f"{t.seconds} s, expected {example.seconds:g} s"
    if example.reachable is not None and t.reachable.value is not example.reachable:
        return f"reachable {t.reachable.value}, expected {example.reachable}"
    return None
