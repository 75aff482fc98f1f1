"""From the top cause to a fix the user can paste: ordered actions, computed numbers, snippets.

Hardware and infrastructure fixes come first, then code changes and upgrades, then config, then
environment-variable mitigations (each with its caveat), as nccl-doctor and the NCCL docs advise.
Fixes that do not apply to the user's torch/framework version are dropped (or kept with a note when
the version is unknown). When the cause is not clear, the fix is what to turn on for the next run.
"""

from __future__ import annotations

from typing import Any

from advisor import schema
from advisor.models import Facts, Fix, FixStep, RankedCause, Snippet, fact_text
from advisor.snippets import Resolved, env_name, render
from advisor.tuning import CALCULATORS
from advisor.versions import version_matches

KIND_ORDER = {"infra": 0, "code": 1, "upgrade": 2, "config": 3, "env": 4, "diagnostic": 5}
FALLBACK_FRAMEWORK = "pytorch"

FR_TUTORIAL = "https://docs.pytorch.org/tutorials/unstable/flight_recorder_tutorial.html"
NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
TORCH_DEBUG_DOC = "https://docs.pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications"


def applicability(fix: schema.Fix, facts: Facts) -> tuple[bool, str | None]:
    """Does the fix apply to the user's versions? Unknown versions do not exclude, they annotate."""
    notes: list[str] = []
    checks = [("torch", fix.applies.torch, facts.get("torch_version")), ("NCCL", fix.applies.nccl, facts.get("nccl_version"))]
    if fix.applies.framework_version:
        checks.append(("framework", fix.applies.framework_version, facts.get("framework_version")))
    for label, spec, version in checks:
        if not spec:
            continue
        ok = version_matches(version, spec) if version else None
        if ok is False:
            return False, f"not for {label} {fact_text(version)} (needs {spec})"
        if ok is None:
            notes.append(f"applies to {label} {spec}")
    if fix.applies.engines and facts.get("inference_engine") not in fix.applies.engines:
        return False, f"for {', '.join(fix.applies.engines)} only"
    for allowed, value, word in ((fix.applies.frameworks, facts.get("framework"), "for"),
                                 (fix.applies.interconnect, facts.get("interconnect"), "on")):
        if not allowed:
            continue
        if value and value not in allowed:
            return False, f"{word} {', '.join(allowed)} only"
        if not value:
            notes.append(f"{word} {', '.join(allowed)}")
    return True, "; ".join(notes) or None


def build_fix(kb, causes: list[RankedCause], facts: Facts, status: str) -> Fix:
    top = causes[0] if causes and (status != "no-match" or causes[0].benign) else None
    finished = facts.get("run_outcome") == "finished"
    if top is None or (top.benign and not finished):
        # nothing real stands out: say what the harmless lines are, and how to see more next time
        return _see_more(kb, facts, top)
    # a finished run's harmless lines come with their own (optional) fix and nothing to turn on next time
    summary = (f"Nothing failed: the run finished, and the messages recognised are harmless ({_harmless_title(top)})."
               if top.benign else top.summary)
    out = _cause_fix(kb, kb.causes[top.id], facts, summary)
    if not top.benign and status != "diagnosed":
        out.next_run, more = _next_run(facts)
        out.snippets.append(more)
    return out


def _cause_fix(kb, cause: schema.Cause, facts: Facts, summary: str) -> Fix:
    """The cause's fixes that apply to these facts, resolved into steps and config snippets."""
    actions: list[FixStep] = []
    snippets: list[Snippet] = []
    references: list[str] = []
    for fix in sorted(cause.fixes, key=lambda f: KIND_ORDER[f.kind]):
        ok, note = applicability(fix, facts)
        if not ok:
            continue
        step, step_snippets = resolve_fix(kb, fix, facts)
        step.applies_note = note
        actions.append(step)
        snippets.extend(snippet for snippet, _ in step_snippets)
        references.extend(u for u in fix.references if u not in references)
    references.extend(u for u in cause.references if u not in references)
    return Fix(cause_id=cause.id, summary=summary, explanation=cause.explanation.strip(),
               actions=actions, snippets=snippets, references=references)


def _harmless_title(benign: RankedCause) -> str:
    return benign.title.split(":", 1)[1].strip() if benign.title.lower().startswith("harmless:") else benign.title


def resolve_fix(kb, fix: schema.Fix, facts: Facts) -> tuple[FixStep, list[tuple[Snippet, list[Resolved]]]]:
    """One fix for these facts: its step, and each snippet with the settings it carries (the
    integration tests feed the snippets to the frameworks' parsers and check those settings)."""
    framework = facts.get("framework")
    torch_v = facts.get("torch_version")
    settings: dict[str, Any] = {}
    derivations: list[str] = []
    env_items: list[Resolved] = []
    knob_items: list[tuple[str, Any, str | None]] = []
    for setting in fix.settings:
        value, comment = setting.value, None
        if setting.from_fact and facts.known(setting.from_fact):
            value = facts.get(setting.from_fact)
            comment = f"from {setting.from_fact}={value}"
        elif isinstance(value, schema.Calc):
            calc = CALCULATORS[value.calc](facts)
            value = calc.value
            comment = calc.derivation
            derivations.append(f"{setting.env or setting.knob} = {calc.derivation}")
            if calc.note:
                derivations.append(calc.note)
        elif setting.placeholder:
            comment = "example value: replace with yours"
        if setting.env:
            name, note = env_name(setting.env, torch_v)
            if name is None:
                derivations.append(note)
                continue
            if note:
                derivations.append(note)
            settings[name] = value
            env_items.append(Resolved(setting.env, name, "str", value, comment))
        else:
            settings[setting.knob] = value
            knob_items.append((setting.knob, value, comment))
    step = FixStep(
        id=fix.id, kind=fix.kind, title=fix.title, steps=fix.steps.strip(), mitigation=fix.mitigation,
        caveat=fix.caveat.strip() if fix.caveat else None, settings=settings, derivations=derivations,
        references=list(fix.references),
    )
    snippets: list[tuple[Snippet, list[Resolved]]] = []
    if env_items:
        snippets.append((render("shell", env_items, framework or "any", f"{fix.title} (set before launching every rank)", {}), env_items))
    if knob_items:
        snippets.extend(_knob_snippets(kb, fix, knob_items, facts, framework))
    if fix.kind == "upgrade":
        snippets.extend((snippet, []) for snippet in _install_snippets(fix, framework))
    return step, snippets


def _install_snippets(fix: schema.Fix, framework: str | None) -> list[Snippet]:
    """An upgrade's `pip install ...` command (a code span of its steps) as a snippet to copy."""
    spans = fix.steps.split("`")[1::2]  # the text between backticks
    commands = [span.strip() for span in spans if span.strip().startswith(("pip install ", "python -m pip install "))]
    return [Snippet(framework=framework or "any", format="shell", language="bash", title=fix.title, content=command + "\n")
            for command in commands]


def framework_chain(kb, framework: str | None) -> list[str]:
    """The framework and those it builds on, for finding who spells a knob."""
    chain: list[str] = []
    todo = [framework or FALLBACK_FRAMEWORK]
    while todo:
        fw = todo.pop(0)
        if fw in kb.frameworks and fw not in chain:
            chain.append(fw)
            todo.extend(kb.frameworks[fw].builds_on)
    return chain or [FALLBACK_FRAMEWORK]


def _knob_snippets(kb, fix: schema.Fix, items: list[tuple[str, Any, str | None]], facts: Facts, framework: str | None) -> list[tuple[Snippet, list[Resolved]]]:
    chain = framework_chain(kb, framework)
    by_format: dict[str, list[Resolved]] = {}
    owner: dict[str, str] = {}
    for knob, value, comment in items:
        for fw_id in chain:
            spec = kb.frameworks[fw_id].knobs.get(knob)
            if spec is None:
                continue
            for fmt in _formats_for(kb.frameworks[chain[0]], spec.formats, facts):
                key = spec.keys_by_format.get(fmt, spec.key)
                by_format.setdefault(fmt, []).append(Resolved(knob, key, spec.unit, value, comment))
                owner.setdefault(fmt, chain[0])
            break
    fact_values = {k: v.value for k, v in facts.values.items()}
    out = []
    for fmt, resolved in by_format.items():
        fw = kb.frameworks[owner[fmt]]
        header = f"{fix.title} ({fw.name}"
        window = next((w for w in fw.format_windows if w.format == fmt), None)
        header += f"; {window.note})" if window else ")"
        out.append((render(fmt, resolved, fw.id, header, fact_values), resolved))
    return out


def _formats_for(fw: schema.Framework, formats: list[str], facts: Facts) -> list[str]:
    """Drop formats the user's framework version cannot read; keep all when the version is unknown."""
    version = facts.get("framework_version") if facts.get("framework") == fw.id else None
    keep = []
    for fmt in formats:
        window = next((w for w in fw.format_windows if w.format == fmt), None)
        if window is None or version is None or version_matches(version, window.versions) is not False:
            keep.append(fmt)
    return keep or formats[:1]


def _next_run(facts: Facts) -> tuple[list[str], Snippet]:
    """What to turn on so the next failure explains itself (NCCL logs, Flight Recorder)."""
    torch_v = facts.get("torch_version")
    old = bool(torch_v and version_matches(torch_v, "<2.2"))
    items = [
        Resolved("NCCL_DEBUG", "NCCL_DEBUG", "str", "INFO", "NCCL prints init, topology and transport errors"),
        Resolved("NCCL_DEBUG_FILE", "NCCL_DEBUG_FILE", "str", "/tmp/nccl.%h.%p.log", "one file per host and pid (%h, %p)"),
        Resolved("TORCH_CPP_LOG_LEVEL", "TORCH_CPP_LOG_LEVEL", "str", "INFO", "ProcessGroupNCCL's own lines"),
    ]
    notes = ["NCCL_DEBUG=INFO (and NCCL_DEBUG_FILE) for NCCL's view of init and transport errors"]
    if old:
        items.append(Resolved("NCCL_DESYNC_DEBUG", "NCCL_DESYNC_DEBUG", "str", "1", "reports which rank lagged (torch < 2.2 name)"))
        notes.append("NCCL_DESYNC_DEBUG=1: torch < 2.2 has no Flight Recorder; upgrade for it")
    else:
        for name, value, why in (
            ("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", "Flight Recorder ring buffer (on by default from torch 2.6)"),
            ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", "dump it when the watchdog fires (default from torch 2.7)"),
            ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/shared/fr_dumps/nccl_trace_rank_", "dump prefix on storage all nodes share; the rank is appended"),
        ):
            name2, _ = env_name(name, torch_v)
            items.append(Resolved(name, name2 or name, "str", value, why))
        notes.append(flight_recorder_note(torch_v))
    notes.append("TORCH_DISTRIBUTED_DEBUG=DETAIL for one short run if ranks may call different collectives (it checks every call, slowly)")
    header = "See more next time: turn these on, reproduce, and run the advisor on the new log"
    return notes, render("shell", items, "any", header, {})


def flight_recorder_note(torch_version: str | None) -> str:
    """How to read the dumps on this torch: `torchfrtrace` ships in the wheel from 2.10 only
    (2.5-2.9 wheels name a module they do not contain; checked in the released wheels)."""
    if torch_version and version_matches(torch_version, ">=2.10"):
        return "Flight Recorder dumps on timeout; analyse them with `torchfrtrace <dump dir>`"
    if torch_version and version_matches(torch_version, "<2.10"):
        return (f"Flight Recorder dumps on timeout; analyse them with tools/flight_recorder/fr_trace.py from the PyTorch "
                f"source of your version (torch {fact_text(torch_version)} does not ship `torchfrtrace`, 2.10 does)")
    return ("Flight Recorder dumps on timeout; analyse them with `torchfrtrace <dump dir>` (in the torch wheel from 2.10; "
            "earlier: tools/flight_recorder/fr_trace.py from the PyTorch repository)")


_FAILURE_WORDS = {
    "timeout": "A collective timed out",
    "heartbeat": "The NCCL heartbeat monitor killed the job",
    "oom": "A rank ran out of memory",
    "exception": "A rank raised an exception",
    "killed": "A rank was killed",
    "hardware": "A GPU or driver error was reported",
    "network": "A network connection failed",
    "nccl-error": "NCCL reported an error",
    "store-timeout": "The rendezvous store timed out",
    "launch": "The launcher reported a failed worker",
}


def symptom_summary(facts: Facts) -> str | None:
    """What visibly failed, in one clause (`A collective timed out (_ALLGATHER_BASE at SeqNum 7 after 30 min)`)."""
    kind = facts.get("first_failure")
    words = _FAILURE_WORDS.get(kind) if isinstance(kind, str) else None
    if words is None:
        return None
    if kind != "timeout":
        return words
    detail = []
    if facts.get("op_type"):
        detail.append(str(facts.get("op_type")))
    if facts.get("seq_num") is not None:
        detail.append(f"at SeqNum {facts.get('seq_num')}")
    timeout_ms = facts.get("timeout_ms")
    if isinstance(timeout_ms, (int, float)) and timeout_ms > 0:
        detail.append(f"after {_duration(timeout_ms / 1000)}")
    return words + (f" ({' '.join(detail)})" if detail else "")


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _see_more(kb, facts: Facts, benign: RankedCause | None) -> Fix:
    notes, snippet = _next_run(facts)
    if benign is not None:
        summary = (f"No failure in this text: only harmless messages were recognised ({_harmless_title(benign)}). "
                   "The real failure is elsewhere in the log.")
        explanation = kb.causes[benign.id].explanation.strip()
        refs = list(kb.causes[benign.id].references)
    else:
        symptom = symptom_summary(facts)
        if symptom:
            summary = f"{symptom}, but this text does not show why."
            explanation = (
                "The failure itself is recognised, not its cause: a rank that reports a timeout or an aborted "
                "communicator is usually waiting on another rank that stopped, crashed or fell behind first. Paste more "
                "of the log (every rank's output from a minute before the first error to the end), answer the questions, "
                "or turn on the diagnostics below so the next failure leaves evidence."
            )
        else:
            summary = "No known failure pattern was recognised with confidence."
            explanation = (
                "The text does not contain a message the knowledge base recognises well enough to name a cause. "
                "Paste more of the log (every rank's output from a minute before the first error to the end), answer the "
                "questions, or turn on the diagnostics below so the next failure leaves evidence."
            )
        refs = []
    return Fix(
        cause_id=None, summary=summary, explanation=explanation, actions=[], snippets=[snippet],
        references=refs + [NCCL_ENV_DOC, FR_TUTORIAL, TORCH_DEBUG_DOC], next_run=notes,
    )
