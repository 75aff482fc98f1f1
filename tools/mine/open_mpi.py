"""Check kb/messages/open-mpi.yaml against Open MPI's source, release by release, and write `versions`.

The component holds what Open MPI itself prints when a process it launched dies: the signal handler
every Open MPI process installs (opal/util/stacktrace.c, show_stackframe: `[host:pid] *** Process
received signal ***`, `Signal: <name> (<n>)`, ...) and mpirun's summary help texts
(orte/tools/orterun/help-orterun.txt, the mpirun of Open MPI 2-4; Open MPI 5's mpirun is PRRTE's
prterun, whose help files live in another repository and are not read here).

Every field except `versions` and `mined_from` is hand-written. For each final release tag this reads
the two files and looks for each entry's text: a stacktrace entry's text, less the `[%s:%05d] `
HOSTFORMAT prefix, must be a string literal of stacktrace.c; a help entry's text must be in
help-orterun.txt with its lines joined. A text no mined release holds fails the run (exit 1).

Usage:  .venv/bin/python tools/mine/open_mpi.py --repo ~/src/ompi.git [--from 2.0.0] [--dry-run]
        (the repo: `git clone --bare https://github.com/open-mpi/ompi`)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalogue_io import load, release_tags, save, show, specifier  # noqa: E402

COMPONENT = "open-mpi"
HOSTFORMAT = "[%s:%05d] "
FILES = {"stacktrace": "opal/util/stacktrace.c", "orterun": "orte/tools/orterun/help-orterun.txt"}


def c_literals(source: str) -> str:
    """Every string literal of a C file, each on its own line (adjacent literals stay apart: the
    texts checked here are each one literal after the HOSTFORMAT macro)."""
    return "\n".join(m.group(1).replace("\\n", "") for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', source))


def joined(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def holds(entry: dict, kind: str, texts: dict[str, str]) -> bool:
    body = texts.get(kind)
    if body is None:
        return False
    if kind == "stacktrace":
        wanted = entry["text"].removeprefix(HOSTFORMAT)
        return wanted in body.splitlines()
    return joined(entry["text"]) in body


def kind_of(entry: dict) -> str:
    return "stacktrace" if entry["source"].startswith(FILES["stacktrace"]) else "orterun"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="a clone (bare is fine) of github.com/open-mpi/ompi")
    ap.add_argument("--from", dest="first", default="2.0.0", help="the oldest release to read (default 2.0.0)")
    ap.add_argument("--dry-run", action="store_true", help="report, write nothing")
    args = ap.parse_args(argv)
    doc = load(COMPONENT)
    if doc is None:
        print(f"open_mpi: kb/messages/{COMPONENT}.yaml is missing", file=sys.stderr)
        return 1
    tags = release_tags(args.repo, args.first)
    present: dict[str, dict[str, list[str]]] = {"stacktrace": {}, "orterun": {}}
    for tag in tags:
        texts = {}
        c_file = show(args.repo, tag, FILES["stacktrace"])
        if c_file is not None:
            texts["stacktrace"] = c_literals(c_file)
        help_file = show(args.repo, tag, FILES["orterun"])
        if help_file is not None:
            texts["orterun"] = joined(help_file)
        for entry in doc["messages"]:
            kind = kind_of(entry)
            if kind in texts:
                present[kind].setdefault(tag, [])
                if holds(entry, kind, texts):
                    present[kind][tag].append(entry["id"])
    failed = False
    for entry in doc["messages"]:
        kind = kind_of(entry)
        mined = list(present[kind])
        have = [t for t in mined if entry["id"] in present[kind][t]]
        if not have:
            print(f"open_mpi: {entry['id']}: no release holds {entry['text']!r}", file=sys.stderr)
            failed = True
            continue
        entry["versions"] = specifier(have, tags)
        print(f"{entry['id']:40} {len(have)}/{len(tags)} releases  versions={entry['versions']!r}")
    if failed:
        return 1
    # one artifact per release read, as the other miners write them (advisor.dating reads `==X`)
    mined_from = []
    for tag in tags:
        files = [FILES[k] for k in FILES if tag in present[k]]
        mined_from.append({"artifact": f"open-mpi/ompi=={tag} (tag v{tag}) {', '.join(files)}",
                           "url": f"https://github.com/open-mpi/ompi/tree/v{tag}"})
    if not args.dry_run:
        path = save(COMPONENT, doc["software"], doc["title"], mined_from, doc["messages"])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
