"""Check kb/messages/nccl-tests.yaml against nccl-tests' source, release by release, and write `versions`.

The component holds what NVIDIA's nccl-tests binaries print when a check fails: the CUDACHECK,
NCCLCHECK and TESTCHECK macros of src/common.h, and the results summary ("# Out of bounds values",
"rank=N #wrong=N") of src/common.cu (src/util.cu from 2.17). Every field except `versions`,
`wording` versions and `mined_from` is hand-written. For each release tag this collects the string
literals of those files (adjacent literals joined, as the compiler does) and looks for each entry's
text and each of its wordings; the summary line counts in its later form too, where the label is an
argument of "# %-20s : %d %s" (printed the same, since the label is 20 characters long). A text no
release holds fails the run (exit 1).

Usage:  .venv/bin/python tools/mine/nccl_tests.py --repo ~/src/nccl-tests.git [--dry-run]
        (the repo: `git clone --bare https://github.com/NVIDIA/nccl-tests`)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalogue_io import load, release_tags, save, show, specifier  # noqa: E402

COMPONENT = "nccl-tests"
FILES = ("src/common.h", "src/common.cu", "src/util.cu")
# a text printed through a generic format with its label as an argument: (format, label)
LABELLED = {"# Out of bounds values : %d %s": ("# %-20s : %d %s", "Out of bounds values")}


_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_BETWEEN = re.compile(r'(?:\s|\\\n)*')


def c_strings(source: str) -> set[str]:
    """Every string literal of a C file, adjacent literals joined (a format split over macro lines),
    escapes for newline dropped."""
    out: set[str] = set()
    pos, current, end = 0, None, -1
    for m in _LITERAL.finditer(source):
        if current is not None and _BETWEEN.fullmatch(source[end:m.start()]):
            current += m.group(1)
        else:
            if current is not None:
                out.add(current)
            current = m.group(1)
        end = m.end()
    if current is not None:
        out.add(current)
    return {s.replace("\\n", "").replace("\\'", "'") for s in out}


def holds(text: str, strings: set[str]) -> bool:
    if text in strings:
        return True
    form = LABELLED.get(text)
    return form is not None and form[0] in strings and form[1] in strings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="a clone (bare is fine) of github.com/NVIDIA/nccl-tests")
    ap.add_argument("--dry-run", action="store_true", help="report, write nothing")
    args = ap.parse_args(argv)
    doc = load(COMPONENT)
    if doc is None:
        print(f"nccl_tests: kb/messages/{COMPONENT}.yaml is missing", file=sys.stderr)
        return 1
    tags = release_tags(args.repo)
    strings_at: dict[str, set[str]] = {}
    files_at: dict[str, list[str]] = {}
    for tag in tags:
        strings: set[str] = set()
        for path in FILES:
            body = show(args.repo, tag, path)
            if body is not None:
                strings |= c_strings(body)
                files_at.setdefault(tag, []).append(path)
        strings_at[tag] = strings
    failed = False
    for entry in doc["messages"]:
        for variant in [entry] + list(entry.get("wording") or []):
            have = [t for t in tags if holds(variant["text"], strings_at[t])]
            if not have:
                print(f"nccl_tests: {entry['id']}: no release holds {variant['text']!r}", file=sys.stderr)
                failed = True
                continue
            variant["versions"] = specifier(have, tags)
            print(f"{entry['id']:36} {len(have):2}/{len(tags)} releases  {variant['text']!r}: versions={variant['versions']!r}")
    if failed:
        return 1
    mined_from = [{"artifact": f"NVIDIA/nccl-tests=={tag} (tag v{tag}) {', '.join(files_at[tag])}",
                   "url": f"https://github.com/NVIDIA/nccl-tests/tree/v{tag}"} for tag in tags if tag in files_at]
    if not args.dry_run:
        path = save(COMPONENT, doc["software"], doc["title"], mined_from, doc["messages"])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
