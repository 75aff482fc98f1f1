"""The core: log -> facts -> ranked causes -> next questions -> tuned fix.

Pure with respect to its inputs: the same request and KB give the same Diagnosis, byte for byte.
Every front end (CLI, HTTP API, TUI) calls `diagnose` and only formats what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Callable

from advisor.answers import apply_answers
from advisor.facts import FactCollector
from advisor.fixes import build_fix
from advisor.knowledge import KnowledgeBase, load_kb
from advisor.matcher import DIAGNOSED, SignatureCollector, fuzzy_scores, rank_causes
from advisor.models import DiagnoseRequest, Diagnosis, FactValue, Facts, Notice, RankRow, RecognisedMessage
from advisor.questions import choose_questions
from advisor.reader import iter_blocks
from advisor.redact import Redactor
from advisor.scan import ScanStats, scan

# free text shorter than this is also compared with the causes' symptom phrases
PROSE_LIMIT = 4000


@dataclass
class LogReading:
    """What one pass over the log found, before any answer is applied (reusable across answers)."""

    signatures: SignatureCollector
    facts: Facts
    stats: ScanStats
    prose: str


def read_log(
    kb: KnowledgeBase,
    source: str | bytes | BinaryIO,
    description: str | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> LogReading:
    """Scan a log (text, bytes or a binary stream of any size) once."""
    collector = FactCollector()
    signatures = SignatureCollector(collector)
    stats = scan(iter_blocks(source, on_progress=on_progress, count_lines=False), kb.probe_table, [signatures, collector])
    facts = collector.finalize(stats.ranks_prefixed, kb.frameworks)
    for fact, (value, line, text) in signatures.captured.items():
        value = _coerce(value)
        if fact not in facts.values and value is not None:
            facts.values[fact] = FactValue(value=value, line=line, text=text)
    prose = ""
    if isinstance(source, (str, bytes)) and len(source) <= PROSE_LIMIT:
        prose = source if isinstance(source, str) else source.decode("utf-8", "replace")
    if description:
        prose = (description[:PROSE_LIMIT] + "\n" + prose).strip()
        _read_description(kb, description[:PROSE_LIMIT], signatures, facts)
    return LogReading(signatures, facts, stats, prose)


def conclude(kb: KnowledgeBase, reading: LogReading, request: DiagnoseRequest) -> Diagnosis:
    """Rank, ask and fix, given a reading and the request's answers. Does not touch `reading`."""
    facts = reading.facts.model_copy(deep=True)
    answered = apply_answers(kb, facts, request.answers, request.framework)
    if request.env:
        from advisor.envfacts import apply_environment

        apply_environment(kb, facts, request.env)
    causes, raw_scores = rank_causes(kb, reading.signatures, facts, fuzzy_scores(kb, reading.prose))
    top_real = next((c for c in causes if not c.benign), None)
    status = _status(causes, top_real)
    causes = causes[: request.max_causes]
    questions = choose_questions(kb, causes, raw_scores, facts, answered, request.max_questions)
    fix = build_fix(kb, causes, facts, status)
    diagnosis = Diagnosis(
        status=status,
        headline=_headline(status, causes, top_real, fix),
        causes=causes,
        facts={name: fv.value for name, fv in sorted(facts.values.items())},
        fact_sources={name: fv for name, fv in sorted(facts.values.items())},
        questions=questions,
        fix=fix,
        notices=[Notice(line=l, text=t, cause_id=c, title=kb.causes[c].title) for l, t, c in reading.signatures.notices[:20]],
        ranks=rank_picture(facts),
        messages=recognised_messages(kb, reading.signatures),
        stats={"bytes": reading.stats.bytes, "lines": max(reading.stats.lines, 0), "hits": reading.stats.hits, "kb": kb.digest},
    )
    return Redactor(mask_hosts=request.mask_hosts).redact_model(diagnosis)


def diagnose(
    request: DiagnoseRequest,
    kb: KnowledgeBase | None = None,
    stream: BinaryIO | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> Diagnosis:
    """Diagnose `request.log` (or `stream`, for files too big to hold in memory)."""
    kb = kb or load_kb()
    source = stream if stream is not None else (request.log or b"")
    return conclude(kb, read_log(kb, source, request.description, on_progress), request)


def _read_description(kb: KnowledgeBase, text: str, signatures: SignatureCollector, facts: Facts) -> None:
    """A user's own words count as evidence (line 0) and can tell the phase the log does not."""
    collector = FactCollector()
    described = SignatureCollector(collector)
    scan(iter_blocks(text), kb.probe_table, [described, collector])
    for cause_id, slots in described.by_cause.items():
        for sig_id, slot in slots.items():
            mine = signatures.by_cause[cause_id].setdefault(sig_id, slot)
            if mine is not slot:
                continue
            for line in slot.lines:
                line.line = 0
    if collector.phase_now and not facts.known("phase"):
        phase, _, text_line = collector.phase_now
        facts.values["phase"] = FactValue(value=phase, origin="answer", line=0, text=text_line[:300], detail="from the description")


def _coerce(value: str):
    """A captured value as a number when it is one; None for a number too long to be real (a
    hostile `stuck for 999...9 seconds`: int() refuses over 4300 digits, float() gives infinity)."""
    from advisor.facts import MAX_DIGITS, _float

    text = value.strip()
    body = text.lstrip("+-")
    if len(body) > MAX_DIGITS and body.replace(".", "", 1).isdigit():
        return None
    try:
        number = int(text)
    except ValueError:
        number = _float(text)  # None for nan, inf and anything long
        return value if number is None else number
    return number if abs(number) < 10**MAX_DIGITS else None


LEANING = 0.15  # below this probability a cause is not named
LEADS_BY = 1.5  # ... nor when the runner-up is nearly as likely


def _status(causes, top_real) -> str:
    if top_real is not None and top_real.score >= DIAGNOSED:
        return "diagnosed"
    if causes and causes[0].benign and not any(c.score >= 0.15 for c in causes if not c.benign):
        return "diagnosed"
    if top_real is not None and top_real.score >= LEANING:
        runner_up = next((c.score for c in causes if not c.benign and c is not top_real), 0.0)
        if top_real.score >= LEADS_BY * runner_up:
            return "uncertain"
    return "no-match"  # nothing, or a near tie: naming one cause (and its fix) would be a guess


def _headline(status: str, causes, top_real, fix) -> str:
    if status == "no-match":
        lead = "Cause not yet known" if fix.summary.endswith("does not show why.") else "No confident match"
        return f"{lead}: {fix.summary}"
    if status == "diagnosed" and causes and causes[0].benign:
        return fix.summary
    lead = "Likely" if status == "uncertain" else "Diagnosis"
    return f"{lead}: {top_real.summary} [{top_real.code}]"


def rank_picture(facts: Facts) -> list[RankRow]:
    """Which rank stopped where: reporters with their sequence numbers, and the silent ones."""
    progress = facts.get("rank_progress") or {}
    world = facts.get("world_size") or facts.get("group_size")
    if not progress:
        return []
    rows: list[RankRow] = []
    limit = world if isinstance(world, int) and 0 < world <= 1024 else None
    ranks = range(limit) if limit else sorted(int(r) for r in progress)
    for rank in ranks:
        info = progress.get(str(rank))
        if info is None:
            rows.append(RankRow(rank=rank, state="silent"))
            continue
        state = "timed-out" if info.get("seq") is not None else "failed"
        rows.append(RankRow(rank=rank, state=state, seq=info.get("seq"), op=info.get("op"),
                            last_enqueued=info.get("last_enqueued"), last_completed=info.get("last_completed")))
    return rows


_LEVEL_ORDER = {"error": 0, "warn": 1, "info": 2}
MAX_MESSAGES = 24


def recognised_messages(kb: KnowledgeBase, signatures: SignatureCollector) -> list[RecognisedMessage]:
    """The catalogued messages found, errors first and then in log order, each with its meaning."""
    out = []
    for hit in signatures.messages.values():
        msg = kb.messages.get(hit.id)
        if msg is None:
            continue
        out.append(RecognisedMessage(
            id=msg.id, component=msg.id.split(".", 1)[0], level=msg.level, role=msg.role, line=hit.line,
            count=hit.count, text=hit.text[:400], meaning=" ".join(msg.meaning.split()),
            points_to=[p.cause for p in msg.points_to], source=msg.source, rank=hit.rank,
        ))
    out.sort(key=lambda m: (m.role == "benign", _LEVEL_ORDER.get(m.level, 3), m.line))
    return out[:MAX_MESSAGES]
