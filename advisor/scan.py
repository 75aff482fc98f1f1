"""One pass over a log that finds every line any probe cares about, at near-grep speed.

All probes (KB signatures, phase cues, framework detectors, fact extractors) are compiled into one
RE2 alternation that runs over raw byte blocks; only the few lines it hits are decoded and handed
to the individual probes. A hit's line, its rank prefix and its timestamp travel in a `LineHit`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Protocol

from advisor.reader import Block, decode
from advisor.regex import PatternSet, compile_bytes_alternation, compile_pattern, leading_literals, required_atoms

# the longest stretch of text one hit may pull in (a pattern spanning many lines, a giant line)
MAX_WINDOW = 64 << 10
_RANK_PREFIX = re.compile(r"\[(?:rank|default)(\d{1,6})\]:")
_RANK_PREFIX_BYTES = re.compile(rb"\[(?:rank|default)(\d{1,6})\]:")


@dataclass(frozen=True, slots=True)
class Probe:
    """A pattern and who wants to hear about it."""

    id: str
    pattern: str
    kind: str  # "signature" | "message" | "benign" | "fact" | "phase" | "framework" | "version" | "gate"
    owner: str  # cause id, fact extractor id, phase name or framework id
    ignore_case: bool = True
    payload: Any = None
    recurring: str | None = None
    """"first" or "latest" when its listener keeps only the first or the latest values: see `_Recurring`."""
    searched: bool = True
    """False for a passenger: it is not part of the alternation that finds hit lines, only checked on
    the lines other probes (or a `gate` probe that stands for a family of lines) found."""

    @property
    def regex(self):
        return compile_pattern(self.pattern, self.ignore_case)


@dataclass(slots=True)
class LineHit:
    probe: Probe
    match: Any  # an RE2 match (offsets relative to the scanned window, not to `text`)
    line_no: int
    text: str  # the line the match starts on (and the lines a wrapped match spans)
    rank: int | None  # from a `[rankN]:` prefix before the match on that line

    def group(self, name: str) -> str | None:
        try:
            return self.match.group(name)
        except (IndexError, KeyError):
            return None


class Listener(Protocol):
    def on_hit(self, hit: LineHit) -> None: ...


# Windows checked with the literal-atom prefilter before the RE2 set is worth compiling (~50 ms):
# a pasted error line never pays for it, a gigabyte log pays once.
SET_AFTER = 64


@dataclass
class ProbeTable:
    """Probes compiled for scanning: a byte alternation for the fast path, and for the slow path
    a literal-atom prefilter (cheap to start) that gives way to an RE2 set on hit-heavy logs."""

    probes: list[Probe]
    atoms: dict[str, tuple[str, ...] | None] | None = None
    """pattern -> required literals (advisor.regex.required_atoms); computed when not given."""
    _fast: Any = field(init=False, repr=False, default=None)
    _sets: list[tuple[PatternSet, list[int]]] | None = field(init=False, repr=False, default=None)
    _atoms: list[tuple[str, ...] | None] = field(init=False, repr=False, default_factory=list)
    _windows: int = field(init=False, repr=False, default=0)

    _index: dict[str, int] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        known = self.atoms or {}
        self._atoms = [known[p.pattern] if p.pattern in known else required_atoms(p.pattern) for p in self.probes]
        self._index = {p.id: i for i, p in enumerate(self.probes)}

    def index(self, probe: Probe) -> int:
        return self._index[probe.id]

    def without(self, hot: frozenset[int]):
        """The byte alternation of every probe but the `hot` ones (not cached: each holds a DFA)."""
        return self._alternation(frozenset(hot))

    @property
    def fast(self):
        if self._fast is None:
            self._fast = self._alternation(frozenset())
        return self._fast

    def _alternation(self, hot: frozenset[int]):
        """What the scanner searches for: each searched probe's leading literals when it has long
        enough ones (advisor.regex.leading_literals), else its whole pattern. Literals keep the
        automaton small however many messages the KB knows; the line found is then checked
        against every probe that may match it."""
        literals: set[str] = set()
        parts: list[str] = []
        for i, p in enumerate(self.probes):
            if i in hot or not p.searched:
                continue
            # a recurring probe must hit exactly to turn hot (see _Recurring): keep it whole
            lead = None if p.recurring else leading_literals(p.pattern)
            if lead is not None:
                literals.update(lead)
            else:
                parts.append(f"(?i:{p.pattern})" if p.ignore_case else f"(?:{p.pattern})")
        if literals:
            parts.append("(?i:" + "|".join(sorted(literals)) + ")")  # fragments, already escaped
        return compile_bytes_alternation(parts, ignore_case=False)

    def matching(self, text: str, atoms_only: bool = False) -> list[int]:
        """Indices of the probes that may match `text` (each is confirmed by its own regex)."""
        self._windows += 1
        if atoms_only or self._windows <= SET_AFTER:
            lowered = text.lower()
            return [i for i, atoms in enumerate(self._atoms) if atoms is None or any(a in lowered for a in atoms)]
        if self._sets is None:
            ci = [i for i, p in enumerate(self.probes) if p.ignore_case]
            cs = [i for i, p in enumerate(self.probes) if not p.ignore_case]
            self._sets = [
                (PatternSet([self.probes[i].pattern for i in idx], ignore_case=case), idx)
                for idx, case in ((ci, True), (cs, False))
                if idx
            ]
        out: list[int] = []
        for pset, idx in self._sets:
            out.extend(idx[j] for j in pset.matching(text))
        return sorted(out)


@dataclass
class ScanStats:
    bytes: int = 0
    lines: int = 0
    hits: int = 0
    ranks_prefixed: set[int] = field(default_factory=set)
    summarized: int = 0  # recurring lines only the most recent of which were matched in full


def scan(
    blocks: Iterable[Block],
    table: ProbeTable,
    listeners: list[Listener],
    stats: ScanStats | None = None,
) -> ScanStats:
    """Feed every probe hit in `blocks` to every listener, in log order."""
    stats = stats or ScanStats()
    recurring = _Recurring(table)
    seen_tail: set[tuple[int, str]] = set()  # (line, probe) already reported at a block's last line
    carry = b""  # the previous block's last line, so a message wrapped across blocks still matches
    carry_line = 0
    next_line = 1  # the line the next block starts on (blocks' own line numbers are not needed)
    for block in blocks:
        stats.bytes += len(block.data)
        data = carry + block.data
        base_line = carry_line if carry else next_line
        if len(stats.ranks_prefixed) < 65536:
            stats.ranks_prefixed.update(int(r) for r in set(_RANK_PREFIX_BYTES.findall(block.data)))
        new_seen: set[tuple[int, str]] = set()
        counted = _Counted()
        for hit in _hits_in(data, base_line, table, recurring, counted):
            key = (hit.line_no, hit.probe.id)
            if key in seen_tail:
                continue
            new_seen.add(key)
            stats.hits += 1
            recurring.count(hit.probe)
            for listener in listeners:
                listener.on_hit(hit)
        # the scanner counted line breaks up to its last hit; count the rest once
        newlines = counted.newlines + data.count(b"\n", counted.upto)
        ends_line = data.endswith(b"\n")
        last_nl = data.rfind(b"\n", 0, len(data) - 1) + 1
        carry = data[last_nl:] if ends_line else b""
        carry_line = base_line + newlines - (1 if ends_line else 0)  # the line the data ends on
        next_line = base_line + newlines
        if len(carry) > MAX_WINDOW:
            carry = b""
        seen_tail = {k for k in new_seen if k[0] == carry_line}
        stats.lines = carry_line
    stats.summarized = recurring.summarized
    return stats


# A probe whose listener keeps only its first or its latest values (`Probe.recurring`: version and
# framework banners; progress bars, phase cues) turns "hot" after HOT_AFTER hits. From then on the
# scan searches with an alternation of the other ("cold") probes only, so RE2 skips the millions of
# tqdm redraws and loss lines at DFA speed. A hot "first" probe has nothing left to say. For each
# hot "latest" probe, the stretch before each cold hit (and before each block's end) is searched
# once more, from its end backwards, for that probe's last match, and those lines are matched in
# full, in log order. Every listener thus sees, before each failure line, the same latest values in
# the same order as in a full pass. What it no longer sees are the repeats in between: throughput
# samples (for `slowdown`) become one per stretch.
HOT_AFTER = 256
TAIL = 4096  # first look-back when searching a stretch for a hot probe's last match


class _Recurring:
    """Per-scan state of the hot/cold split (the probe table itself is shared between threads)."""

    def __init__(self, table: ProbeTable) -> None:
        self.table = table
        self.counts = [0] * len(table.probes)
        self.hot: set[int] = set()
        self.latest: dict[int, Any] = {}  # hot "latest" probes -> their own byte regex
        self.cold: Any = None  # alternation of the probes that are not hot
        self.summarized = 0  # stretches whose repeats were skipped

    def count(self, probe: Probe) -> None:
        if not probe.recurring:
            return
        i = self.table.index(probe)
        self.counts[i] += 1
        if self.counts[i] == HOT_AFTER:
            # promote the probes well on their way too: each promotion compiles a new alternation
            probes = self.table.probes
            rising = [j for j, n in enumerate(self.counts) if n >= HOT_AFTER // 4 and probes[j].recurring]
            new = {*rising, i} - self.hot
            if not new:
                return  # promoted with the others already: the alternation in use leaves it out
            for j in new:
                self.hot.add(j)
                p = probes[j]
                if p.recurring == "latest":
                    self.latest[j] = compile_bytes_alternation([f"(?i:{p.pattern})" if p.ignore_case else p.pattern], ignore_case=False)
            self.cold = None  # free the old program (and its DFA cache) first
            self.cold = self.table.without(frozenset(self.hot))

    def last_lines(self, data: bytes, start: int, stop: int) -> list[tuple[int, int]]:
        """(line start, match start) of each hot probe's last match in data[start:stop], in order."""
        if stop <= start:
            return []
        found: set[tuple[int, int]] = set()
        for rx in self.latest.values():
            m = _last_match(rx, data, start, stop)
            if m is not None:
                found.add((data.rfind(b"\n", start, m) + 1 if m > start else start, m))
        if found:
            self.summarized += 1
        return sorted(found)


def _last_match(rx, data: bytes, start: int, stop: int) -> int | None:
    """Start of the last match of `rx` that begins in data[start:stop]: look back in growing steps."""
    back = TAIL
    while True:
        begin = max(start, stop - back)
        m = rx.search(data, begin, stop)
        if m is not None:
            last = m.start()
            while True:  # the look-back is small wherever matches are dense: step to the last one
                nxt_from = data.find(b"\n", last, stop)
                if nxt_from < 0:
                    return last
                m = rx.search(data, nxt_from + 1, stop)
                if m is None:
                    return last
                last = m.start()
        if begin == start:
            return None
        back *= 8


@dataclass
class _Counted:
    """How far a block's line breaks have been counted: `newlines` in data[:upto]."""

    newlines: int = 0
    upto: int = 0


SMALL_LINES = 256
FAST_AFTER = 4096  # lines checked on the small path before a process builds the big alternation


def _hits_in(data: bytes, base_line: int, table: ProbeTable, recurring: _Recurring, counted: _Counted) -> Iterator[LineHit]:
    if table._fast is None and table._windows < FAST_AFTER and data.count(b"\n", 0, 1 << 16) <= SMALL_LINES and len(data) <= 1 << 16:
        # a pasted error: checking each line's atoms beats building the big alternation's DFA, until
        # a long-lived process (the HTTP API) has checked enough lines for the build to pay off
        yield from _hits_small(data, base_line, table)
        return
    pos = 0
    line_no = base_line
    counted_to = 0
    end = len(data)
    while pos < end:
        searcher = recurring.cold if recurring.cold is not None else table.fast
        m = searcher.search(data, pos)
        s, e = m.span() if m is not None else (end, end)
        if recurring.latest:
            # the hot probes' latest lines in the stretch the search just skipped, in order
            for line_start, match_start in recurring.last_lines(data, pos, data.rfind(b"\n", pos, s) + 1 if s > pos else pos):
                if line_start < counted_to:
                    continue
                line_no += data.count(b"\n", counted_to, line_start)
                counted_to = counted.upto = line_start
                counted.newlines = line_no - base_line
                yield from _window_hits(data, line_start, match_start, match_start + 1, line_no, table)
        if m is None:
            break
        core_start = data.rfind(b"\n", 0, s) + 1
        if core_start < counted_to:  # only when a look-back line was also this line: already seen
            core_start = counted_to
        line_no += data.count(b"\n", counted_to, core_start)
        counted_to = counted.upto = core_start
        counted.newlines = line_no - base_line
        pos = yield from _window_hits(data, core_start, s, e, line_no, table)


def _window_hits(data: bytes, core_start: int, s: int, e: int, line_no: int, table: ProbeTable):
    """Hits of every probe on the line(s) holding data[s:e], plus one line of context for wrapped
    messages; returns where the next search starts."""
    end = len(data)
    core_end = data.find(b"\n", max(e - 1, s))
    core_end = end if core_end < 0 else core_end + 1
    if core_end - core_start > MAX_WINDOW:
        core_start = max(core_start, s - MAX_WINDOW // 2)
        core_end = min(core_end, core_start + MAX_WINDOW)
    win_end = data.find(b"\n", core_end)
    win_end = end if win_end < 0 else win_end + 1
    win_end = min(win_end, core_end + MAX_WINDOW // 4)
    window = decode(data[core_start:win_end])
    core_len = len(decode(data[core_start:core_end]))
    yield from _probe_window(window, core_len, line_no, table)
    return max(core_end, e if e > s else s + 1)


def _hits_small(data: bytes, base_line: int, table: ProbeTable) -> Iterator[LineHit]:
    """Each line is a window (with the next line, for wrapped messages), prefiltered by atoms."""
    lines = decode(data).split("\n")
    for i, line in enumerate(lines):
        if not line and i == len(lines) - 1:
            break
        window = line + "\n" + (lines[i + 1] if i + 1 < len(lines) else "")
        yield from _probe_window(window, len(line) + 1, base_line + i, table, atoms_only=True)


def _probe_window(window: str, core_len: int, first_line: int, table: ProbeTable, atoms_only: bool = False) -> Iterator[LineHit]:
    found: list[LineHit] = []
    line_starts: list[int] | None = None
    prefixes: _RankPrefixes | None = None
    for index in table.matching(window, atoms_only):
        probe = table.probes[index]
        for m in probe.regex.finditer(window):
            start = m.start()
            if start >= core_len:
                break
            if line_starts is None:
                line_starts = [0] + [i + 1 for i, ch in enumerate(window) if ch == "\n"]
            k = _line_index(line_starts, start)
            line_begin = line_starts[k]
            line_end = window.find("\n", max(m.end() - 1, start))
            text = window[line_begin : len(window) if line_end < 0 else line_end]
            if prefixes is None:
                prefixes = _RankPrefixes(window)
            found.append(LineHit(probe, m, first_line + k, text, prefixes.before(line_begin, start)))
    # benign lines first on each line, so the lines they explain are evidence for nothing else
    found.sort(key=lambda h: (h.line_no, h.probe.kind != "benign", h.match.start()))
    yield from found


def _line_index(starts: list[int], pos: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


def rank_prefix(text: str) -> int | None:
    """The rank of the first `[rankN]:` / `[defaultN]:` tag in `text` (a line's prefix)."""
    m = _RANK_PREFIX.search(text)
    return int(m.group(1)) if m else None


class _RankPrefixes:
    """The `[rankN]:` prefixes of a window, found once: a giant line can hold a hit every few dozen
    characters, and searching from the line's start for each of them was quadratic."""

    def __init__(self, window: str) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.ranks: list[int] = []
        for m in _RANK_PREFIX.finditer(window):
            self.starts.append(m.start())
            self.ends.append(m.end())
            self.ranks.append(int(m.group(1)))

    def before(self, line_begin: int, pos: int) -> int | None:
        """The rank of the last prefix on this line that ends by `pos` (+1: `[rank3]:` then the hit)."""
        i = bisect.bisect_right(self.ends, pos + 1) - 1
        return self.ranks[i] if i >= 0 and self.starts[i] >= line_begin else None
