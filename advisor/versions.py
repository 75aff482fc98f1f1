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

_LEADING = re.compile(r"v?(\d+(?:\.\d+){0,3})((?:\.?(?:dev|rc|a|b|post)\d*)?)", re.IGNORECASE)


@functools.lru_cache(maxsize=1024)
def parse_version(text: str | None) -> "Version | None":
    """The leading version in `text`, or None when there is none."""
    from packaging.version import InvalidVersion, Version

    if not text:
        return None
    match = _LEADING.search(str(text).strip())
    if not match:
        return None
    release, marker = match.group(1), match.group(2)
    if marker and marker.lower().lstrip(".") in {"dev", "rc", "a", "b", "post"}:
        marker += "0"
    try:
        return Version(release + marker)
    except InvalidVersion:
        return Version(release)


@functools.lru_cache(maxsize=1024)
def parse_specifier(spec: str) -> "SpecifierSet":
    """A `packaging` SpecifierSet; raises ValueError naming the bad specifier."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(spec)
    except InvalidSpecifier as exc:
        raise ValueError(f"not a version specifier: {spec!r} ({exc})") from None


def version_matches(version: str | None, spec: str) -> bool | None:
    """True/False when the version is readable, None when it is unknown.

    PEP 440 ordering applies, pre-releases included: `1.4.0.dev0` is below `1.4.0` but `<1.4.0`
    excludes it, so a range meant to cover the development builds before a fix ends in `<=1.4.0.dev0`
    or names the release that shipped the fix with `<`.
    """
    parsed = parse_version(version)
    if parsed is None:
        return None
    return parse_specifier(spec).contains(parsed, prereleases=True)


def major_minor(version: str | None) -> tuple[int, int] | None:
    parsed = parse_version(version)
    if parsed is None:
        return None
    release = parsed.release + (0,)
    return release[0], release[1]
