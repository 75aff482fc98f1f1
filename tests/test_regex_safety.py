"""No log text can make a regex take more than linear time (issue 7: "text crafted to make a regex
backtrack forever").

* Every pattern the KB and the reader match with runs on RE2 (google-re2), which never backtracks:
  signatures, shared signatures, phase cues, framework detectors and versions, fact probes, the
  redaction patterns, the scanner's alternation and RE2 sets.
* Each of them is fed classic ReDoS shapes (runs of its own literals, of its required atoms,
  `a`x100k, blanks, `[rank0]:`x12k, nested brackets, digits and dots) under a hang guard.
* A team KB pattern RE2 cannot compile (backreference, look-around) is refused by `advisor kb check`
  with the file and field (one look-behind case is in tests/test_kb.py; here are the other forms).
* The few small stdlib-`re` patterns left in advisor/*.py are reviewed (a new one fails
  `test_stdlib_patterns_are_the_reviewed_ones`) and must do linear work on a giant line: the regex
  work on one 256 KiB line may not exceed a bounded multiple of the same text split into lines.

The time limits are hang guards, not speed requirements.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import pytest
import re2

import advisor
from advisor.diagnose import read_log
from advisor.knowledge import builtin_kb_dir, load_yaml
from advisor.redact import HOST_PATTERNS, SECRET_PATTERNS
from advisor.regex import PatternSet, compile_bytes_alternation, compile_pattern, required_atoms
from helpers import hang_guard as guard
from helpers import run_cli
from test_kb import GOOD_CAUSE, write_team_kb

RE2_TYPE = type(re2.compile("x"))
HANG_GUARD_S = 60
N = 100_000


def hang_guard(seconds: float = HANG_GUARD_S):
    return guard(seconds)


def all_patterns(kb) -> list[tuple[str, str, bool]]:
    """(where, pattern, ignore_case) for every pattern the advisor matches logs and output with."""
    out = [(p.id, p.pattern, p.ignore_case) for p in kb.probe_table.probes]
    for cause in kb.causes.values():
        out += [(f"{cause.id}:{sig.id}", sig.regex, not sig.case_sensitive) for sig in cause.signatures]
    shared = load_yaml(builtin_kb_dir() / "signatures.yaml")["signatures"]
    out += [(f"shared:{s['id']}", s["regex"], not s.get("case_sensitive", False)) for s in shared]
    out += [(f"redact:{name}", pattern, False) for name, pattern, _ in SECRET_PATTERNS + HOST_PATTERNS]
    return out


# --- (a) everything runs on RE2 -----------------------------------------------------------------


def test_every_kb_and_reader_pattern_is_compiled_by_re2(kb):
    patterns = all_patterns(kb)
    assert len(patterns) > 200
    kinds = {p.kind for p in kb.probe_table.probes}
    assert {"signature", "benign", "fact", "phase", "framework", "version"} <= kinds
    for where, pattern, ignore_case in patterns:
        compiled = compile_pattern(pattern, ignore_case)
        assert isinstance(compiled, RE2_TYPE) and not isinstance(compiled, re.Pattern), where
    for probe in kb.probe_table.probes:
        assert isinstance(probe.regex, RE2_TYPE), probe.id


def test_the_scanners_alternation_and_sets_are_re2(kb):
    table = kb.probe_table
    assert isinstance(table.fast, RE2_TYPE)
    assert isinstance(table.without(frozenset({0, 1})), RE2_TYPE)
    assert isinstance(compile_bytes_alternation([p.pattern for p in table.probes[:5]]), RE2_TYPE)
    pset = PatternSet([p.pattern for p in table.probes[:20]])
    assert isinstance(pset._set, re2.Set)


def test_redaction_uses_re2():
    from advisor import redact

    for name, _, _ in SECRET_PATTERNS + HOST_PATTERNS:
        assert isinstance(redact._compiled(name), RE2_TYPE), name


# --- (b) classic ReDoS inputs against every pattern ---------------------------------------------

GENERIC = {
    "a x100k": "a" * N, "a x100k + !": "a" * N + "!", "spaces": " " * N, "tabs": "\t" * N, "newlines": "\n" * N,
    "words": "a " * (N // 2), "rank prefixes": "[rank0]:" * (N // 8), "nested brackets": "[" * (N // 2) + "(" * (N // 2),
    "digits": "9" * N, "digits and dots": "1.2." * (N // 4), "(x+x+)+y": "(x+x+)+y" * (N // 8), "x then y": "x" * N + "y",
}


def own_shapes(pattern: str) -> dict[str, str]:
    """Runs of what the pattern itself looks for: its literal characters, and its required atoms."""
    literals = "".join(ch for ch in re.sub(r"\\[dDwWsSbB]|\\.|\{\d+(?:,\d*)?\}|\[\^?", "", pattern) if ch not in "()[]{}?*+|^$")
    shapes = {"own literals": (literals or "x") * (N // max(1, len(literals)) + 1)}
    atoms = required_atoms(pattern)
    if atoms:
        unit = " ".join(atoms) + " "
        shapes["own atoms"] = unit * (N // len(unit) + 1)
        shapes["own atoms, no blanks"] = unit.replace(" ", "") * (N // len(unit) + 1)
    return shapes


def test_redos_shapes_against_every_pattern(kb):
    searched = 0
    with hang_guard():
        for where, pattern, ignore_case in all_patterns(kb):
            compiled = compile_pattern(pattern, ignore_case)
            for shape, text in {**GENERIC, **own_shapes(pattern)}.items():
                compiled.search(text)
                searched += 1
    assert searched > 2000


def test_redos_shapes_against_the_scanners_alternation(kb):
    table = kb.probe_table
    with hang_guard():
        for text in GENERIC.values():
            data = text.encode()
            table.fast.search(data)
            list(table.fast.finditer(data[: N // 4]))
            table.matching(text[:N // 4])


# --- (c) `advisor kb check` refuses what RE2 cannot run ------------------------------------------
# A look-behind is tests/test_kb.py::test_broken_kb_file_is_reported_with_file_and_field["bad regex"].

UNSUPPORTED = {
    "backreference": r"(quota) exceeded \1",
    "named backreference": r"(?P<word>quota) (?P=word)",
    "lookahead": r"Disk(?= quota)",
    "negative lookahead": r"Disk(?! space) quota",
    "negative lookbehind": r"(?<!no )quota exceeded",
    "atomic group": r"(?>Disk) quota",
    "possessive quantifier": r"Disk quota++ exceeded",
}


@pytest.mark.parametrize("form", sorted(UNSUPPORTED))
def test_kb_check_refuses_a_team_signature_re2_cannot_compile(tmp_path, form):
    text = GOOD_CAUSE.replace("regex: 'Disk quota exceeded'", f"regex: '{UNSUPPORTED[form]}'")
    assert UNSUPPORTED[form] in text
    team = write_team_kb(tmp_path, text, "bad-regex.yaml")
    result = run_cli("kb", "check", "--kb", str(team))
    report = result.out + result.err
    assert result.code == 4, report
    assert "bad-regex.yaml" in report and "signatures[0].regex" in report and "RE2 cannot compile" in report, report
    assert "Traceback" not in report
    suggest = run_cli("suggest", "--error", "Disk quota exceeded", "--kb", str(team))
    assert suggest.code == 4 and "signatures[0].regex" in suggest.err and "Traceback" not in suggest.err


def test_kb_check_refuses_a_team_framework_detector_re2_cannot_compile(tmp_path):
    framework = (builtin_kb_dir() / "frameworks" / "pytorch.yaml").read_text(encoding="utf-8")
    framework = framework.replace("id: pytorch", "id: team-torch", 1).replace(
        r"regex: 'torch/distributed/run\.py|\btorchrun\b'", r"regex: '(?<=python -m )torchrun'")
    assert "(?<=" in framework
    (tmp_path / "frameworks").mkdir()
    (tmp_path / "frameworks" / "team-torch.yaml").write_text(framework, encoding="utf-8")
    result = run_cli("kb", "check", "--kb", str(tmp_path))
    report = result.out + result.err
    assert result.code == 4 and "team-torch.yaml" in report and "detect[0].regex" in report and "RE2 cannot compile" in report, report


def test_a_catastrophic_pattern_that_re2_accepts_stays_linear(tmp_path):
    """`(a+)+$` backtracks exponentially in Python's `re`; RE2 accepts it and stays linear, so a
    team KB may contain it and a hostile line cannot hang the advisor with it."""
    text = GOOD_CAUSE.replace("regex: 'Disk quota exceeded'", "regex: '(a+)+$|(x+x+)+y|(\\w+\\s?)*:$'")
    team = write_team_kb(tmp_path, text, "catastrophic.yaml")
    with hang_guard():
        result = run_cli("suggest", "--error", "a" * 100_000 + "!\n" + "x" * 50_000 + "\n" + "word " * 20_000 + "!",
                         "--kb", str(team), "--json")
    assert result.code in (0, 1), result.err


# --- the stdlib `re` patterns that remain -------------------------------------------------------

# Reviewed: each is applied to bounded text, or is linear (no nested quantifier over the same text).
REVIEWED_STDLIB = {
    "catalogue.PLACEHOLDER": "KB message wordings only (KB files are at most 1 MiB); alternation of bounded tokens",
    "dating._RELEASE": "the artifact descriptions of the KB's mined_from lists (KB data); digit runs split by literal dots",
    "similar._NOISE": "failure-looking lines of at most 300 characters (facts.hit_line); bounded alternatives",
    "similar._WORD": "the same lines, after _NOISE; a character class run",
    "facts._CASCADE_EXCEPTIONS": "an exception's type name, once per exception line; alternation of literals anchored at $",
    "facts._CASCADE_MESSAGE": "an exception message, at most 500 characters (the probe's `.{0,500}`)",
    "facts._OOM_MESSAGE": "an exception type and message, bounded as above",
    "facts._WRAPPER_MESSAGE": "match (anchored) on an exception message, bounded as above; literals and one \\w+ run",
    "facts._KV": "per WorkNCCL hit, on facts.near_hit(): the line, or 1 KiB around the hit on a giant line",
    "facts._GLOG_TS": "the first facts.TIMESTAMP_SCAN characters of a line, once per line",
    "facts._ISO_TS": "the first facts.TIMESTAMP_SCAN characters of a line, once per line",
    "facts._FH_FRAME_HEAD": "fullmatch on what precedes a faulthandler frame on its line; optional bounded prefix, no nesting",
    "facts._LIBRARY_PATH": "a traceback frame's path, at most 400 characters (the probe's `{1,400}`)",
    "matcher._CJK": "free text of at most 4000 characters (diagnose.PROSE_LIMIT); a character class",
    "matcher._LOG_SYNTAX": "free text of at most 4000 characters, anchored at the line start",
    "matcher._CODE_SYNTAX": "free text of at most 4000 characters; `\\b` keeps `\\w+\\(\\)` linear",
    "render._LOG_PREFIX": "the first 200 characters of an evidence line (render.evidence_lines), anchored; no nested quantifier",
    "reader._ANSI": "every 4 MiB block; each escape body is a character class run or at most 4096 characters",
    "regex._PROTECTED": "KB patterns only (KB files are at most 1 MiB)",
    "regex._NAMED_GROUP": "KB patterns only",
    "scan._RANK_PREFIX": "per hit, the line before the hit: see test_rank_prefix_lookup_is_linear_on_a_giant_line",
    "scan._RANK_PREFIX_BYTES": "every block once (findall); bounded repetition",
    "versions._LEADING": "a version string (from a log, at most 64 characters: facts._version)",
    "versions._PLAIN": "a KB version range",
}


def stdlib_patterns() -> dict[str, object]:
    found = {}
    for info in pkgutil.iter_modules(advisor.__path__):
        if info.ispkg or info.name in ("__main__", "api"):  # advisor.kb and advisor.tui in an installed wheel
            continue
        module = importlib.import_module(f"advisor.{info.name}")
        for name, value in vars(module).items():
            values = value.values() if isinstance(value, dict) else [value]
            if values and all(isinstance(v, re.Pattern) for v in values):
                found[f"{info.name}.{name}"] = value
    return found


def test_stdlib_patterns_are_the_reviewed_ones():
    """A new module-level stdlib pattern must be reviewed (bounded input, or linear) and listed."""
    assert set(stdlib_patterns()) == set(REVIEWED_STDLIB)


class Counting:
    """A stdlib pattern that counts the characters it is asked to search (its work, up to a constant
    factor, for these patterns: no nested quantifiers)."""

    def __init__(self, rx):
        self.rx, self.chars = rx, 0

    def _count(self, text, pos=0, endpos=sys.maxsize):
        self.chars += max(0, min(endpos, len(text)) - pos)

    def sub(self, repl, text, count=0):
        self._count(text)
        return self.rx.sub(repl, text, count)

    def __getattr__(self, name):
        method = getattr(self.rx, name)
        if name not in SCANNING_METHODS:
            return method

        def counted(text, pos=0, endpos=sys.maxsize):
            self._count(text, pos, endpos)
            return method(text, pos, endpos)

        return counted


SCANNING_METHODS = {"search", "match", "fullmatch", "finditer", "findall"}


def count_work(monkeypatch, names: list[str]) -> list[Counting]:
    counters = []
    for qualified in names:
        module_name, attr = qualified.split(".")
        module = importlib.import_module(f"advisor.{module_name}")
        value = getattr(module, attr)
        if isinstance(value, dict):
            for key, rx in value.items():
                counters.append(Counting(rx))
                monkeypatch.setitem(value, key, counters[-1])
        else:
            counters.append(Counting(value))
            monkeypatch.setattr(module, attr, counters[-1])
    return counters


# Repeated on one 256 KiB line, each unit gives the scanner a hit every few dozen characters.
GIANT_UNITS = {
    "watchdog fields": "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds ",
    "work progress": "[Rank 3] last enqueued NCCL work: 7, last completed NCCL work: 6 ",
    "glog timestamps": "[E217 14:55:02.441 ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout ",
    "iso timestamps": "2024-01-01 00:00:00 NCCL WARN Cuda failure 'unspecified launch failure' ",
    "xid events": "kernel: NVRM: Xid (PCI:0000:2b:00): 79, pid=3312, GPU has fallen off the bus. ",
    "exceptions": "RuntimeError: CUDA error: an illegal memory access was encountered ",
    "ansi": "\x1b[31mred\x1b[0m\x1b]0;title\x07 ",
}
GIANT = 256 << 10
OURS = [name for name in REVIEWED_STDLIB if not name.startswith("scan.")]


def work_per_char(kb, counters: list[Counting], text: str) -> float:
    for counter in counters:
        counter.chars = 0
    read_log(kb, text)
    return sum(c.chars for c in counters) / len(text)


@pytest.mark.parametrize("unit", sorted(GIANT_UNITS))
def test_fact_and_matcher_regex_work_is_linear_on_a_giant_line(kb, monkeypatch, unit):
    """One giant line costs at most a bounded multiple of the same text in ordinary lines: the
    per-hit regexes see a bounded neighbourhood of the hit, never the whole (64 KiB) window."""
    counters = count_work(monkeypatch, OURS)
    text = GIANT_UNITS[unit]
    repeat = GIANT // len(text)
    with hang_guard():
        in_lines = work_per_char(kb, counters, (text + "\n") * repeat)
        giant = work_per_char(kb, counters, text * repeat)
    assert in_lines > 0, "the counters saw no work: the patterns were not intercepted"
    assert giant <= 32 * in_lines + 64, f"{giant:.0f} characters searched per input character (in lines: {in_lines:.1f})"


def test_rank_prefix_lookup_is_linear_on_a_giant_line(kb, monkeypatch):
    """Each hit's `[rankN]:` prefix is looked up in a list built once per window (advisor.scan
    _RankPrefixes): searching from the line's start for every hit made a 1 MB line of
    `[rank0]: Traceback (most recent call last): ` take ~10 s."""
    counters = count_work(monkeypatch, ["scan._RANK_PREFIX"])
    unit = "[rank0]: Traceback (most recent call last): "
    repeat = (64 << 10) // len(unit)
    with hang_guard():
        in_lines = work_per_char(kb, counters, (unit + "\n") * repeat)
        giant = work_per_char(kb, counters, unit * repeat)
    assert in_lines > 0, "the counters saw no work: the patterns were not intercepted"
    assert giant <= 32 * in_lines + 64, f"{giant:.0f} characters searched per input character (in lines: {in_lines:.1f})"


FIVE_MB = 5 << 20
SINGLE_LINES = {
    "SeqNum digits": "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" + "7" * FIVE_MB + ")",
    "Timeout(ms) digits": "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=" + "1" * FIVE_MB,
    "ran for digits": "WorkNCCL(SeqNum=1) ran for " + "2" * FIVE_MB + " milliseconds",
    "[PG x5MB": "WorkNCCL(SeqNum=1) [PG " + "x" * FIVE_MB + " Rank 3]",
    "[PG [PG [PG": "WorkNCCL(SeqNum=1) " + "[PG " * (FIVE_MB // 4) + "Rank 3]",
    "timestamp-like junk": "Watchdog caught collective operation timeout " + "E0101 00:00:00.0 2024-01-01 00:00 " * (FIVE_MB // 34),
    "OpType word": "WorkNCCL(SeqNum=1, OpType=" + "A" * FIVE_MB,
    "exception type": "RuntimeError" + "Error" * (FIVE_MB // 5) + ": boom",
    "frame path": 'File "' + "/a" * (FIVE_MB // 2) + '", line 1, in f',
    "ansi csi": "\x1b[" + "0;" * (FIVE_MB // 2) + "m",
    "ansi osc": "\x1b]0;" + "t" * FIVE_MB,
    "words for prose": "aa bb cc " + "d" * FIVE_MB,
}


@pytest.mark.parametrize("shape", sorted(SINGLE_LINES))
def test_fact_extraction_on_a_5mb_single_line(kb, shape):
    with hang_guard():
        reading = read_log(kb, SINGLE_LINES[shape])
    assert reading.stats.bytes > 0
    for name, fact in reading.facts.values.items():  # a number too long to be real is not a fact
        assert not (isinstance(fact.value, int) and not isinstance(fact.value, bool) and fact.value >= 10**18), name


def test_free_text_heuristics_are_linear():
    """matcher.prose() on a line far longer than it is ever given (PROSE_LIMIT is 4000)."""
    from advisor.matcher import prose

    line = "aa bb cc " + "d" * 200_000
    with hang_guard(30):
        prose(line, limit=len(line))
