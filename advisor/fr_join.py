"""Joining the Flight Recorder findings with the log's: facts the KB rules rank on, the ranks picture.

The dumps say who never arrived and what it was doing; the log says how it ended (an exception,
a kill, an OOM). Facts set here carry origin "dump" and a detail naming what the dumps showed;
answers still override them. A fact the log already gave is left alone, except the ones only the
dumps can tell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.flight_recorder import analyze, pg_label
from advisor.fr_models import FlightRecorderSummary, FrDump
from advisor.models import Facts, FactValue, RankRow

if TYPE_CHECKING:
    from advisor.diagnose import LogReading

# failure kinds that mean a rank's process ended (advisor.facts events)
_EXIT_KINDS = {"exception", "oom", "killed", "hardware", "nccl-error", "launch"}


def attach_dumps(reading: "LogReading", dumps: list[FrDump], notes: list[str] | None = None) -> FlightRecorderSummary:
    """Analyse the dumps (once per reading: answers do not change them), with the world size the
    log gives for ranks whose dump is missing."""
    world = reading.facts.get("world_size")
    reading.flight_recorder = analyze(dumps, world if isinstance(world, int) else None, notes)
    return reading.flight_recorder


def join_facts(facts: Facts, fr: FlightRecorderSummary, log_read: bool) -> None:
    """Add what the dumps show to `facts` (a copy the caller owns)."""
    values = facts.values
    if not log_read:
        values.pop("no_error_lines", None)  # there was no log to be silent
    usable = len(fr.ranks_dumped)
    if not usable:
        return
    waiting = fr.waiting_in
    where = f"{waiting.op} #{waiting.seq} of group {pg_label(waiting)}" if waiting else None

    def put(name: str, value: Any, detail: str, always: bool = False) -> None:
        if always or name not in values or values[name].value is None:
            values[name] = FactValue(value=value, origin="dump", detail=detail[:400])

    if usable >= 2:
        m = fr.first_mismatch
        if m is not None:
            sides = "; ".join(f"rank {r}: {d.get('op')} {d.get('sizes')}" for r, d in list(m.by_rank.items())[:4])
            put("fr_mismatch", True, f"Flight Recorder: collective #{m.seq} of group {m.pg} differs in {m.kind} ({sides})", always=True)
        else:
            put("fr_mismatch", False, "Flight Recorder: every rank issued the same collectives", always=True)
    stragglers = [r for r in fr.culprits if r in fr.ranks_dumped and not (fr.first_mismatch and r in fr.first_mismatch.odd_ranks)]
    if stragglers:
        put("fr_stragglers", stragglers, f"Flight Recorder: never entered {where or 'the collective the others wait in'}", always=True)
    if fr.ranks_missing:
        put("fr_missing_ranks", fr.ranks_missing[:512], "Flight Recorder: no usable dump from these ranks", always=True)
    dead = [r for r in fr.culprits if r in fr.ranks_missing]
    if dead:
        put("fr_missing_culprits", dead, "Flight Recorder: the others wait for these ranks, which left no usable dump", always=True)
        exited = _exited(facts, dead) if log_read else None
        if exited is not None:
            put("fr_dead_rank", exited, f"Flight Recorder: rank {_list(dead)} left no dump while the others wait for it"
                + ("; the log shows it exiting" if exited else "; the log does not show it exiting"), always=True)
    if fr.activity:
        put("straggler_activity", [fr.activity],
            f"Flight Recorder: the stack of rank {_list(stragglers)}'s last collective shows {fr.activity} code", always=True)
    if isinstance(fr.world_size, int) and fr.world_size > 0:
        put("world_size", fr.world_size, "Flight Recorder: ranks named by the dumps and their process groups")
    if waiting is not None:
        from advisor.facts import op_family

        op = waiting.op.split(" ", 1)[0]  # "send 0->1": the operation, without its peers
        put("op_type", op, f"Flight Recorder: the operation the ranks wait in ({where})")
        put("op_family", op_family(op), f"Flight Recorder: {where}")
        if op not in ("send", "recv"):  # a point-to-point number counts other things than SeqNum
            put("seq_num", waiting.seq, f"Flight Recorder: {where}")
        if waiting.timeout_ms:
            put("timeout_ms", waiting.timeout_ms, f"Flight Recorder: the timeout recorded with {where}")
    backends = {d.backend for d in fr.dumps if d.backend}
    if len(backends) == 1:
        backend = backends.pop()
        if backend in ("nccl", "gloo"):
            put("backend", backend, "Flight Recorder: the operations' names")


def _exited(facts: Facts, ranks: list[int]) -> bool:
    """Whether the log shows one of `ranks` ending: its own failure line, or a launcher's report
    of an exit code or a signal."""
    if any(e.rank in ranks and e.kind in _EXIT_KINDS for e in facts.events):
        return True
    if facts.known("exit_code") or facts.known("signal"):
        return True
    return False


def join_ranks(rows: list[RankRow], fr: FlightRecorderSummary | None) -> list[RankRow]:
    """The log's ranks picture with each rank's last collective from the dumps; ranks only the
    dumps know get rows of their own (state "silent": the log says nothing of them)."""
    if fr is None or not fr.ranks:
        return rows
    by_rank = {r.rank: r for r in rows}
    out = list(rows)
    for info in fr.ranks:
        text = None
        if info.last is not None:
            text = f"{info.last.op} #{info.last.seq} of group {pg_label(info.last)}" + (f", {info.state}" if info.state else "")
        row = by_rank.get(info.rank)
        if row is None:
            if len(out) >= 4096:
                continue
            row = RankRow(rank=info.rank, state="silent")
            out.append(row)
        row.last_collective = text
        row.flight_recorder = info.status
    return sorted(out, key=lambda r: r.rank)


def _list(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks[:16]) + (" ..." if len(ranks) > 16 else "")
