"""Linear-time regular expressions for everything the KB and the log reader match.

Every pattern runs on RE2 (google-re2), which has no backtracking, so no log text can make a
signature take more than linear time (no ReDoS). RE2 rejects backreferences and look-arounds;
`compile_pattern` turns that rejection into a `PatternError` the KB loader can attribute to a file
and field.

One convention makes signatures robust to wrapped lines: a literal space in a pattern matches any
run of blanks, or one line break (optionally followed by a torchrun `[rankN]:` prefix), so
`watchdog got stuck for` still matches when a terminal or a pasted issue broke the line there.
"""

from __future__ import annotations

import functools
import re

import re2

# One or more blanks, or a single line break with optional blanks and an optional rank prefix.
WRAP_SPACE = r"(?:[ \t]+|[ \t]*\n(?:\[rank\d+\]:)?[ \t]*)"

# RE2 needs more DFA memory than its 8 MiB default for the big alternation the scanner builds.
_MAX_MEM = 256 << 20


class PatternError(ValueError):
    """A pattern RE2 cannot compile (syntax error, backreference, look-around)."""


def _options(case_sensitive: bool = True) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would otherwise print to stderr; we report errors ourselves
    options.max_mem = _MAX_MEM
    options.case_sensitive = case_sensitive
    return options


# tokens of a pattern that spaces must not be rewritten inside: escapes and character classes
_PROTECTED = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\]\\])*\]| +")


@functools.lru_cache(maxsize=4096)
def wrap_tolerant(pattern: str) -> str:
    """Rewrite runs of literal spaces outside character classes into `WRAP_SPACE`."""
    if " " not in pattern:
        return pattern
    return _PROTECTED.sub(lambda m: WRAP_SPACE if m.group(0)[0] == " " else m.group(0), pattern)


_NAMED_GROUP = re.compile(r"\\.|\(\?P<\w+>")


@functools.lru_cache(maxsize=4096)
def strip_named_groups(pattern: str) -> str:
    """Turn `(?P<name>...)` into `(?:...)` so many patterns can share one alternation."""
    return _NAMED_GROUP.sub(lambda m: "(?:" if m.group(0)[0] == "(" else m.group(0), pattern)


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str, ignore_case: bool = True, wrap: bool = True):
    """Compile a KB or reader pattern on RE2; raise `PatternError` with RE2's reason."""
    source = wrap_tolerant(pattern) if wrap else pattern
    try:
        return re2.compile(source, options=_options(case_sensitive=not ignore_case))
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(reason) from None


def compile_bytes_alternation(patterns: list[str], ignore_case: bool = True):
    """One RE2 program matching any of `patterns` on raw bytes: the scanner's fast path."""
    parts = [f"(?:{strip_named_groups(wrap_tolerant(p))})" for p in patterns]
    source = "|".join(parts) if parts else r"[^\s\S]"
    try:
        return re2.compile(source.encode(), options=_options(case_sensitive=not ignore_case))
    except re2.error as exc:  # pragma: no cover - each part was already compiled on its own
        raise PatternError(str(exc)) from None


MIN_ATOM = 3


def required_atoms(pattern: str) -> tuple[str, ...] | None:
    """Lower-cased literals such that every match of `pattern` contains at least one of them.

    Derived from the pattern's parse tree: a literal run in a concatenation is required, an
    alternation requires one of its branches' atoms, an optional part requires nothing. Spaces
    break runs (a space in a KB pattern also matches a line break). None when no atom of at
    least MIN_ATOM characters is provably required: such a probe is always run.
    """
    try:
        import re._parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse  # type: ignore[no-redef]
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # RE2-only syntax Python cannot parse: no prefilter, always run
        return None
    atoms = _seq_atoms(list(parsed))
    if not atoms or min(len(a) for a in atoms) < MIN_ATOM:
        return None
    return tuple(sorted(atoms))


def _seq_atoms(items) -> set[str] | None:
    import re._constants as c

    best: set[str] | None = None
    run = ""

    def consider(candidate: set[str] | None) -> None:
        nonlocal best
        if candidate and (best is None or _atom_score(candidate) > _atom_score(best)):
            best = candidate

    for op, arg in items:
        if op is c.LITERAL and chr(arg) != " ":
            run += chr(arg).lower()
            continue
        consider({run} if run else None)
        run = ""
        if op is c.SUBPATTERN:
            consider(_seq_atoms(list(arg[-1])))
        elif op is c.BRANCH:
            branches = [_seq_atoms(list(b)) for b in arg[1]]
            if all(branches):
                consider(set().union(*branches))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)) and arg[0] >= 1:
            consider(_seq_atoms(list(arg[2])))
        elif op is getattr(c, "ATOMIC_GROUP", None):
            consider(_seq_atoms(list(arg)))
    consider({run} if run else None)
    return best


def _atom_score(atoms: set[str]) -> tuple[int, int]:
    return (min(len(a) for a in atoms), -len(atoms))


class PatternSet:
    """Which of many patterns match a piece of text, in one RE2 pass (RE2::Set)."""

    def __init__(self, patterns: list[str], ignore_case: bool = True):
        self._set = re2.Set.SearchSet(_options(case_sensitive=not ignore_case))
        for pattern in patterns:
            if self._set.Add(strip_named_groups(wrap_tolerant(pattern))) < 0:
                raise PatternError(f"RE2 set rejected {pattern!r}")
        self._set.Compile()
        self._empty = not patterns

    def matching(self, text: str) -> list[int]:
        if self._empty:
            return []
        return sorted(self._set.Match(text) or ())
