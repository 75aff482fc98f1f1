"""Mine the source lines of NCCL's WARN calls, per release: kb/frames/nccl.json.

NCCL prints the file and line of every warning (`bootstrap.cc:77 NCCL WARN Message truncated ...`).
A WARN call sits at that line only in some releases, so the sites a log prints narrow the NCCL
version when the log never printed NCCL's version banner (advisor/frames.py reads the table; the
version-gated causes and NCCL's defaults need the fact).

Reads the same per-tag extract as nccl.py (`mine_tag`: every WARN/INFO call of `src/**` at a
release tag, cached), keeps the direct WARN calls (a WARN inside a helper macro prints the macro's
call site, which the extract does not place), and stores each (file, line) once with the range of
release indices that have a WARN there.

    .venv/bin/python tools/mine/nccl_sites.py --repo ~/src/nccl.git --cache ~/.cache/nccl-mine
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nccl  # noqa: E402  (tools/mine/nccl.py)
from frames import OUT, ROOT, _ranges  # noqa: E402  (tools/mine/frames.py)

OLDEST, NEWEST = "2.4.2", "2.29.7"


def sites_of(extract: dict) -> set[tuple[str, int]]:
    """(path as NCCL prints it, line) of every direct WARN call in one release's extract."""
    out = set()
    for found in extract["found"]:
        if found["level"] == "warn" and not found.get("via") and found["path"].startswith("src/"):
            out.add((found["path"][len("src/"):], int(found["line"])))
    return out


def build(repo: Path, cache: Path, lo: str = OLDEST, hi: str = NEWEST) -> dict:
    tags = nccl.release_tags(repo, lo, hi)
    versions = [nccl.tag_version(t) for t in tags]
    table: dict[str, dict[int, list[int]]] = {}
    for index, tag in enumerate(tags):
        for path, line in sites_of(nccl.mine_tag(repo, tag, cache)):
            table.setdefault(path, {}).setdefault(line, []).append(index)
    return {
        "package": "nccl",
        "source": f"NCCL's sources at every release tag {versions[0]} .. {versions[-1]} (github.com/NVIDIA/nccl), "
                  "the line of each direct WARN call",
        "mined_with": "tools/mine/nccl_sites.py",
        "versions": versions,
        "sites": {path: {str(line): _ranges(idx) for line, idx in sorted(lines.items())} for path, lines in sorted(table.items())},
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
          f"{sum(len(v) for v in table['sites'].values())} WARN sites, {path.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
