"""Reading and writing kb/messages/<component>.yaml for the miners.

A miner owns the fields it reads from the artifacts (`text`, `versions`, `wording`, `source`, `level`)
and the file's `mined_from`; every other field of an existing entry (pattern, meaning, role,
points_to, captures, event, sample, examples, near_misses) is hand-written and kept as it is. Entries
another miner owns are left untouched.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, Iterable

import yaml

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = ROOT / "advisor" / "kb" / "messages" if (ROOT / "advisor" / "kb").is_dir() else ROOT / "kb" / "messages"

FIELD_ORDER = (
    "id", "level", "text", "source", "versions", "wording", "pattern", "case_sensitive", "meaning", "role",
    "points_to", "captures", "sets", "event", "refines", "sample", "examples", "near_misses",
)
MINED_FIELDS = ("text", "versions", "wording", "source", "level")


def load(component: str) -> dict[str, Any] | None:
    path = MESSAGES / f"{component}.yaml"
    if not path.is_file():
        return None
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def ordered(entry: dict[str, Any]) -> dict[str, Any]:
    out = {k: entry[k] for k in FIELD_ORDER if k in entry and entry[k] not in (None, [], {}, "") or k in ("versions",) and k in entry}
    for k, v in entry.items():
        if k not in out and v not in (None, [], {}):
            out[k] = v
    if out.get("case_sensitive") is False:
        out.pop("case_sensitive")
    return out


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):  # KB files may not use anchors
        return True


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value and not value.startswith((" ", "\t")) and not value.endswith(" ") and "\t" not in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _flow_points(dumper: yaml.SafeDumper, value: dict):
    return dumper.represent_mapping("tag:yaml.org,2002:map", value.items())


def dump(doc: dict[str, Any]) -> str:
    header = (
        "# Mined by tools/mine (see tools/mine/README.md): text, versions, wording, source, level and\n"
        "# mined_from are rewritten by the miner; every other field is hand-written and kept.\n"
    )
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False)
    return header + body


def save(component: str, software: str, title: str, mined_from: list[dict[str, str]], entries: Iterable[dict[str, Any]]) -> Path:
    doc = {
        "component": component,
        "software": software,
        "title": title,
        "mined_from": mined_from,
    }
    defaults = (load(component) or {}).get("defaults")
    if defaults:  # hand-written: what the component's warnings hint at
        doc["defaults"] = defaults
    doc["messages"] = [ordered(e) for e in entries]
    path = MESSAGES / f"{component}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(doc), encoding="utf-8")
    return path


def specifier(present: list[str], mined: list[str]) -> str:
    """The PEP 440 range over minor releases for the mined versions in `present`.

    `mined` is every version read, oldest first. '' when the wording is in every mined version; a
    lower bound only when it is absent from older ones, an upper bound only when absent from newer
    ones; a gap in the middle becomes `!=X.Y.*` clauses.
    """
    have = [v in present for v in mined]
    if all(have):
        return ""
    if not any(have):
        raise ValueError("no mined version holds this wording")
    first = have.index(True)
    last = len(have) - 1 - have[::-1].index(True)
    clauses = []
    if first > 0:
        clauses.append(f">={_minor(mined[first])}")
    if last < len(mined) - 1:
        clauses.append(f"<{_minor(mined[last + 1])}")
    for i in range(first, last + 1):
        if not have[i]:
            clauses.append(f"!={_minor(mined[i])}.*")
    return ",".join(clauses)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("+")[0].split(".") if p.isdigit())


def release_tags(repo: Path, first: str = "0") -> list[str]:
    """The final release tags (vX.Y.Z) of a git repository, as versions from `first` on, oldest first."""
    out = subprocess.run(["git", "-C", str(repo), "tag"], capture_output=True, text=True, check=True).stdout
    tags = [t[1:] for t in out.split() if re.fullmatch(r"v\d+\.\d+\.\d+", t)]
    return sorted((t for t in tags if version_key(t) >= version_key(first)), key=version_key)


def show(repo: Path, tag: str, path: str) -> str | None:
    """A file of a release tag (vX.Y.Z), or None where that release has no such file."""
    done = subprocess.run(["git", "-C", str(repo), "show", f"v{tag}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None
