"""Check the catalogue's runtime components against the libraries that print them.

Two components hold what a process's own runtime prints when it dies, not what torch or NCCL print:

- `cxx-runtime`: libstdc++'s verbose terminate handler (libstdc++-v3/libsupc++/vterminate.cc):
  `terminate called after throwing an instance of '<type>'`, `  what():  <text>`, and the two texts
  without an exception, each fixed piece one NUL-terminated string of libstdc++.so.6 (separate
  fputs calls).
- `python-runtime`: CPython's fatal-error and faulthandler texts (Python/pylifecycle.c,
  Modules/faulthandler.c, Python/traceback.c): `Fatal Python error: `, the fatal signals' names,
  the thread and stack headers of a dump, `Timeout (...)!`, in libpython.
- `shell`: bash's report of a command a signal ended (jobs.c, siglist.c): the signal's name,
  ` (core dumped)`, and a script's `<script>: line N: ` prefix, in /bin/bash (the names through
  the C library's strsignal, so libc.so.6 is read too).
- `dynamic-loader`: glibc ld.so's reasons a library cannot be loaded (elf/dl-version.c,
  elf/dl-lookup.c): `version `X' not found (required by Y)`, `undefined symbol: X`, which NCCL's
  plugin loader and Python's ImportError quote, in ld-linux-x86-64.so.2.

Every entry's text, with its placeholders (and a refinement's quoted type name) cut away, must
consist of pieces the library holds; a piece it lacks fails the run (exit 1). Every field of a
component is hand-written, `mined_from` included (name the package of the library checked); this
script only checks the texts.

Usage:  .venv/bin/python tools/mine/runtime_strings.py cxx-runtime [--lib /usr/lib/x86_64-linux-gnu/libstdc++.so.6]
        .venv/bin/python tools/mine/runtime_strings.py python-runtime [--lib /path/to/libpython3.11.so.1.0]
        .venv/bin/python tools/mine/runtime_strings.py shell [--lib /bin/bash]
        .venv/bin/python tools/mine/runtime_strings.py dynamic-loader [--lib /lib64/ld-linux-x86-64.so.2]
"""

from __future__ import annotations

import argparse
import re
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalogue_io import load  # noqa: E402


def default_lib(component: str) -> Path:
    if component == "shell":
        return Path("/bin/bash")
    if component == "dynamic-loader":
        return Path("/lib64/ld-linux-x86-64.so.2")
    if component == "python-runtime":
        return Path(sysconfig.get_config_var("LIBDIR") or "/usr/lib") / (sysconfig.get_config_var("INSTSONAME") or "libpython3.so")
    return Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")


def library_strings(lib: Path) -> set[str]:
    data = lib.read_bytes()
    return {s.decode("ascii") for s in re.findall(rb"[\x20-\x7e]{6,}", data)}


LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")


def component_strings(component: str, lib: Path) -> set[str]:
    """The strings the component's texts come from: bash takes the signals' names from the C
    library's strsignal, so the shell's are bash's and libc's together."""
    strings = library_strings(lib)
    if component == "shell" and LIBC.is_file():
        strings |= library_strings(LIBC)
    return strings


_PLACEHOLDER = re.compile(r"%(?:0?\d+)?l?[sudx]|'[\w:<>, ]+'|0x%s")


def pieces(text: str) -> list[str]:
    """The fixed pieces of a message: split at placeholders and at a refinement's quoted type name."""
    return [p for p in _PLACEHOLDER.split(text) if len(p.strip(" '!().:")) >= 3]


def covered(piece: str, strings: set[str], blob: str) -> bool:
    """Whether `piece` is within one library string, or is whole strings written one after another
    and then such a piece (a refinement: the string `Fatal Python error: `, then the string naming
    the signal)."""
    if piece in blob:
        return True
    return any(piece[:cut] in strings and covered(piece[cut:], strings, blob) for cut in range(len(piece) - 1, 2, -1))


def missing(catalogue: dict, strings: set[str]) -> list[tuple[str, str]]:
    blob = "\0".join(sorted(strings))
    out = []
    for m in catalogue["messages"]:
        for text in [m["text"], *(w["text"] for w in m.get("wording") or [])]:
            for piece in pieces(text):
                if not covered(piece, strings, blob):
                    out.append((m["id"], piece))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("component", choices=["cxx-runtime", "python-runtime", "shell", "dynamic-loader"])
    ap.add_argument("--lib", type=Path)
    args = ap.parse_args(argv)
    lib = args.lib or default_lib(args.component)
    catalogue = load(args.component)
    gaps = missing(catalogue, component_strings(args.component, lib))
    for mid, piece in gaps:
        print(f"{mid}: {piece!r} is not in {lib}")
    if gaps:
        return 1
    print(f"{len(catalogue['messages'])} messages: every piece is in {lib}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
