"""Lenient version parsing and PEP 440 specifier checks for the versions users and logs report.

Users answer `2.4`, `v0.15.0`, `2.5.1+cu124`, `1.4.0.dev (master, June 2021)` or `main`; logs print
`2.21.5+cuda12.4`. We keep the leading release (and a dev/rc marker) and compare with `packaging`.
A version we cannot read is treated as unknown, never as a match.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # packaging is imported on first use: most diagnoses compare no version
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

_LEADING = re.compile(
    r"v?(\d+(?:\.\d+){0,3})((?:[.-]?(?:a|b|rc)\d*)?(?:[.-]?post\d*)?(?:[.-]?dev\d*)?)", re.IGNORECASE
)


@functools.lru_cache(maxsize=1024)
def parse_version(text: str | None) -> "Version | None":
    """The leading version in `text`, or None when there is none."""
    from packaging.version import InvalidVersion, Version

    if not text:
        return None
    match = _LEADING.search(str(text).strip())
    if not match:
        return None
    try:
        return Version(match.group(1) + match.group(2))
    except InvalidVersion:
        return Version(match.group(1))


@functools.lru_cache(maxsize=1024)
def parse_specifier(spec: str) -> "SpecifierSet":
    """A `packaging` SpecifierSet; raises ValueError naming the bad specifier."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(spec)
    except InvalidSpecifier as exc:
        raise ValueError(f"not a version specifier: {spec!r} ({exc})") from None


def version_matches(version: "str | list[str] | None", spec: str) -> bool | None:
    """True/False when the version is readable, None when it is unknown.

    PEP 440 ordering applies, pre-releases included: `1.4.0.dev0` is below `1.4.0` but `<1.4.0`
    excludes it, so a range meant to cover the development builds before a fix ends in `<=1.4.0.dev0`
    or names the release that shipped the fix with `<`.
    A list is the releases a traceback's frames fit (advisor.frames): True or False only when every
    one of them agrees, else unknown.
    """
    if isinstance(version, (list, tuple)):
        held = {version_matches(v, spec) for v in version}
        return held.pop() if len(held) == 1 else None
    parsed = parse_version(None if version is None else str(version))
    if parsed is None:
        return None
    clauses = _plain_clauses(spec)
    if clauses is not None and parsed.local is None:
        verdicts = [_plain_holds(parsed, op, bound) for op, bound in clauses]
        if False in verdicts:
            return False
        if None not in verdicts:
            return True
    return parse_specifier(spec).contains(parsed, prereleases=True)


# The KB's ranges are plain comparisons (`>=2.2,<2.6`). Answering those here, with the same rules
# `packaging` applies in its own fast path, spares the CLI importing `packaging.specifiers` (which
# pulls in `packaging.tags`, `logging` and `platform`): ~12 ms of a ~0.25 s run. Anything else
# (`~=`, `===`, wildcards, a pre- or post-release of the very bound of `<V` or `>V`) goes to
# `packaging`, so the answer is always packaging's.
# tests/test_versions.py checks the two agree on generated versions and ranges.
_PLAIN = re.compile(r"\s*(==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)\s*")


@functools.lru_cache(maxsize=1024)
def _plain_clauses(spec: str) -> "tuple[tuple[str, Version], ...] | None":
    from packaging.version import Version

    clauses = []
    for part in spec.split(","):
        match = _PLAIN.fullmatch(part)
        if match is None:
            return None
        clauses.append((match.group(1), Version(match.group(2))))
    return tuple(clauses) or None


def _plain_holds(version: "Version", op: str, bound: "Version") -> bool | None:
    """One comparison for a version without a local label; None where packaging must decide."""
    if op == ">=":
        return version >= bound
    if op == "<=":
        return version <= bound
    if op == "==":
        return version == bound
    if op == "!=":
        return version != bound
    if op == "<" and version >= bound or op == ">" and version <= bound:
        return False  # PEP 440's special cases only ever remove versions from `<V` and `>V`
    if _family(version) == _family(bound):
        return None  # 2.4rc1 against `<2.4`, 2.4.post1 against `>2.4`: packaging knows the rules
    return version < bound if op == "<" else version > bound


def _family(version: "Version") -> tuple[int, tuple[int, ...]]:
    release = version.release
    end = len(release)
    while end > 1 and release[end - 1] == 0:
        end -= 1
    return version.epoch, release[:end]


def major_minor(version: str | None) -> tuple[int, int] | None:
    parsed = parse_version(version)
    if parsed is None:
        return None
    release = parsed.release + (0,)
    return release[0], release[1]
