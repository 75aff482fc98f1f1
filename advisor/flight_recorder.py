"""What the ranks' Flight Recorder dumps say about a hang: pure analysis over `FrDump` models.

Collectives pair up by order: the n-th collective of a process group on one rank meets the n-th
on every other member (`collective_seq_id`). So, per process group:

* each rank's last collective entered, and its window (the ring buffer keeps the newest entries);
* the first sequence number, inside every rank's window, where the ranks disagree on the
  operation, the sizes or the dtypes: a mismatch;
* the collective the group waits in: the first one some members entered and others never did;
  the members that never entered it are behind, the ones without a usable dump are missing.

Across groups, a rank whose last entry is such a collective waits for the ranks behind in that
group: following "waits for" to the ranks that wait for no one gives the culprits (in a tensor-
and data-parallel job, rank 0 waits in a DP all-reduce for rank 2, which waits in a TP all-reduce
for rank 3, which is reading data: rank 3 is the culprit). Point-to-point operations pair up per
peer, in order: the k-th send from a to b with the k-th receive on b from a.

gloo (torch 2.8+) records every entry as "scheduled" and never its start or completion: a rank's
position is then the last collective it entered, which is enough to find who never arrived.
torch's own analyzer (`python -m torch.distributed.flight_recorder.fr_trace`) stops when a dump
is missing and cannot map gloo's groups; this module reads whatever is there.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from advisor.fr_models import (
    FlightRecorderSummary,
    FrAt,
    FrDump,
    FrDumpInfo,
    FrEntry,
    FrFrame,
    FrGroup,
    FrMismatch,
    FrRank,
)
from advisor.stack_activity import activity as stack_activity
from advisor.stack_activity import user_frames

MAX_WORLD = 1 << 17
"""the largest world the dumps' rank numbers or groups may describe."""
MAX_ROWS = 4096
"""ranks listed one by one (summary rows, missing ranks); beyond, the dumped ones and the culprits."""
_SHOWN_FRAMES = 12

def analyze(dumps: list[FrDump], world_size: int | None = None, notes: list[str] | None = None) -> FlightRecorderSummary:
    """Everything the dumps show; `world_size` (from the log) finds ranks whose dump is missing
    when the dumps themselves do not name every rank (gloo records no group configuration)."""
    job = _Job(dumps, world_size)
    job.align()
    return job.summary(list(notes or []))


# --- the job as the dumps show it ------------------------------------------------------------


@dataclass
class _GroupState:
    pg: str
    desc: str = ""
    members: list[int] = field(default_factory=list)
    members_from: str = "entries"
    by_rank: dict[int, list[FrEntry]] = field(default_factory=dict)  # collectives, oldest first
    p2p: dict[int, list[FrEntry]] = field(default_factory=dict)
    entered: dict[int, int] = field(default_factory=dict)
    first: dict[int, int] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    behind: list[int] = field(default_factory=list)
    waiting: FrAt | None = None
    mismatch: FrMismatch | None = None


class _Job:
    def __init__(self, dumps: list[FrDump], world_hint: int | None):
        self.dumps = {d.rank: d for d in dumps}
        self.usable = {d.rank: d for d in dumps if d.entries and not d.problem}
        self.groups: dict[str, _GroupState] = {}
        self.notes: list[str] = []
        self._collect_groups()
        self.world = self._world(world_hint)
        self._members()

    # -- groups and members --
    def _collect_groups(self) -> None:
        for rank, dump in sorted(self.usable.items()):
            for e in dump.entries:
                group = self.groups.get(e.pg)
                if group is None:
                    group = self.groups[e.pg] = _GroupState(pg=e.pg, desc=e.pg_desc)
                target = group.p2p if e.is_p2p else group.by_rank
                target.setdefault(rank, []).append(e)
        for group in self.groups.values():
            for rank, entries in group.by_rank.items():
                group.entered[rank] = max(e.seq for e in entries)
                group.first[rank] = min(e.seq for e in entries)

    def _config_ranks(self, pg: str) -> list[int] | None:
        """A group's members from the dumps' pg_config; gloo files its configuration under an empty
        name, which is the default group's when that is the only group the rank used."""
        for dump in self.usable.values():
            config = dump.pg_config.get(pg)
            if config is not None and config.ranks:
                return config.ranks
        if pg == "0":
            for dump in self.usable.values():
                config = dump.pg_config.get("")
                if config is not None and config.ranks and {e.pg for e in dump.entries} == {"0"}:
                    return config.ranks
        return None

    def _world(self, hint: int | None) -> int | None:
        candidates = [r + 1 for r in self.dumps]
        default = self._config_ranks("0")
        if default:
            candidates.append(max(default) + 1)
        for pg in self.groups:
            ranks = self._config_ranks(pg)
            if ranks:
                candidates.append(max(ranks) + 1)
        if isinstance(hint, int) and 0 < hint <= MAX_WORLD:
            candidates.append(hint)
        return max(candidates) if candidates else None

    def _members(self) -> None:
        for pg, group in self.groups.items():
            ranks = self._config_ranks(pg)
            if ranks:
                group.members, group.members_from = ranks, "pg_config"
            elif (pg == "0" or group.desc == "default_pg") and self.world and self.world <= MAX_WORLD:
                group.members, group.members_from = list(range(self.world)), "world"
            else:
                group.members = sorted(set(group.by_rank) | set(group.p2p))
            group.missing = [r for r in group.members if r not in self.usable]
            for rank in group.members:
                if rank in self.usable and rank not in group.entered and not group.p2p.get(rank):
                    dump = self.usable[rank]
                    if dump.entries[0].record_id == 0:  # its whole history is there: it never called one
                        group.entered[rank], group.first[rank] = 0, 1

    # -- per group: mismatch and waiting --
    def align(self) -> None:
        for group in self.groups.values():
            self._find_mismatch(group)
            self._find_waiting(group)
        self._p2p_waits()

    def _find_mismatch(self, group: _GroupState) -> None:
        ranks = [r for r in group.members if r in group.entered and group.entered[r] > 0]
        if len(ranks) < 2:
            return
        start = max(group.first[r] for r in ranks)
        stop = min(group.entered[r] for r in ranks)
        at = {r: defaultdict(list) for r in ranks}
        for r in ranks:
            for e in group.by_rank.get(r, []):
                if start <= e.seq <= stop:
                    at[r][e.seq].append(e)
        for seq in sorted({seq for r in ranks for seq in at[r]}):  # the numbers present: a gap can be huge
            sigs = {r: sorted(at[r].get(seq, []), key=lambda e: (e.op_id or 0, e.record_id)) for r in ranks}
            present = {r: s for r, s in sigs.items() if s}
            if len(present) < 2:
                continue
            kind = _disagreement(list(present.values()))
            if kind is None:
                continue
            group.mismatch = FrMismatch(
                pg=group.pg, seq=seq, desc=group.desc, kind=kind,
                by_rank={str(r): _describe(es) for r, es in sorted(present.items())},
                odd_ranks=_odd_ranks(group, present, seq),
            )
            return

    def _find_waiting(self, group: _GroupState) -> None:
        entered = {r: group.entered[r] for r in group.members if r in group.entered}
        if not entered:
            return
        if group.mismatch is not None:
            seq = group.mismatch.seq
            ops = [d["op"] for d in group.mismatch.by_rank.values()]
            at_seq = [e for es in group.by_rank.values() for e in es if e.seq == seq]
            group.waiting = FrAt(pg=group.pg, seq=seq, op=max(sorted(set(ops)), key=ops.count), desc=group.desc,
                                 timeout_ms=next((e.timeout_ms for e in at_seq if e.timeout_ms), None))
            group.behind = sorted(r for r, s in entered.items() if s < seq)
            return
        top = max(entered.values())
        lagging = [s for s in entered.values() if s < top]
        seq = (min(lagging) + 1) if lagging else top
        if seq <= 0:
            return
        behind = sorted(r for r, s in entered.items() if s < seq)
        if not behind and not group.missing:
            return
        arrived = [e for r, s in entered.items() if s >= seq for e in group.by_rank.get(r, []) if e.seq == seq]
        if not arrived:
            return
        if not behind and all(e.state == "completed" for e in arrived):
            return  # every rank that dumped finished it: nobody waits here for the missing ones
        group.waiting = FrAt(pg=group.pg, seq=seq, op=arrived[0].op, desc=group.desc,
                             timeout_ms=next((e.timeout_ms for e in arrived if e.timeout_ms), None))
        group.behind = behind

    def _p2p_waits(self) -> None:
        """Sends and receives pair up per peer, in order; an unfinished one waits for its peer."""
        self.p2p_waits: dict[int, tuple[FrEntry, list[int]]] = {}
        for group in self.groups.values():
            if not group.p2p:
                continue
            members = group.members or sorted(group.p2p)
            posted: dict[tuple[int, int, str], int] = defaultdict(int)  # (rank, peer, op) -> count
            pending: list[tuple[int, int, str, int, FrEntry]] = []
            for rank, entries in group.p2p.items():
                for e in sorted(entries, key=lambda e: (e.p2p_seq, e.record_id)):
                    peer = _p2p_peer(e, members)
                    if peer is None:
                        continue
                    posted[(rank, peer, e.op)] += 1
                    if e.state != "completed":
                        pending.append((rank, peer, e.op, posted[(rank, peer, e.op)], e))
            for rank, peer, op, k, e in pending:
                other = "recv" if op == "send" else "send"
                if peer not in self.usable:
                    self.p2p_waits.setdefault(rank, (e, []))[1].append(peer)
                elif posted[(peer, rank, other)] < k:
                    self.p2p_waits.setdefault(rank, (e, []))[1].append(peer)

    # -- across groups: who waits for whom --
    def last_entry(self, rank: int) -> FrEntry | None:
        dump = self.usable.get(rank)
        return dump.entries[-1] if dump else None

    def waits_for(self, rank: int) -> list[int]:
        last = self.last_entry(rank)
        if last is None:
            return []
        if last.is_p2p:
            hit = self.p2p_waits.get(rank)
            return sorted(set(hit[1])) if hit and hit[0] is last else []
        if last.state == "completed":
            return []
        group = self.groups.get(last.pg)
        if group is None:
            return []
        if group.mismatch is not None and last.seq >= group.mismatch.seq:
            return []  # everyone entered; they wait on each other's different calls
        blockers = [r for r in group.members if r != rank and (r in group.missing or group.entered.get(r, last.seq) < last.seq)]
        if group.waiting is None and not blockers:
            return []
        return blockers

    def summary(self, notes: list[str]) -> FlightRecorderSummary:
        edges = {r: self.waits_for(r) for r in self.usable}
        mismatch = min((g.mismatch for g in self.groups.values() if g.mismatch), key=_mismatch_order, default=None)
        culprits, why = self._culprits(edges, mismatch)
        world = self.world if self.world and self.world <= MAX_WORLD else None
        missing = [r for r in range(world) if r not in self.usable] if world else sorted(set(self.dumps) - set(self.usable))
        if len(missing) > MAX_ROWS:
            notes.append(f"{len(missing):,} ranks have no usable dump; the first {MAX_ROWS:,} are listed")
            missing = missing[:MAX_ROWS]
        if world and world <= MAX_ROWS:
            ranks_all: list[int] = list(range(world))
        else:
            ranks_all = sorted(set(self.dumps) | set(culprits) | set(missing[:64]))
        rows = []
        behind_any = {r for g in self.groups.values() for r in g.behind}
        odd = set(mismatch.odd_ranks) if mismatch else set()
        for rank in ranks_all:
            dump = self.dumps.get(rank)
            state = "ok" if rank in self.usable else ("missing" if dump is None else ("empty" if not dump.entries else "unreadable"))
            last = self.last_entry(rank)
            if rank not in self.usable:
                status = "no-dump"
            elif rank in odd:
                status = "mismatch"
            elif edges.get(rank):
                status = "waiting"
            elif rank in behind_any or rank in culprits:
                status = "behind"
            elif mismatch is not None and last is not None and last.pg == mismatch.pg and last.seq >= mismatch.seq:
                status = "mismatch"
            else:
                status = "in-step"
            rows.append(FrRank(
                rank=rank, dump=state, status=status, waits_for=edges.get(rank, []),
                last=FrAt(pg=last.pg, seq=last.p2p_seq if last.is_p2p else last.seq, op=last.op + (f" {last.peer}" if last.peer else ""),
                          desc=last.pg_desc) if last else None,
                state=(last.state if last.backend != "gloo" else "") if last else "",  # gloo: always "scheduled"
            ))
        waiting = self._global_waiting(culprits, mismatch)
        frames = {str(r): _shown_frames(self.last_entry(r).frames) for r in culprits if self.last_entry(r) is not None}
        frames = {r: f for r, f in frames.items() if f}
        activity = None
        for rank in culprits:
            if rank in odd or rank not in self.usable:
                continue
            activity = activity or stack_activity(self.last_entry(rank).frames)
        return FlightRecorderSummary(
            ranks_dumped=sorted(self.usable), ranks_missing=missing,
            process_groups=[self._group_out(g) for g in sorted(self.groups.values(), key=lambda g: _pg_order(g.pg))],
            first_mismatch=mismatch, culprits=culprits, waiting_in=waiting, world_size=self.world, why=why,
            culprit_frames=frames, activity=activity, ranks=rows,
            dumps=[FrDumpInfo(rank=d.rank, file=d.source, format=d.format, version=d.version, torch=d.torch,
                              backend=d.backend, entries=len(d.entries), problem=d.problem) for d in self.dumps.values()],
            notes=notes + self._notes(),
        )

    def _culprits(self, edges: dict[int, list[int]], mismatch: FrMismatch | None) -> tuple[list[int], dict[str, str]]:
        why: dict[str, str] = {}
        waited_for = {b for targets in edges.values() for b in targets}
        sinks = sorted(b for b in waited_for if not edges.get(b))
        for b in sinks:
            if b not in self.usable:
                dump = self.dumps.get(b)
                state = "left no dump" if dump is None else f"left no usable dump ({dump.problem})"
                why[str(b)] = f"{state} while the others wait for it: {self._waiters_text(b, edges)}"
            else:
                waiters = [self.last_entry(r) for r, t in edges.items() if b in t]
                p2p = bool(waiters) and all(e is not None and e.is_p2p for e in waiters)
                lead = "never posted the send or receive the others wait for" if p2p else "never entered the collective the others wait in"
                why[str(b)] = f"{lead}: {self._waiters_text(b, edges)}; its last operation was {_at_text(self.last_entry(b))}"
        culprits = list(sinks)
        if not sinks and waited_for:  # a circle: each waits for the next, in different groups
            culprits = sorted(waited_for)
            for b in culprits:
                why[str(b)] = "waits in a circle with the others: the ranks issued different groups' collectives in different orders"
        if mismatch is not None:
            for r in mismatch.odd_ranks:
                if r not in culprits:
                    culprits.append(r)
                mine = mismatch.by_rank.get(str(r), {})
                others = [d for k, d in mismatch.by_rank.items() if int(k) not in mismatch.odd_ranks]
                theirs = f" where the others issued {_call_text(others[0])}" if others else ""
                why[str(r)] = f"issued {_call_text(mine)} as collective #{mismatch.seq} of group {_pg_label(mismatch.pg, mismatch.desc)}{theirs}"
        if not culprits and not mismatch:
            orphans = [r for g in self.groups.values() if g.waiting for r in g.missing]
            culprits = sorted(set(orphans))
            for r in culprits:
                why[str(r)] = "left no dump while the others wait in a collective it belongs to"
        return sorted(culprits), why

    def _waiters_text(self, culprit: int, edges: dict[int, list[int]]) -> str:
        """Who waits for `culprit`, and where: directly, then through others."""
        direct: dict[str, list[int]] = defaultdict(list)
        for r in sorted(edges):
            if culprit in edges[r]:
                direct[_at_text(self.last_entry(r), frames=False)].append(r)
        parts = [f"rank{'s' if len(rs) > 1 else ''} {_ranges(rs)} in {where}" for where, rs in direct.items()]
        reached = {r for rs in direct.values() for r in rs}
        chain: list[str] = []
        frontier = set(reached)
        while frontier:
            nxt = {r for r, t in edges.items() if r not in reached and set(t) & frontier}
            for r in sorted(nxt):
                chain.append(f"rank {r} waits for rank {_ranges(sorted(set(edges[r]) & (frontier | reached)))} in turn")
            reached |= nxt
            frontier = nxt
        text = "; ".join(parts) or "ranks wait for it"
        return "; ".join([text, *chain])

    def _global_waiting(self, culprits: list[int], mismatch: FrMismatch | None) -> FrAt | None:
        if mismatch is not None:
            group = self.groups[mismatch.pg]
            return group.waiting
        best: tuple[int, str] | None = None
        chosen = None
        for group in self.groups.values():
            if group.waiting is None:
                continue
            if culprits and not set(culprits) & (set(group.behind) | set(group.missing)):
                continue
            waiters = sum(1 for r in group.members if self.last_entry(r) is not None and self.last_entry(r).pg == group.pg
                          and not self.last_entry(r).is_p2p and self.last_entry(r).seq == group.waiting.seq)
            key = (-waiters, _pg_order(group.pg))
            if best is None or key < best:
                best, chosen = key, group.waiting
        if chosen is None:
            for rank in culprits:
                for waiter, (e, peers) in getattr(self, "p2p_waits", {}).items():
                    if rank in peers:
                        return FrAt(pg=e.pg, seq=e.p2p_seq, op=f"{e.op} {e.peer or ''}".strip(), desc=e.pg_desc,
                                    timeout_ms=e.timeout_ms)
        return chosen

    def _group_out(self, g: _GroupState) -> FrGroup:
        return FrGroup(pg=g.pg, desc=g.desc, ranks=g.members[:4096], ranks_from=g.members_from,  # type: ignore[arg-type]
                       last_seq={str(r): s for r, s in sorted(g.entered.items())}, waiting_in=g.waiting,
                       behind=g.behind, missing=g.missing)

    def _notes(self) -> list[str]:
        notes = []
        versions = sorted({d.version for d in self.usable.values() if d.version})
        if len(versions) > 1:
            notes.append(f"the dumps come from different dump format versions ({', '.join(versions)}): different torch releases on different ranks?")
        if any(d.backend and "gloo" in d.backend for d in self.usable.values()):
            notes.append("gloo records no start or completion: a rank's position is the last collective it entered")
        for d in self.dumps.values():
            if d.problem:
                notes.append(f"rank {d.rank} ({d.source}): {d.problem}")
        wrapped = sorted(r for r, d in self.usable.items() if d.entries[0].record_id > 0)
        if wrapped:
            notes.append(f"the ring buffer wrapped on ranks {_ranges(wrapped)}: older collectives are gone, "
                         "comparisons start where every rank still has them")
        return notes


# --- comparing one collective across ranks ---------------------------------------------------

_ANY_SIZES = {"all_to_all", "alltoall", "alltoall_base", "all_to_all_single", "_alltoall_base", "alltoallv"}


def _disagreement(per_rank: list[list[FrEntry]]) -> str | None:
    """What the ranks' calls at one sequence number disagree on first, as torch's own analyzer
    compares them: the operation, then the sizes (except where they may differ by rank: all-to-all,
    the gathered or scattered side of gather/scatter), then the dtypes."""
    ops = {tuple(e.op for e in es) for es in per_rank}
    if len(ops) > 1:
        return "op"
    sizes = set()
    dtypes = set()
    for es in per_rank:
        sizes.add(tuple(_size_key(e) for e in es))
        dtypes.add(tuple(_dtype_key(e) for e in es))
    if len(sizes) > 1:
        return "sizes"
    if len(dtypes) > 1:
        return "dtypes"
    return None


def _size_key(e: FrEntry) -> tuple:
    op = e.op.lower().lstrip("_")
    if op in _ANY_SIZES or "alltoall" in op or "all_to_all" in op or op.endswith("_v"):
        return ()  # sizes may differ by rank (uneven splits)
    if op.startswith("gather"):
        return (_freeze(e.input_sizes),)
    if op.startswith("scatter"):
        return (_freeze(e.output_sizes),)
    return (_freeze(e.input_sizes), _freeze(e.output_sizes))


def _dtype_key(e: FrEntry) -> tuple:
    op = e.op.lower().lstrip("_")
    ins = tuple(sorted(set(e.input_dtypes))) if e.input_sizes and not op.startswith("scatter") else ()
    outs = tuple(sorted(set(e.output_dtypes))) if e.output_sizes and not op.startswith("gather") else ()
    return ins, outs


def _freeze(sizes: list[list[int]]) -> tuple:
    return tuple(tuple(s) for s in sizes)


def _odd_ranks(group: _GroupState, present: dict[int, list[FrEntry]], seq: int) -> list[int]:
    """The ranks on the minority side; on a tie, the side whose call this group never made
    before (the collective only some ranks make, like rank 0's extra all-reduce of a metric)."""
    sides: dict[tuple, list[int]] = defaultdict(list)
    for r, es in present.items():
        sides[tuple((e.op, _size_key(e), _dtype_key(e)) for e in es)].append(r)
    if len(sides) < 2:
        return []
    biggest = max(len(v) for v in sides.values())
    majority = [k for k, v in sides.items() if len(v) == biggest]
    if len(majority) == 1:
        return sorted(r for k, v in sides.items() if k != majority[0] for r in v)
    seen_before = set()
    for entries in group.by_rank.values():
        earlier: dict[int, list[FrEntry]] = defaultdict(list)
        for e in entries:
            if e.seq < seq:
                earlier[e.seq].append(e)
        for es in earlier.values():
            es.sort(key=lambda e: (e.op_id or 0, e.record_id))
            seen_before.add(tuple((e.op, _size_key(e), _dtype_key(e)) for e in es))
    novel = [k for k in majority if k not in seen_before]
    if len(novel) == 1:
        return sorted(sides[novel[0]])
    return sorted(r for k in sides for r in sides[k] if k not in seen_before) if novel else []


def _describe(entries: list[FrEntry]) -> dict:
    e = entries[-1] if entries[-1].op != "coalesced" or len(entries) == 1 else entries[0]
    out = {"op": e.op, "sizes": e.input_sizes, "output_sizes": e.output_sizes,
           "dtypes": sorted(set(e.input_dtypes) | set(e.output_dtypes)), "state": e.state or "recorded"}
    if len(entries) > 1:
        out["ops"] = [x.op for x in entries]
    where = _where(e.frames)
    if where:
        out["where"] = where
    return out


# --- small helpers ---------------------------------------------------------------------------


def _p2p_peer(e: FrEntry, members: list[int]) -> int | None:
    """The global rank on the other side of a send ("0->1") or recv ("1<-0"), group ranks mapped
    through the group's sorted members."""
    if not e.peer:
        return None
    text = e.peer.replace(" ", "")
    if "->" in text:
        src, dst = text.split("->", 1)
        local = dst if e.op == "send" else src
    elif "<-" in text:
        dst, src = text.split("<-", 1)
        local = src if e.op == "recv" else dst
    else:
        return None
    if not local.isdigit() or len(local) > 7:
        return None
    index = int(local)
    return members[index] if index < len(members) else None


def _shown_frames(frames: list[FrFrame]) -> list[FrFrame]:
    return user_frames(frames)[:_SHOWN_FRAMES]


def _where(frames: list[FrFrame]) -> str:
    mine = user_frames(frames)
    if not mine:
        return ""
    f = mine[0]
    base = f.file.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{f.name} ({base}:{f.line})" if f.line is not None else f"{f.name} ({base})"


def _at_text(e: FrEntry | None, frames: bool = True) -> str:
    if e is None:
        return "nothing recorded"
    number = e.p2p_seq if e.is_p2p else e.seq
    where = _where(e.frames) if frames else ""
    op = e.op + (f" {e.peer}" if e.peer else "")
    return f"{op} #{number} of group {_pg_label(e.pg, e.pg_desc)}" + (f", in {where}" if where else "")


def _call_text(d: dict) -> str:
    dtypes = "/".join(d.get("dtypes") or [])
    where = d.get("where")
    return f"{d.get('op')} {d.get('sizes')}" + (f" {dtypes}" if dtypes else "") + (f" in {where}" if where else "")


def _pg_label(pg: str, desc: str) -> str:
    return f"{pg} ({desc})" if desc and desc != pg else pg


def pg_label(at: FrAt) -> str:
    return _pg_label(at.pg, at.desc)


def _pg_order(pg: str) -> tuple:
    return (0, int(pg), "") if pg.isdigit() and len(pg) < 10 else (1, 0, pg)


def _mismatch_order(m: FrMismatch) -> tuple:
    return (_pg_order(m.pg), m.seq)


def _ranges(ranks: list[int]) -> str:
    ranks = sorted(set(ranks))
    parts: list[str] = []
    start = prev = None
    for r in ranks + [None]:  # type: ignore[list-item]
        if start is None:
            start = prev = r
        elif r is not None and r == prev + 1:
            prev = r
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = r
    return ",".join(parts[:40]) + (" ..." if len(parts) > 40 else "")
