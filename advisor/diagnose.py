"""The core: log -> facts -> ranked causes -> next questions -> tuned fix.

Pure with respect to its inputs: the same request and KB give the same Diagnosis, byte for byte.
Every front end (CLI, HTTP API, TUI) calls `diagnose` and only formats what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Callable

from advisor.answers import apply_answers
from advisor.facts import FactCollector
from advisor.inputs import shown
from advisor.fixes import build_fix
from advisor.knowledge import KnowledgeBase, load_kb
from advisor.matcher import DIAGNOSED, SignatureCollector, fuzzy_scores, rank_causes, stands_alone
from advisor.models import DiagnoseRequest, Diagnosis, FactValue, Facts, Notice, RankRow, RecognisedMessage
from advisor.questions import choose_questions
from advisor.reader import iter_blocks
from advisor.redact import Redactor
from advisor.release_fixes import later_nccl_fixes
from advisor.scan import ScanStats, scan
from advisor.similar import similar_candidates
from advisor.timers import explain_timeout

if TYPE_CHECKING:
    from advisor.fr_models import FlightRecorderSummary, FrDump

# free text shorter than this is also compared with the causes' symptom phrases
PROSE_LIMIT = 4000
SIMILAR_FILL = 3
"""with no confident answer, the candidates listed are topped up to this many from similar wording."""


@dataclass
class LogReading:
    """What one pass over the log found, before any answer is applied (reusable across answers)."""

    signatures: SignatureCollector
    facts: Facts
    stats: ScanStats
    prose: str
    error_lines: list[tuple[int, str]]
    """a bounded sample of failure-looking lines (line number, text), for the similar-text fallback."""
    flight_recorder: "FlightRecorderSummary | None" = None
    """what the Flight Recorder dumps show (advisor.fr_join.attach_dumps), joined in `conclude`."""


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
    # KB captures were collected during the scan
    facts = collector.finalize(stats.ranks_prefixed, kb.frameworks, kb.releases)
    prose = ""
    if isinstance(source, (str, bytes)) and len(source) <= PROSE_LIMIT:
        prose = source if isinstance(source, str) else source.decode("utf-8", "replace")
    if description:
        prose = (description[:PROSE_LIMIT] + "\n" + prose).strip()
        _read_description(kb, description[:PROSE_LIMIT], signatures, facts)
    error_lines = sorted(((n, t) for t, n in collector.error_sample.items()), key=lambda x: x[0])
    return LogReading(signatures, facts, stats, prose, error_lines)


def conclude(kb: KnowledgeBase, reading: LogReading, request: DiagnoseRequest) -> Diagnosis:
    """Rank, ask and fix, given a reading and the request's answers. Does not touch `reading`."""
    facts = reading.facts.model_copy(deep=True)
    if reading.flight_recorder is not None:
        from advisor.fr_join import join_facts

        join_facts(facts, reading.flight_recorder, log_read=reading.stats.bytes > 0)
    answered = apply_answers(kb, facts, request.answers, request.framework)
    if request.env:
        from advisor.envfacts import apply_environment

        apply_environment(kb, facts, request.env)
    # after the answers: the node count decides whether torchrun's summary covers every rank, and
    # nodes x GPUs per node is the world an awaited rank must fit in
    _peer_finished(facts)
    _world_from_answers(facts)
    causes, raw_scores = rank_causes(kb, reading.signatures, facts, fuzzy_scores(kb, reading.prose))
    top_real = next((c for c in causes if not c.benign), None)
    status = _status(causes, top_real, facts)
    if status == "diagnosed" and kb.causes[top_real.id].needs_wait and not wait_seen(facts, bool(request.description)):
        status = "uncertain"  # a straggler story with no one seen waiting: likely, not established
    undecided = unknown_answer_could_flip(kb, causes, top_real, facts, answered) if status == "diagnosed" else None
    if undecided:
        status = "uncertain"  # the user could not answer what decides between the lead and a rival
    real = [c for c in causes if not c.benign]
    harmless_only = bool(causes) and causes[0].benign
    if status == "no-match" and len(real) < SIMILAR_FILL and not harmless_only:
        # nothing specific: offer what the failure lines read like, marked as such
        extra = similar_candidates(kb, reading.error_lines, {c.code for c in real}, SIMILAR_FILL - len(real))
        # they share what the evidence leaves to "none of these" and stay below every cause the log
        # itself points to: a resemblance never outranks a matched line or fact
        room = max(0.0, 1.0 - sum(c.score for c in real)) / max(len(extra), 1)
        floor = min((c.score for c in real), default=room)
        extra = sorted((c.model_copy(update={"score": round(min(c.score, room, floor), 4)}) for c in extra),
                       key=lambda c: -c.score)
        causes = real + extra + [c for c in causes if c.benign]
    causes = causes[: request.max_causes]
    _harmless_reading(facts, causes)
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
        notices=_input_notices(kb, facts, request) + _undecided_notice(undecided)
        + [Notice(line=l, text=t, cause_id=c, title=kb.causes[c].title) for l, t, c in reading.signatures.notices[:20]],
        ranks=_ranks(facts, reading.flight_recorder),
        flight_recorder=reading.flight_recorder,
        messages=recognised_messages(kb, reading.signatures),
        stats={"bytes": reading.stats.bytes, "lines": max(reading.stats.lines, 0), "hits": reading.stats.hits, "kb": kb.digest},
        timeout=explain_timeout(kb, facts),
        later_fixes=later_nccl_fixes(kb, {name: fv.value for name, fv in facts.values.items()}),
    )
    return Redactor(mask_hosts=request.mask_hosts).redact_model(diagnosis)


def diagnose(
    request: DiagnoseRequest,
    kb: KnowledgeBase | None = None,
    stream: BinaryIO | None = None,
    on_progress: Callable[[int], None] | None = None,
    dumps: "list[FrDump] | None" = None,
) -> Diagnosis:
    """Diagnose `request.log` (or `stream`, for files too big to hold in memory), with the
    ranks' Flight Recorder dumps when there are any."""
    kb = kb or load_kb()
    source = stream if stream is not None else (request.log or b"")
    reading = read_log(kb, source, request.description, on_progress)
    if dumps:
        from advisor.fr_join import attach_dumps

        attach_dumps(reading, dumps)
    return conclude(kb, reading, request)


def _ranks(facts: Facts, fr: "FlightRecorderSummary | None") -> list[RankRow]:
    rows = rank_picture(facts)
    if fr is None:
        return rows
    from advisor.fr_join import join_ranks

    return join_ranks(rows, fr)


def _input_notices(kb: KnowledgeBase, facts: Facts, request: DiagnoseRequest) -> list[Notice]:
    """Answers that were taken but not understood: a version that is no version, a framework the
    KB does not know. Said out loud, so that nobody trusts a fix written for something else."""
    from advisor.versions import parse_version

    notices = []
    given = dict(request.answers)
    if request.framework and "framework" not in given:
        given["framework"] = request.framework
    for qid, raw in given.items():
        question = kb.questions.get(qid)
        text = str(raw).strip()
        fact = facts.values.get(question.fact) if question else None
        if fact is None or fact.origin != "answer":
            continue
        if question.kind == "version" and parse_version(str(fact.value)) is None:
            title = f"{qid}={shown(text)} is not a version number: no version rule was applied to it"
        elif qid == "framework" and fact.value == "other" and text.lower() != "other":
            known = ", ".join(sorted(kb.frameworks))
            title = f"framework {shown(text)!r} is not one the advisor knows ({known}): the fix is written for plain PyTorch"
        else:
            continue
        notices.append(Notice(line=0, text=f"{qid}={shown(text)}", cause_id="", title=title, kind="input"))
    return notices


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


LEANING = 0.15  # below this probability a cause is not named
LEADS_BY = 1.5  # ... nor when the runner-up is nearly as likely
CLEAR_LEAD = 3.0
"""a confident verdict also needs the cause this many times likelier than the best rival of another code."""


def is_specific(cause, rival=None, answered_phase: bool = False) -> bool:
    """Whether a cause rests on evidence of its own rather than on symptoms it shares with its rival
    (advisor.matcher.stands_alone), with something behind it in the log, a description or dumps.

    A phase the user answered says roughly when the job failed, not why: a save, an evaluation or a
    data pass is where a straggler, a rank-conditional collective and uneven shards all show. It
    ranks the causes but is not, alone, specific evidence for one of them. A phase the log shows
    (its own lines right before the failure) is."""
    lines = cause.evidence.get("lines", [])
    if not (lines or cause.evidence.get("symptoms") or _from_dumps(cause)):
        return False
    theirs = {f["fact"]: f["weight"] for f in (rival.evidence.get("facts", []) if rival is not None else [])}
    own = [(f["fact"], f["weight"]) for f in cause.evidence.get("facts", []) if not (answered_phase and f["fact"] == "phase")]
    return stands_alone([e["weight"] for e in lines], own, theirs)


def _answered_phase(facts: Facts | None) -> bool:
    phase = facts.values.get("phase") if facts is not None else None
    return phase is not None and phase.origin == "answer"


def _peer_finished(facts) -> None:
    """A rank lost its peer, and torchrun's summary lists no other failed worker: on one node the
    peer exited cleanly, i.e. it finished (uneven inputs, a skipped collective), not crashed or killed.
    The same when the only other failures are workers the agent stopped after the first one and no
    rank raised an error of its own: the peer was alive yet had closed its connections, which a rank
    does when it leaves the process group at the end of its loop."""
    if facts.get("peer_lost") is not True or facts.known("peer_fate") or (facts.get("nodes") or 1) > 1:
        return  # on several nodes another node's agent would list its own failures, not this one
    if facts.get("others_exited_cleanly") is True:
        clean, detail = facts.values["others_exited_cleanly"], "the peer's connection closed and torchrun lists no other failed worker"
    elif facts.get("others_stopped_by_agent") is True and not facts.known("user_exception"):
        clean, detail = facts.values["others_stopped_by_agent"], ("the peer's connection closed while it was alive (torchrun "
                                                                  "stopped it only after this rank failed) and it raised no error")
    else:
        return
    facts.values["peer_fate"] = FactValue(value="finished", origin="inferred", line=clean.line, text=clean.text, detail=detail)


def _world_from_answers(facts) -> None:
    """Nodes x GPUs per node (answered, or from an env snapshot) is the world size when the log did
    not print one; a rank the store waited for beyond it is a rank the world cannot hold. When the
    log did print one, comparing the two says whether the sizes agree (`world_as_launched`)."""
    nodes, per_node = facts.get("nodes"), facts.get("gpus_per_node")
    if not isinstance(nodes, int) or not isinstance(per_node, int) or nodes < 1 or per_node < 1:
        return
    if any(facts.values[f].origin == "inferred" for f in ("nodes", "gpus_per_node")):
        return  # counted from the hosts and GPUs a pasted excerpt happens to show: a lower bound, not what was started
    if facts.known("world_size"):
        _world_as_launched(facts, nodes, per_node)
        return
    world = nodes * per_node
    facts.values["world_size"] = FactValue(value=world, origin="inferred", detail=f"{nodes} node(s) x {per_node} GPU(s) per node")
    awaited = facts.get("awaited_rank")
    if isinstance(awaited, int) and awaited >= world and not facts.known("rank_outside_world"):
        where = facts.values["awaited_rank"]
        facts.values["rank_outside_world"] = FactValue(
            value=True, origin="inferred", line=where.line, text=where.text,
            detail=f"the store waited for rank {awaited}, but {nodes} x {per_node} ranks were started")


def _harmless_reading(facts, causes) -> None:
    """A quiet log whose recognised lines include harmless ones is a hang and a healthy run with
    warnings alike: only then is its owner asked how the run ended (kb/questions.yaml run_outcome)."""
    if facts.get("no_error_lines") is True and any(c.benign and c.evidence["lines"] for c in causes):
        facts.values["harmless_reading"] = FactValue(
            value=True, origin="inferred", detail="no error was recognised, and some lines are known to be harmless")


def _world_as_launched(facts, nodes: int, per_node: int) -> None:
    """The log's world size against what the user started: a store server counts the agents (one
    per node, torchrun's static rendezvous) or the ranks (init_process_group), so either product
    agrees; more or fewer than both means the sizes given to the launchers disagree."""
    world = facts.get("world_size")
    if not isinstance(world, int) or facts.known("world_as_launched"):
        return
    started = nodes * per_node
    if world in (nodes, started):
        agree, detail = True, f"the log's world of {world} matches {nodes} node(s) x {per_node} GPU(s) started"
    elif world > started or world < nodes:
        agree, detail = False, f"the log's world of {world} does not match {nodes} node(s) x {per_node} GPU(s) started"
    else:
        return  # between the two: a subgroup's store, or GPUs per node that differ; nothing to say
    where = facts.values["world_size"]
    facts.values["world_as_launched"] = FactValue(value=agree, origin="inferred", line=where.line, text=where.text, detail=detail)


WAIT_KINDS = frozenset({"timeout", "heartbeat", "store-timeout"})


def wait_seen(facts, described: bool) -> bool:
    """Whether the log (or the user's words) shows ranks waiting: a collective, store or heartbeat
    timeout, a traceback waiting in a collective, a silent hang, or dumps of ranks left waiting."""
    kinds = set(facts.get("failure_kinds") or ())
    return bool(described or kinds & WAIT_KINDS or facts.get("waiting_ops") or facts.get("no_error_lines") is True
                or facts.get("fr_stragglers") or facts.get("fr_missing_culprits") or facts.known("timeout_ms"))


def confident(causes, top_real, facts: Facts | None = None) -> bool:
    """A verdict that may be stated as the diagnosis (exit 0): likely, specific, confirmed, clear, and
    seen in the log (a description alone is at most "uncertain")."""
    if top_real is None or top_real.score < DIAGNOSED or top_real.unconfirmed or top_real.basis != "evidence":
        return False
    if not _seen_in_the_log(top_real):
        return False
    rival = max((c for c in causes if not c.benign and c.code != top_real.code), key=lambda c: c.score, default=None)
    if rival is not None and top_real.score < CLEAR_LEAD * rival.score:
        return False
    return is_specific(top_real, rival, _answered_phase(facts))


def unknown_answer_could_flip(kb, causes, top_real, facts: Facts, answered: set[str]) -> tuple[list[str], str] | None:
    """Whether a question the user answered "unknown" decides the verdict: some rival's rules on
    those facts, had they held, would lift it to the lead (or the lead's own would sink it). What
    the user could not say must not be what a confident answer silently assumes. Returns the
    deciding facts and the rival's title, or None."""
    from advisor.rules import rule_state

    unknown = {kb.questions[q].fact for q in answered if q in kb.questions and not facts.known(kb.questions[q].fact)}
    if not unknown or top_real is None:
        return None
    values = {k: v.value for k, v in facts.values.items()}

    def swing(cause_id: str, sign: int) -> tuple[float, set[str]]:
        rules = [r for r in (kb.causes[cause_id].rules if cause_id in kb.causes else [])
                 if sign * r.weight > 0 and unknown & set(r.when) and rule_state(r, values) is None]
        return sum(sign * r.weight for r in rules), {f for r in rules for f in r.when if f in unknown}

    drop, own = swing(top_real.id, -1)
    for rival in causes:
        if rival.benign or rival.code == top_real.code:
            continue
        lift, theirs = swing(rival.id, 1)
        if (lift or drop) and rival.raw_score + lift >= top_real.raw_score - drop:
            return sorted(own | theirs), rival.title
    return None


def _undecided_notice(undecided: tuple[list[str], str] | None) -> list[Notice]:
    if not undecided:
        return []
    names, rival = undecided
    title = (f"not stated as the diagnosis: {', '.join(names)} (answered unknown) decides between it and "
             f"\"{rival}\"; find that out to settle it")
    return [Notice(line=0, text=", ".join(f"{n}=unknown" for n in names), cause_id="", title=title, kind="input")]


LIKELY = 0.35  # an uncertain lead below this is headed "Possibly", not "Likely"


def _status(causes, top_real, facts: Facts | None = None) -> str:
    """Harmless lines alone are no diagnosis: they say the failure is elsewhere, so "no-match"."""
    if confident(causes, top_real, facts):
        return "diagnosed"
    if top_real is not None and top_real.score >= LEANING:
        runner_up = next((c.score for c in causes if not c.benign and c is not top_real), 0.0)
        if top_real.score >= LEADS_BY * runner_up:
            return "uncertain"
    return "no-match"  # nothing, or a near tie: naming one cause (and its fix) would be a guess


def _seen_in_the_log(cause) -> bool:
    """Some of the cause's evidence comes from a line of the log (line 0 is the description), or
    from the ranks' Flight Recorder dumps (the fr_* facts): recorded, like a log line."""
    return (any(e["line"] > 0 for e in cause.evidence["lines"]) or any((f.get("line") or 0) > 0 for f in cause.evidence["facts"])
            or _from_dumps(cause))


def _from_dumps(cause) -> bool:
    """Some of the cause's evidence is what the Flight Recorder dumps recorded (advisor.fr_join)."""
    return any(f["fact"].startswith("fr_") and f["weight"] > 0 for f in cause.evidence["facts"])


def _headline(status: str, causes, top_real, fix) -> str:
    if status == "no-match":
        if causes and causes[0].benign:
            return fix.summary  # says the text holds only harmless lines
        lead = "Cause not yet known" if fix.summary.endswith("does not show why.") else "No confident match"
        return f"{lead}: {fix.summary}"
    lead = "Diagnosis" if status == "diagnosed" else "Likely" if top_real.score >= LIKELY else "Possibly"
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
    """The catalogued messages found, errors first and then in log order, each with its meaning. A
    general message whose refinement was found on the same line (`Fatal Python error: %s` and
    `Fatal Python error: Aborted`) gives way to it: the refinement says what the general one leaves open."""
    out = []
    found = [(hit, kb.messages.get(hit.id)) for hit in signatures.messages.values()]
    refined = {(hit.line, general) for hit, msg in found if msg is not None for general in msg.refines}
    for hit, msg in found:
        if msg is None or (hit.line, msg.id) in refined:
            continue
        out.append(RecognisedMessage(
            id=msg.id, component=msg.id.split(".", 1)[0], level=msg.level, role=msg.role, line=hit.line,
            count=hit.count, text=hit.text[:400], meaning=" ".join(msg.meaning.split()),
            points_to=[p.cause for p in msg.points_to], source=msg.source, rank=hit.rank,
        ))
    out.sort(key=lambda m: (m.role == "benign", _LEVEL_ORDER.get(m.level, 3), m.line))
    return out[:MAX_MESSAGES]
