"""The message catalogue: every message the distributed-training stack prints, as data.

Causes are the layer above: a catalogued message points to the causes it is evidence for (with a
weight), or is `context` (it only carries facts and explains a line), or `benign`. The catalogue is
mined from the artifacts that print the messages (NCCL's library strings, libtorch, the Python
sources of torch.distributed and the frameworks; see tools/mine/), one file per component under
kb/messages/, each entry citing the source file and the versions whose artifacts hold its wording.

This module holds what is checked per message (its pattern against its own wording, its examples
and near misses) and the coverage report; the loader (advisor.knowledge) wires the messages into
the scanner.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from advisor import schema
from advisor.regex import PatternError, compile_pattern

# printf conversions (NCCL, libtorch's C code), fmt/c10::str `{}` fields and Python `{name}` /
# `%(name)s` fields: each becomes one sample value when a wording is rendered for testing.
PLACEHOLDER = re.compile(
    r"%%|%\([a-z_]+\)[sdrf]|%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L|PRI\w+)?[diouxXeEfgGcspn]"
    r"|\{[A-Za-z_][\w.\[\]'\"]*(?:![rsa])?(?::[^{}]*)?\}|\{(?::[^{}]*)?\}"
)
SAMPLE_VALUE = "7"
"""what every placeholder prints in a rendered wording: a number also reads as a name or a host."""


def render(text: str) -> str:
    """A printed instance of a format string, every placeholder replaced by `SAMPLE_VALUE`."""
    return PLACEHOLDER.sub(lambda m: "%" if m.group(0) == "%%" else SAMPLE_VALUE, text)


def instances(message: schema.Message) -> list[str]:
    """The texts a message's pattern must match: its sample (or rendered wording) and examples."""
    first = message.sample if message.sample is not None else render(message.text)
    return [first, *message.examples]


def check_message(message: schema.Message) -> list[tuple[str, str]]:
    """(field, problem) for each way a message disagrees with its own wording and examples."""
    try:
        regex = compile_pattern(message.pattern, not message.case_sensitive)
    except PatternError as exc:
        return [("pattern", f"RE2 cannot compile this pattern: {exc}")]
    problems: list[tuple[str, str]] = []
    missing = set(message.captures) - set(regex.groupindex)
    if missing:
        problems.append(("captures", f"the pattern has no named group(s) {sorted(missing)}"))
    for i, text in enumerate(instances(message)):
        if regex.search(text) is None:
            where = ("sample" if message.sample is not None else "text") if i == 0 else f"examples[{i - 1}]"
            problems.append((where, f"the pattern does not match {text[:160]!r}"))
    for i, text in enumerate(message.near_misses):
        if regex.search(text) is not None:
            problems.append((f"near_misses[{i}]", f"the pattern matches this near miss: {text[:160]!r}"))
    return problems


def collisions(messages: Iterable[schema.Message]) -> list[tuple[str, str]]:
    """(message id, problem) where a pattern also matches another message's wording: two entries
    that claim the same line make the evidence ambiguous. A shorter message contained in a longer
    one is allowed only when both point the same way (the longer is the same message, extended).
    One RE2 set pass per wording (not one search per pair): the catalogue holds over a thousand."""
    from advisor.regex import PatternSet

    items = []
    for m in messages:
        try:
            compile_pattern(m.pattern, not m.case_sensitive)
        except PatternError:
            continue  # reported by check_message
        items.append(m)
    sets = []
    for case_sensitive in (False, True):
        group = [m for m in items if m.case_sensitive == case_sensitive]
        if group:
            sets.append((PatternSet([m.pattern for m in group], ignore_case=not case_sensitive), group))
    problems = []
    for other in items:
        text = instances(other)[0]
        for pattern_set, group in sets:
            for index in pattern_set.matching(text):
                m = group[index]
                if m.id == other.id or _same_direction(m, other) or m.id in other.refines or other.id in m.refines:
                    continue  # the same message, the same verdict, or a general format and its instance
                problems.append((m.id, f"the pattern also matches {other.id}'s wording {text[:120]!r}; "
                                       "make it specific, or point both to the same causes"))
    return sorted(problems)


def _same_direction(a: schema.Message, b: schema.Message) -> bool:
    return a.role == b.role and {p.cause for p in a.points_to} == {p.cause for p in b.points_to}


def mapped(message: schema.Message, defaults: list | None = None) -> bool:
    """A message is mapped when it says what it points to (causes, or harmless noise), or is a
    warning or error of a component whose defaults point somewhere."""
    if message.role in ("cause", "benign"):
        return True
    return bool(defaults) and message.level != "info" and message.event != "cascade"


def coverage(files: dict[str, Any], messages: dict[str, schema.Message]) -> dict:
    """`advisor kb coverage`: per component, messages catalogued and mapped to a cause."""
    components: dict[str, dict[str, Any]] = {}
    for name, info in sorted(files.items()):
        own = [m for m in messages.values() if m.id.split(".", 1)[0] == name]
        levels: dict[str, int] = {}
        for m in own:
            levels[m.level] = levels.get(m.level, 0) + 1
        defaults = info.get("defaults")
        components[name] = {
            "software": info["software"],
            "title": info["title"],
            "messages": len(own),
            "mapped": sum(mapped(m, defaults) for m in own),
            "context": sum(not mapped(m, defaults) for m in own),
            "benign": sum(m.role == "benign" for m in own),
            "levels": dict(sorted(levels.items())),
            "mined_from": [a["artifact"] for a in info["mined_from"]],
        }
    total = len(messages)
    return {
        "messages": total,
        "mapped": sum(row["mapped"] for row in components.values()),
        "components": components,
    }
