"""Dating a release from the wording the log shows.

Every catalogued message records which releases of its software print it (`versions`) and how older
releases worded it (`wording`), as read from each release's artifact. A log that holds a message in
one of its wordings therefore shows which releases could have printed it; the releases that fit
every message the log holds are the version a user did not state. This replaces hand-written
per-message version probes: a new release mined into the catalogue dates itself.

The rule of advisor.frames applies: nothing is inferred when the oldest mined release still fits
(older, unmined releases may print the same text, and a too-old install must not read as a newer
one), when the messages contradict each other (two installs in one log), or when they say nothing.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from advisor import catalogue, schema
from advisor.regex import compile_pattern
from advisor.versions import parse_specifier, parse_version

VERSION_FACTS = {
    "torch": "torch_version", "nccl": "nccl_version", "transformers": "transformers_version",
    "trl": "trl_version", "accelerate": "accelerate_version", "deepspeed": "deepspeed_version",
}
"""software -> the fact its release is; other software has no version fact of its own."""

_RELEASE = re.compile(r"==(\d+(?:\.\d+){1,3})\b|\bv(\d+\.\d+\.\d+)-\d+\b")


def releases_of(artifacts: list[str]) -> list[str]:
    """The releases named in a catalogue file's `mined_from` artifacts (`torch==2.4.1 ...`,
    `NVIDIA/nccl v2.21.5-1 src/`), oldest first."""
    found = {m.group(1) or m.group(2) for a in artifacts for m in _RELEASE.finditer(a)}
    return sorted(found, key=parse_version)


@functools.lru_cache(maxsize=4096)
def _wording_regex(text: str):
    """A linear-time regex for the first line of a wording (placeholders match anything) and the
    length of its literal text, which ranks wordings that all match the same line."""
    first = text.split("\n", 1)[0]
    parts, literal, pos = [], 0, 0
    for m in catalogue.PLACEHOLDER.finditer(first):
        chunk = first[pos:m.start()] + ("%" if m.group(0) == "%%" else "")
        parts.append(re.escape(chunk))
        literal += len(chunk.strip())
        if m.group(0) != "%%":
            parts.append(".*?")
        pos = m.end()
    tail = first[pos:]
    parts.append(re.escape(tail))
    literal += len(tail.strip())
    return compile_pattern("".join(parts), True), literal


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def _partial(text: str, line: str) -> int:
    """How much of a wording's literal text a line shows that does not hold all of it: the longest
    run of its first words that matches (a line can be cut by a paste or a terminal)."""
    words = _first_line(text).split(" ")
    lo, hi = 0, len(words) - 1  # words[:lo] matches (trivially for 0); words[:hi + 1] does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _wording_regex(" ".join(words[:mid]))[0].search(line) is not None:
            lo = mid
        else:
            hi = mid - 1
    return _wording_regex(" ".join(words[:lo]))[1] if lo else 0


def printed_specs(message: schema.Message, line: str) -> tuple[str, ...] | None:
    """The version specifiers of the wordings of `message` that `line` can show, or None when the
    line dates nothing (no wording is limited to some releases, or one printed by all fits).

    The wording the line follows furthest is the one printed (an older wording can be the start of a
    newer one; a wording's tail can differ), a complete one before a cut one; where several follow it
    equally far (a line cut before they part), any of them could be. A wording is searched word by
    word only when it could follow the line further than a complete match does (first sightings of
    dated messages only, but a log can hold hundreds)."""
    options = [(message.text, message.versions), *((w.text, w.versions) for w in message.wording)]
    if not any(spec for _, spec in options):
        return None
    compiled = [(_wording_regex(_first_line(text)), text, spec) for text, spec in options]
    fits = [((literal, True), spec) for (regex, literal), _, spec in compiled if regex.search(line) is not None]
    floor = max((fit[0] for fit, _ in fits), default=0)
    fits += [((_partial(text, line), False), spec) for (regex, literal), text, spec in compiled
             if literal > floor and regex.search(line) is None]
    best = max(fit for fit, _ in fits)
    specs = {spec for fit, spec in fits if fit == best} if best[0] else {spec for _, spec in options}
    if "" in specs:
        return None
    return tuple(sorted(specs))


@dataclass(frozen=True)
class DatedRelease:
    """The releases of one software that print every dated message a log holds."""

    software: str
    versions: tuple[str, ...]  # oldest first
    messages: tuple[str, ...]  # the catalogue messages that narrowed it
    newest_mined: str

    def describe(self) -> str:
        span = self.versions[0] if len(self.versions) == 1 else f"{self.versions[0]} .. {self.versions[-1]}"
        newer = " (or a newer release)" if self.versions[-1] == self.newest_mined else ""
        return f"the wording of {', '.join(self.messages[:3])} is printed by {self.software} {span}{newer} only"


def date_release(software: str, releases: list[str], printed: list[tuple[str, tuple[str, ...]]]) -> DatedRelease | None:
    """The releases (of the mined `releases`) that fit every (message id, specifiers) the log
    showed; None when they say nothing, contradict each other, or the oldest mined one still fits."""
    if not releases:
        return None
    from advisor.frames import narrow

    found = narrow(len(releases), [(message_id, {i for i, r in enumerate(releases)
                                                 if any(parse_version(r) in parse_specifier(s) for s in specs)})
                                   for message_id, specs in printed])
    if found is None:
        return None
    fit, used = found
    return DatedRelease(software, tuple(releases[i] for i in fit), tuple(used), releases[-1])
