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


def wrap_tolerant(pattern: str) -> str:
    """Rewrite literal spaces outside character classes into `WRAP_SPACE`."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            # a ']' right after '[' or '[^' is a literal member, not the end of the class
            if pattern[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                out.append("]")
                i += 1
        elif ch == " ":
            while i + 1 < len(pattern) and pattern[i + 1] == " ":
                i += 1
            out.append(WRAP_SPACE)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def strip_named_groups(pattern: str) -> str:
    """Turn `(?P<name>...)` into `(?:...)` so many patterns can share one alternation."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
        elif pattern.startswith("(?P<", i):
            end = pattern.find(">", i)
            out.append("(?:")
            i = end + 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


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
