"""Check kb/messages/cxx-runtime.yaml against the C++ runtime that prints it.

libstdc++'s verbose terminate handler (libstdc++-v3/libsupc++/vterminate.cc) writes `terminate
called after throwing an instance of '<type>'`, `  what():  <text>`, `terminate called recursively`
and `terminate called without an active exception` with separate fputs calls, so each fixed piece
is one NUL-terminated string in libstdc++.so.6. Every entry's text, with its placeholders (and a
refinement's type name) cut away, must consist of such pieces; a piece the library lacks fails the
run (exit 1). Every field of the component is hand-written, `mined_from` included (name the package
the checked library came from there); this script only checks the texts.

Usage:  .venv/bin/python tools/mine/cxx_runtime.py [--lib /usr/lib/x86_64-linux-gnu/libstdc++.so.6]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalogue_io import load  # noqa: E402

COMPONENT = "cxx-runtime"
DEFAULT_LIB = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")


def library_strings(lib: Path) -> set[str]:
    data = lib.read_bytes()
    return {s.decode("ascii") for s in re.findall(rb"[\x20-\x7e]{6,}", data)}


def pieces(text: str) -> list[str]:
    """The fixed pieces of a message: split at placeholders and at a refinement's quoted type name."""
    return [p for p in re.split(r"%s|'[\w:<>, ]+'", text) if p.strip(" '")]


def missing(catalogue: dict, strings: set[str]) -> list[tuple[str, str]]:
    out = []
    for m in catalogue["messages"]:
        for piece in pieces(m["text"]):
            if not any(piece in s for s in strings):
                out.append((m["id"], piece))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", type=Path, default=DEFAULT_LIB)
    args = ap.parse_args(argv)
    catalogue = load(COMPONENT)
    gaps = missing(catalogue, library_strings(args.lib))
    for mid, piece in gaps:
        print(f"{mid}: {piece!r} is not in {args.lib}")
    if gaps:
        return 1
    print(f"{len(catalogue['messages'])} messages: every piece is in {args.lib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
