"""`advisor kb facts`: every versioned fact of the KB in one list, for audit.

Derived from the KB data itself, never kept by hand: the timer table's defaults, follows-links and
traps (kb/timers.yaml), the frameworks' knobs, defaults and format windows (kb/frameworks/*.yaml),
the version ranges of the causes' fixes (`applies`) and of their rules (`when` on a version fact).
Each row names the knob, its default (or what the fact says), the versions it holds for and the
references it was checked against, so a reviewer can audit them against the released packages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from advisor import schema


@dataclass
class FactRow:
    kind: str
    """timer-default, timer-follows, timer-trap, framework-knob, format-window, fix-applies, rule-version"""
    subject: str
    """where it lives: `timers.pg-collective`, `frameworks.accelerate`, `causes.<id>.fixes.<id>`"""
    knob: str
    default: Any
    unit: str | None
    versions: str
    note: str = ""
    references: list[str] = field(default_factory=list)


def _applies_text(applies: schema.Applies) -> str:
    parts = []
    if applies.torch:
        parts.append(f"torch {applies.torch}")
    if applies.nccl:
        parts.append(f"NCCL {applies.nccl}")
    if applies.framework_version:
        parts.append(f"{'/'.join(applies.frameworks) or 'framework'} {applies.framework_version}")
    elif applies.frameworks:
        parts.append(", ".join(applies.frameworks))
    if applies.interconnect:
        parts.append("on " + ", ".join(applies.interconnect))
    return "; ".join(parts)


def _value_versions(timer: schema.Timer, value: schema.TimerValue) -> str:
    from advisor.timers import value_versions

    return value_versions(value, timer.framework, sep="; ", backend_word="backend ") or "all versions"


def _timer_knob(timer: schema.Timer) -> str:
    return timer.key


def _number(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def timer_rows(kb) -> list[FactRow]:
    rows: list[FactRow] = []
    for timer in kb.timers.values():
        subject = f"timers.{timer.id}"
        for value in timer.defaults:
            note = value.note or ""
            if not value.forwarded:
                note = (note + "; " if note else "") + "never forwarded to the clock"
            rows.append(FactRow("timer-default", subject, _timer_knob(timer), _number(value.value), value.unit, _value_versions(timer, value),
                                " ".join(note.split()), list(value.references)))
        if timer.follows:
            rows.append(FactRow("timer-follows", subject, _timer_knob(timer), None, None, "all versions checked",
                                f"takes the value of {timer.follows} where the job creates it", list(timer.references)))
        for trap in timer.traps:
            rows.append(FactRow("timer-trap", f"{subject}.traps.{trap.id}", _timer_knob(timer), None, None,
                                _applies_text(trap.applies) or "all versions", trap.title, list(trap.references)))
    return rows


def framework_rows(kb) -> list[FactRow]:
    rows: list[FactRow] = []
    for fw in kb.frameworks.values():
        for name, knob in fw.knobs.items():
            if knob.default is None and not knob.default_note:
                continue
            rows.append(FactRow("framework-knob", f"frameworks.{fw.id}.knobs.{name}", knob.key, knob.default, knob.unit,
                                knob.default_note or "all versions", "", list(knob.references)))
        for window in fw.format_windows:
            rows.append(FactRow("format-window", f"frameworks.{fw.id}.format_windows", window.format, None, None,
                                f"{fw.id} {window.versions}", window.note, list(fw.references)))
    return rows


def cause_rows(kb) -> list[FactRow]:
    from advisor.facts import FACTS

    rows: list[FactRow] = []
    for cause in kb.causes.values():
        for fix in cause.fixes:
            versions = _applies_text(fix.applies)
            if not (fix.applies.torch or fix.applies.nccl or fix.applies.framework_version):
                continue
            knobs = ", ".join(s.env or s.knob or "" for s in fix.settings) or fix.kind
            rows.append(FactRow("fix-applies", f"causes.{cause.id}.fixes.{fix.id}", knobs, None, None, versions, fix.title,
                                list(fix.references)))
        for i, rule in enumerate(cause.rules):
            specs = [f"{name} {cond}" for name, cond in rule.when.items()
                     if FACTS.get(name) is not None and FACTS[name].kind == "version" and isinstance(cond, str)]
            if specs:
                rows.append(FactRow("rule-version", f"causes.{cause.id}.rules[{i}]", ", ".join(rule.when), None, None,
                                    "; ".join(specs), f"{rule.weight:+g}: {rule.why}", list(cause.references)))
    return rows


def versioned_facts(kb) -> list[dict]:
    """Every versioned fact of the KB as plain dicts (the `--json` output)."""
    return [asdict(row) for row in timer_rows(kb) + framework_rows(kb) + cause_rows(kb)]


def format_facts(rows: list[dict]) -> str:
    """One block per fact: what, the value, the versions, and the references to check it against."""
    out: list[str] = []
    for row in rows:
        value = "" if row["default"] is None else f" = {row['default']}" + (f" {row['unit']}" if row["unit"] else "")
        out.append(f"[{row['kind']}] {row['subject']}: {row['knob']}{value}  ({row['versions']})")
        if row["note"]:
            out.append(f"    {row['note']}")
        for url in row["references"]:
            out.append(f"    {url}")
    out.append(f"\n{len(rows)} versioned facts")
    return "\n".join(out) + "\n"
