"""Hostile Flight Recorder dumps: what `advisor suggest --dumps` and the HTTP API's `dumps` face.

Each case is a file (or a folder) generated at test time, and says what it attacks and what must
happen: an `error` (exit 3, one line naming the file and the phrases given) or a `finding` (the
dump is read as unusable, the diagnosis goes on and says why). tests/test_fr_hostile.py runs every
case through the core reader, the CLI in-process and, for the resource attacks, the real console
script under a memory ceiling. The listing in DUMPS.md is generated from this registry:
`python tests/hostile/dumps.py --write`.

Only the standard library is imported here, so the file also runs as a script.
"""

from __future__ import annotations

import gzip
import os
import pickle
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

GOOD_ENTRY = {"record_id": 0, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": 1, "p2p_seq_id": 0,
              "op_id": 1, "profiling_name": "nccl:all_reduce", "input_sizes": [[4]], "output_sizes": [[4]],
              "input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": "scheduled", "is_p2p": False}


def good(entries=None, **top) -> dict:
    return {"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": [GOOD_ENTRY] if entries is None else entries, **top}


def _os_system(_: Path) -> bytes:
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch /tmp/advisor-owned",))
    return pickle.dumps(Evil(), protocol=2)


def _eval_in_entry(_: Path) -> bytes:
    class Evil:
        def __reduce__(self):
            return (eval, ("__import__('os').system('true')",))
    return pickle.dumps(good(entries=[dict(GOOD_ENTRY, frames=Evil())]), protocol=4)


def _memo_index(_: Path) -> bytes:
    # CPython's C unpickler allocates and zeroes a memo array twice the largest index: 16 GB here
    return b"\x80\x02}q\x00X\x07\x00\x00\x00versionr\xff\xff\xff\x7fX\x04\x00\x00\x002.10s."


def _memo_flood(_: Path) -> bytes:
    return b"\x80\x02" + b"N\x94" * 1_500_000 + b"."


def _shared_bomb(_: Path) -> bytes:
    # each level a list of two references to the level below: 2**30 entries if walked as a tree
    body = b"0".join(b"](h%ch%ceq%c" % (i, i, i + 1) for i in range(30))
    inner = b"]q\x000" + body
    return b"\x80\x02}(X\x07\x00\x00\x00versionX\x04\x00\x00\x002.10X\x07\x00\x00\x00entries" + inner + b"u."


def _million_refs(_: Path) -> bytes:
    # one entry, referenced a million times from `entries`
    one = pickle.dumps(GOOD_ENTRY, protocol=2)[2:-1]
    return (b"\x80\x02}(X\x07\x00\x00\x00versionX\x04\x00\x00\x002.10X\x07\x00\x00\x00entries](" + one
            + b"r\x00\x00\x00\x00" + b"j\x00\x00\x00\x00" * 1_000_000 + b"eu.")


def _cycle(_: Path) -> bytes:
    return b"\x80\x02}q\x00X\x07\x00\x00\x00entries]q\x01h\x01as."


def _deep(_: Path) -> bytes:
    return b"\x80\x02}X\x07\x00\x00\x00entries" + b"]" * 200_000 + b"a" * 199_999 + b"s."


def _string_claim(_: Path) -> bytes:
    return b"\x80\x02X\xff\xff\xff\x7f" + b"A" * 64


def _long_claim(_: Path) -> bytes:
    return b"\x80\x02\x8b" + struct.pack("<i", 1 << 30) + b"\x01" * 64 + b"."


def _truncated(_: Path) -> bytes:
    data = pickle.dumps(good(entries=[dict(GOOD_ENTRY, record_id=i, collective_seq_id=i + 1) for i in range(50)]), protocol=2)
    return data[: len(data) // 2]


def _near_empty(_: Path) -> bytes:
    return pickle.dumps({"version": "2.4", "pg_config": {}, "pg_status": {}, "entries": []}, protocol=2)  # 87 bytes


def _gzip_bomb(_: Path) -> bytes:
    return gzip.compress(b"\x00" * (80 << 20), compresslevel=9, mtime=0)


def _gzip_cut(_: Path) -> bytes:
    data = gzip.compress(pickle.dumps(good(), protocol=2) * 200, mtime=0)
    return data[: len(data) // 2]


def _json_deep(_: Path) -> bytes:
    return b'{"entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def _json_huge_numbers(_: Path) -> bytes:
    entry = dict(GOOD_ENTRY, process_group=["0", "default_pg"], collective_seq_id=10**400, record_id=-(10**30))
    return (b'{"version": "2.10", "entries": [' + str(entry).replace("'", '"').replace("False", "false").encode()
            + b', {"collective_seq_id": 1e999}]}')


def _json_cut(_: Path) -> bytes:
    return b'{"version": "2.10", "entries": [{"record_id": 0, "process_gro'


def _wrong_types(_: Path) -> bytes:
    weird = [dict(GOOD_ENTRY, input_sizes="[[4]]"), dict(GOOD_ENTRY, collective_seq_id=1.5), dict(GOOD_ENTRY, frames=7),
             dict(GOOD_ENTRY, process_group=None), dict(GOOD_ENTRY, input_sizes=[[2**70]]), "entry", None, 3.5,
             dict(GOOD_ENTRY, profiling_name="nccl:send 99999999->0", is_p2p=True, state="started")]
    return pickle.dumps(good(entries=weird, pg_config={"0": {"ranks": "[" + "1," * 100_000 + "]"}}, pg_status=[1, 2]), protocol=2)


def _entries_not_list(_: Path) -> bytes:
    return pickle.dumps({"version": "2.10", "entries": {"0": GOOD_ENTRY}}, protocol=2)


def _not_a_dict(_: Path) -> bytes:
    return pickle.dumps("just a string", protocol=2)


def _text_log(_: Path) -> bytes:
    return b"[rank0]: RuntimeError: something went wrong\n" * 10


def _binary_junk(_: Path) -> bytes:
    import random
    return random.Random("dump-junk").randbytes(1 << 16)


@dataclass(frozen=True)
class DumpCase:
    id: str
    attacks: str
    make: Callable[[Path], bytes]
    outcome: str
    """"error": a DumpError naming the file; "finding": read as an unusable dump (its `problem` says
    why); "read": read and analysed (its notes say what was left out)."""
    says: tuple[str, ...] = ()
    """phrases the error message, the dump's problem, or its notes contain."""
    name: str = "nccl_trace_rank_0"
    console: bool = False
    """also run through the real console script under a memory ceiling (the resource attacks)."""

    @property
    def expectation(self) -> str:
        what = {"error": "exit 3, the file named", "finding": "read as an unusable dump", "read": "read and analysed"}[self.outcome]
        return what + ("; says " + ", ".join(f'"{s}"' for s in self.says) if self.says else "")


CASES: list[DumpCase] = [
    DumpCase("pickle-os-system", "a pickle whose REDUCE calls os.system", _os_system, "error", ("refuses",)),
    DumpCase("pickle-eval-in-entry", "a valid dump with eval() smuggled into an entry's frames (protocol 4)", _eval_in_entry, "error", ("refuses",)),
    DumpCase("pickle-memo-index", "LONG_BINPUT to memo slot 2**31-1 (16 GB for CPython's C unpickler)", _memo_index, "finding",
             ("no collectives",), console=True),
    DumpCase("pickle-memo-flood", "1.5 million memo entries", _memo_flood, "error", ("memo entries",), console=True),
    DumpCase("pickle-shared-bomb", "shared references doubling per level: 2**30 entries walked as a tree", _shared_bomb, "finding",
             ("no collectives",), console=True),
    DumpCase("pickle-million-refs", "one entry referenced a million times", _million_refs, "read", ("only the newest",), console=True),
    DumpCase("pickle-cycle", "a list that contains itself", _cycle, "error", ("contains itself",)),
    DumpCase("pickle-deep", "lists nested 200,000 deep", _deep, "error", ("nested deeper",)),
    DumpCase("pickle-string-claim", "a string that claims 2 GB in a 70-byte file", _string_claim, "error", ("2,147,483,647 bytes",)),
    DumpCase("pickle-long-claim", "an integer that claims 1 GB", _long_claim, "error", ("too large",)),
    DumpCase("pickle-truncated", "a dump cut off half-way (copied while being written)", _truncated, "finding", ("cut off",)),
    DumpCase("near-empty-87-bytes", "the 87-byte dump of a recorder that was off (pytorch#145125)", _near_empty, "finding",
             ("no collectives", "TORCH_FR_BUFFER_SIZE")),
    DumpCase("empty-file", "a zero-byte dump (the rank died while writing it)", lambda _: b"", "finding", ("empty",)),
    DumpCase("gzip-bomb", "80 MiB of zeros in an 80 KiB .gz", _gzip_bomb, "error", ("once decompressed",), "rank_0.gz", console=True),
    DumpCase("gzip-cut", "a .gz cut off half-way", _gzip_cut, "finding", ("breaks off",), "rank_0.gz"),
    DumpCase("json-deep", "JSON arrays nested 100,000 deep", _json_deep, "error", ("nests too deeply",), "rank_0.json"),
    DumpCase("json-huge-numbers", "a 400-digit sequence number and 1e999", _json_huge_numbers, "finding", ("no collectives",), "rank_0.json"),
    DumpCase("json-cut", "a JSON dump cut off mid-key", _json_cut, "finding", ("cut off",), "rank_0.json"),
    DumpCase("wrong-types", "every field of the wrong type, a 100,000-rank group string, pg_status a list", _wrong_types, "read",
             ("skipped",)),
    DumpCase("entries-not-a-list", "'entries' is a dict", _entries_not_list, "error", ("not a list",)),
    DumpCase("not-a-dict", "a pickle of a plain string", _not_a_dict, "error", ("not a Flight Recorder dump",)),
    DumpCase("text-log", "a log file named like a dump", _text_log, "error", ("not a Flight Recorder dump", "--log")),
    DumpCase("binary-junk", "64 KiB of random bytes named like a dump", _binary_junk, "error", ()),
    DumpCase("escape-in-name", "a terminal escape in the file name", _not_a_dict, "error", ("\\x1b",), "nccl\x1b[2J_trace_rank_0"),
]
BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES), "duplicate case ids"

LISTING = Path(__file__).with_name("DUMPS.md")


def listing() -> str:
    rows = ["# Hostile Flight Recorder dumps", "",
            "Generated from `dumps.py` (`python tests/hostile/dumps.py --write`); run by `tests/test_fr_hostile.py`.", "",
            "| case | attacks | expected |", "| --- | --- | --- |"]
    for case in CASES:
        mark = " (console script)" if case.console else ""
        rows.append(f"| `{case.id}`{mark} | {case.attacks.replace('|', '/')} | {case.expectation.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        LISTING.write_text(listing(), encoding="utf-8")
    else:
        sys.stdout.write(listing())
