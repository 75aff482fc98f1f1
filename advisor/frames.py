"""Which releases of a package could have printed a traceback's frames.

A frame names a file, a line and a function. kb/frames/<package>.json (mined from every release's
wheel by tools/mine/frames.py) holds, per file and function, the lines it spans in each release;
the releases where every frame's line falls inside its function are the ones that printed the
traceback. `transformers/trainer.py, line 2555, in _save_checkpoint` fits 4.38.0-4.38.2 only: the
version a version-gated cause needs, read from a log that never printed a version.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from advisor.knowledge import builtin_kb_dir

# frames kept per package: a traceback's frames of one package are a handful; many more means
# several tracebacks (the same frames again) or a log of many runs
MAX_FRAMES = 64


@dataclass(frozen=True)
class Frame:
    package: str
    file: str  # the path inside the package's wheel: transformers/trainer.py
    line: int
    func: str


@functools.lru_cache(maxsize=None)
def _table(package: str) -> dict | None:
    path = builtin_kb_dir() / "frames" / f"{package}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=1)
def mined_files() -> dict[str, str]:
    """'/transformers/trainer.py' -> 'transformers' for every mined file (path suffixes to match)."""
    out: dict[str, str] = {}
    for path in sorted((builtin_kb_dir() / "frames").glob("*.json")):
        table = _table(path.stem)
        for name in (table or {}).get("files", {}):
            out["/" + name] = path.stem
    return out


@functools.lru_cache(maxsize=1)
def _package_dirs() -> tuple[str, ...]:
    return tuple(f"/{p.stem}/" for p in (builtin_kb_dir() / "frames").glob("*.json"))


def frame_of(path: str, line: int, func: str) -> Frame | None:
    """The mined file a frame's path ends in (site-packages, a venv, a container path), else None."""
    path = path.replace("\\", "/")
    if not any(d in path for d in _package_dirs()):  # most frames: no table is read
        return None
    for suffix, package in mined_files().items():
        if path.endswith(suffix):
            return Frame(package, suffix[1:], line, func)
    return None


def _indices(ranges: str) -> set[int]:
    out: set[int] = set()
    for part in ranges.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def _fits(table: dict, frame: Frame) -> set[int] | None:
    """Releases whose `frame.func` spans `frame.line`; None when the table cannot say (the function
    is not in the file in any release: a fork, a module-level frame)."""
    by_span = table["files"].get(frame.file, {}).get(frame.func)
    if not by_span:
        return None
    fit: set[int] = set()
    for span, ranges in by_span.items():
        start, _, end = span.partition("-")
        if int(start) <= frame.line <= int(end):
            fit |= _indices(ranges)
    return fit


@dataclass(frozen=True)
class VersionRange:
    package: str
    versions: tuple[str, ...]  # the releases that fit every frame, oldest first
    frames: tuple[Frame, ...]  # the frames that narrowed it
    newest_mined: str

    def describe(self) -> str:
        span = self.versions[0] if len(self.versions) == 1 else f"{self.versions[0]} .. {self.versions[-1]}"
        newer = " (or a release newer than the table)" if self.versions[-1] == self.newest_mined else ""
        if self.package == "nccl":
            where = "; ".join(f"{f.file}:{f.line}" + (" (error trail)" if f.func == "error trail" else "") for f in self.frames[:3])
            return f"the source lines NCCL's warnings and error trail were printed from ({where}) fit NCCL {span}{newer} only"
        where = "; ".join(f"{f.file.rsplit('/', 1)[-1]} line {f.line} in {f.func}" for f in self.frames[:3])
        return f"traceback frames ({where}) fit {self.package} {span}{newer} only"


def version_range(frames: list[Frame]) -> VersionRange | None:
    """The releases of one package that fit all its frames, or None when the frames say nothing
    (every release fits) or contradict each other (an edited install, two versions in one log)."""
    table = _table(frames[0].package) if frames else None
    if table is None:
        return None
    return _narrow(frames[0].package, table["versions"], [(f, _fits(table, f)) for f in frames])


def nccl_version_range(sites: list[tuple[str, int]], trail: list[tuple[str, int]] | None = None) -> VersionRange | None:
    """The NCCL releases whose sources have a WARN call at every printed `file.cc:line NCCL WARN`
    and a check at every `file.cc:line -> code` of an error trail (kb/frames/nccl.json). A file NCCL
    does not have (a network plugin's own) is skipped; a known file whose line holds no such call in
    any release (a patched or unmined build) dates nothing."""
    table = _table("nccl")
    if table is None or not (sites or trail):
        return None

    def fits(kind: str, path: str, line: int) -> set[int] | None:
        known = table.get(kind, {}).get(path)
        if known is None:
            return None  # not NCCL's file: no say
        ranges = known.get(str(line))
        return _indices(ranges) if ranges is not None else set()  # no such call there in any release

    evidence = [(Frame("nccl", p, n, "WARN"), fits("sites", p, n)) for p, n in sites]
    evidence += [(Frame("nccl", p, n, "error trail"), fits("trail_sites", p, n)) for p, n in trail or []]
    return _narrow("nccl", table["versions"], evidence)


def narrow(count: int, fits: list[tuple[Any, set[int] | None]]) -> tuple[list[int], list[Any]] | None:
    """Intersect the release indices (of `count` mined releases, oldest first) each piece of
    evidence allows (None: it has no say). The indices that fit all, with the evidence that narrowed
    them; None when the pieces contradict each other, say nothing (every release fits), or the oldest
    mined release still fits: older releases may fit too, and a too-old install would read as a
    newer one. Shared by traceback frames (here) and message wordings (advisor.dating)."""
    fit = set(range(count))
    used: list[Any] = []
    for evidence, this in fits:
        if this is None:
            continue
        if not this & fit:
            return None
        if this & fit != fit:
            used.append(evidence)
        fit &= this
    if len(fit) == count or not used or 0 in fit:
        return None
    return sorted(fit), used


def _narrow(package: str, versions: list[str], fits: list[tuple[Frame, set[int] | None]]) -> VersionRange | None:
    found = narrow(len(versions), fits)
    if found is None:
        return None
    fit, used = found
    return VersionRange(package, tuple(versions[i] for i in fit), tuple(used), versions[-1])
