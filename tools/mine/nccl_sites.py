"""Mine the source lines of NCCL's WARN calls and error-trail checks, per release: kb/frames/nccl.json.

NCCL prints the file and line of every warning (`bootstrap.cc:77 NCCL WARN Message truncated ...`),
and, as an error travels up the stack, the file and line of every check it passes
(`NCCL INFO bootstrap.cc:701 -> 6`: NCCLCHECK and the macros built on it, src/include/checks.h).
A WARN call or a check sits at that line only in some releases, so the sites a log prints narrow the
NCCL version when the log never printed NCCL's version banner (advisor/frames.py reads the table;
the version-gated causes and NCCL's defaults need the fact).

Reads the same per-tag extract as nccl.py (`mine_tag`: every WARN/INFO call of `src/**` at a
release tag, cached), keeps the direct WARN calls (a WARN inside a helper macro prints the macro's
call site, which the extract does not place), and stores each (file, line) once with the range of
release indices that have a WARN there (`sites`). The trail (`trail_sites`) is read from the sources
themselves: the macros whose body logs `"%s:%d -> %d"` with __LINE__ (and the macros built on them)
print the line where they are invoked, as do the direct INFO calls of that format.

    .venv/bin/python tools/mine/nccl_sites.py --repo ~/src/nccl.git --cache ~/.cache/nccl-mine
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nccl  # noqa: E402  (tools/mine/nccl.py)
import nccl_source  # noqa: E402  (tools/mine/nccl_source.py)
from frames import OUT, ROOT, _ranges  # noqa: E402  (tools/mine/frames.py)

OLDEST, NEWEST = "2.4.2", "2.29.7"


def sites_of(extract: dict) -> set[tuple[str, int]]:
    """(path as NCCL prints it, line) of every direct WARN call in one release's extract."""
    out = set()
    for found in extract["found"]:
        if found["level"] == "warn" and not found.get("via") and found["path"].startswith("src/"):
            out.add((found["path"][len("src/"):], int(found["line"])))
    return out


TRAIL_FORMAT = "%s:%d -> %d"


def trail_sites_of(files: dict[str, str], extract: dict) -> set[tuple[str, int]]:
    """(path as NCCL prints it, line) of every place that prints an error-trail line in one release:
    invocations of the check macros (a macro whose body logs TRAIL_FORMAT, or invokes such a macro:
    __LINE__ is the invocation's) and direct INFO calls of that format."""
    read = {path: nccl_source.read_file(path, src) for path, src in files.items()}
    macros = [m for _, defined in read.values() for m in defined]
    trail = {m.name for m in macros if any(t.kind == "str" and TRAIL_FORMAT in t.val for t in m.body)}
    grew = True
    while grew:  # macros built on a trail macro print the trail at their own invocation
        more = {m.name for m in macros if m.name not in trail and any(t.kind == "id" and t.val in trail for t in m.body)}
        trail |= more
        grew = bool(more)
    out = set()
    for path, (toks, _) in read.items():
        if path.startswith("src/"):
            out.update((path[len("src/"):], line) for _, line, _ in nccl_source._calls(toks, trail))
    for found in extract["found"]:
        if found["level"] == "info" and not found.get("via") and found["text"].startswith(TRAIL_FORMAT) and found["path"].startswith("src/"):
            out.add((found["path"][len("src/"):], int(found["line"])))
    return out


def _compact(table: dict[str, dict[int, list[int]]]) -> dict[str, dict[str, str]]:
    return {path: {str(line): _ranges(idx) for line, idx in sorted(lines.items())} for path, lines in sorted(table.items())}


def build(repo: Path, cache: Path, lo: str = OLDEST, hi: str = NEWEST) -> dict:
    tags = nccl.release_tags(repo, lo, hi)
    versions = [nccl.tag_version(t) for t in tags]
    table: dict[str, dict[int, list[int]]] = {}
    trail: dict[str, dict[int, list[int]]] = {}
    for index, tag in enumerate(tags):
        extract = nccl.mine_tag(repo, tag, cache)
        for path, line in sites_of(extract):
            table.setdefault(path, {}).setdefault(line, []).append(index)
        for path, line in trail_sites_of(nccl_source.tag_files(repo, tag), extract):
            trail.setdefault(path, {}).setdefault(line, []).append(index)
    return {
        "package": "nccl",
        "source": f"NCCL's sources at every release tag {versions[0]} .. {versions[-1]} (github.com/NVIDIA/nccl), "
                  "the line of each direct WARN call (sites) and of each check that prints an error-trail line "
                  "'file:line -> code' (trail_sites)",
        "mined_with": "tools/mine/nccl_sites.py",
        "versions": versions,
        "sites": _compact(table),
        "trail_sites": _compact(trail),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="a clone of NVIDIA/nccl with its release tags")
    parser.add_argument("--cache", type=Path, default=nccl.DEFAULT_CACHE)
    parser.add_argument("--to", default=NEWEST)
    args = parser.parse_args(argv)
    table = build(args.repo, args.cache, OLDEST, args.to)
    path = OUT / "nccl.json"
    path.write_text(json.dumps(table, separators=(",", ":")) + "\n")
    print(f"{path.relative_to(ROOT)}: {len(table['versions'])} releases, "
          f"{sum(len(v) for v in table['sites'].values())} WARN sites, "
          f"{sum(len(v) for v in table['trail_sites'].values())} trail sites, {path.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
