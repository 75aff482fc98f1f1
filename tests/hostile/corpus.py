"""A registry of hostile inputs for the advisor, each stating what it attacks and what must happen.

Every case is generated when a test asks for it: nothing binary or big is committed, and no tool
(git's autocrlf, an editor, a formatter) can quietly "repair" a CRLF, a NUL or an invalid byte.
Big cases write a temporary file; their size is `big_size()`: 32 MiB by default, 200 MiB with
ADVISOR_HOSTILE_FULL=1.

The listing in README.md is generated from this registry and checked by tests/test_hostile.py;
after adding a case, regenerate it with `python tests/hostile/corpus.py --write`.

Only the standard library is imported here, so the file also runs as a script.
"""

from __future__ import annotations

import codecs
import gzip
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

# --- the real lines the corpus wraps junk around ------------------------------------------------

# NCCL's own warning when /dev/shm is too small: the advisor diagnoses it from this line alone.
SHM = ("node3:2710:2730 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637888 bytes, "
       "error: No space left on device (28)")
SHM_CAUSE = "dev-shm-too-small"
# PyTorch's watchdog timeout: the advisor reads its fields (timeout, collective, rank) as facts.
WATCHDOG = ("[rank1]:[E217 14:55:02.441 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=38, OpType=_ALLGATHER_BASE, NumelIn=9510912, NumelOut=38043648, Timeout(ms)=1800000) "
            "ran for 1800033 milliseconds before timing out.")
WATCHDOG_FACTS = {"timeout_ms": 1800000, "op_type": "_ALLGATHER_BASE", "seq_num": 38}
REAL_LOG = (WATCHDOG + "\n" + SHM + "\n").encode()

MiB = 1 << 20
FULL_ENV = "ADVISOR_HOSTILE_FULL"


def big_size() -> int:
    """Size of the multi-megabyte cases: 200 MiB for the full local run, 32 MiB in CI."""
    return (200 if os.environ.get(FULL_ENV) else 32) * MiB


# --- what a case is -----------------------------------------------------------------------------

OK = frozenset({0})  # diagnosed
ANSWERED = frozenset({0, 1})  # diagnosed, or "no confident match" with what to turn on next
INPUT_ERROR = frozenset({3})


@dataclass(frozen=True)
class Case:
    id: str
    attacks: str
    """one line: what the case attacks."""
    make: Callable[[Path], Any]
    """bytes for content cases; for `path` cases the path to give --log (made under the folder)."""
    exit: frozenset[int]
    """the CLI's allowed exit codes (0 diagnosed, 1 unsure, 3 input error)."""
    says: tuple[str, ...] = ()
    """phrases the one-line error message must contain (input errors): what is wrong, what to do."""
    top: str | None = None
    """the cause that must be ranked first."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """facts that must still be read from the real line inside the junk."""
    path: bool = False
    """a file-system case: only `advisor suggest --log PATH` sees it."""
    big: bool = False
    """written to a temporary file by `make` (which returns the path) and run through the real
    console script in a subprocess, with a memory ceiling."""
    core: bool = True
    """`top` and `facts` hold for the core's read_log too; False where only the CLI's input layer
    (advisor.inputs) unwraps the encoding (gzip, UTF-16)."""
    stdin: bool = True
    """also piped to `advisor suggest -`."""

    @property
    def expectation(self) -> str:
        codes = "/".join(str(c) for c in sorted(self.exit))
        parts = [f"exit {codes}"]
        if self.top:
            parts.append(f"top `{self.top}`")
        if self.facts:
            parts.append("reads " + ", ".join(f"`{k}`" for k in self.facts))
        if self.says:
            parts.append("message says " + ", ".join(f'"{s}"' for s in self.says))
        return "; ".join(parts)


def rng(seed: str) -> random.Random:
    return random.Random(seed)  # the same junk on every run: a failure reproduces


def random_bytes(seed: str, n: int) -> bytes:
    return rng(seed).randbytes(n)


def gzip_members(member: bytes, count: int) -> bytes:
    """`count` gzip members of `member`: one small file that inflates to count x len(member)."""
    return gzip.compress(member, compresslevel=9, mtime=0) * count


def write_big(folder: Path, name: str, parts: Callable[[], Any]) -> Path:
    """Write the chunks `parts()` yields to folder/name, never holding the whole file in memory."""
    path = folder / name
    with path.open("wb") as out:
        for chunk in parts():
            out.write(chunk)
    return path


def repeat_to(unit: bytes, size: int, chunk: int = 4 * MiB):
    """Yield `unit` repeated up to `size` bytes, in chunks."""
    block = unit * max(1, chunk // len(unit))
    left = size
    while left > 0:
        piece = block[:left]
        yield piece
        left -= len(piece)


# --- the path cases -----------------------------------------------------------------------------


def _missing(folder: Path) -> str:
    return str(folder / "no" / "such" / "train.log")


def _directory(folder: Path) -> str:
    (folder / "logs").mkdir(exist_ok=True)
    (folder / "logs" / "rank0.log").write_bytes(REAL_LOG)
    return str(folder / "logs")


def _unreadable(folder: Path) -> str:
    path = folder / "secret.log"
    path.write_bytes(REAL_LOG)
    path.chmod(0)
    return str(path)


def _symlink_loop(folder: Path) -> str:
    a, b = folder / "loop-a.log", folder / "loop-b.log"
    a.symlink_to(b)
    b.symlink_to(a)
    return str(a)


def _dangling(folder: Path) -> str:
    link = folder / "latest.log"
    link.symlink_to(folder / "rotated-away.log")
    return str(link)


def _empty_file(folder: Path) -> str:
    path = folder / "empty.log"
    path.write_bytes(b"")
    return str(path)


def _long_name(folder: Path) -> str:
    return str(folder / ("x" * 5000 + ".log"))


def _control_name(folder: Path) -> str:
    return str(folder / "train\x1b[2J\x1b[31mred\nsecond line.log")


def _fifo(folder: Path) -> str:
    path = folder / "pipe.log"
    os.mkfifo(path)
    return str(path)  # the test starts a writer (a FIFO with no writer waits for one, like `cat`)


# --- the big cases ------------------------------------------------------------------------------


def _giant_line(folder: Path) -> Path:
    size = big_size()

    def parts():
        yield from repeat_to(b"0123456789abcdef" * 4, size)
        yield b" " + SHM.encode()  # the real message at the very end of the one line: no newline

    return write_big(folder, "giant-line.log", parts)


def _giant_line_then_lines(folder: Path) -> Path:
    size = big_size()

    def parts():
        yield from repeat_to(b"[rank0]:", size)
        yield b"\n" + REAL_LOG

    return write_big(folder, "rank-prefixes.log", parts)


def _text_gzip_bomb(folder: Path) -> Path:
    # each member inflates 1 MiB of "step ok" lines; the file is a few KiB per member
    member = b"step ok\n" * (MiB // 8)
    count = big_size() // MiB
    path = folder / "bomb.log.gz"
    path.write_bytes(gzip_members(member, count) + gzip.compress(REAL_LOG, mtime=0))
    return path


def _nul_gzip_bomb(folder: Path) -> Path:
    path = folder / "zeros.log.gz"
    path.write_bytes(gzip_members(b"\x00" * (4 * MiB), 64))  # 256 MiB of NULs from ~16 KiB
    return path


# --- the content cases --------------------------------------------------------------------------


def _near_misses(_: Path) -> bytes:
    variants = [
        "[Rank 1] Watchdog caught collective operation",  # the message cut before "timeout"
        "[Rank 1] Watchdog caugth collective opertaion timeout: WorkNCCL(SeqNum=x, OpType=, Timeout(ms)=)",
        "WorkNCCL(SeqNum=, OpType=ALLREDUCE, NumelIn=-, NumelOut=, Timeout(ms)=NaN) ran for  milliseconds",
        "Timeout(ms)=1800000 ran for 1800033 seconds",
        "[PG 0 Rank ] last enqueued NCCL work: , last completed NCCL work: ",
        "Watchdog: collective operation timeout? no: all good",
        "WorkNCCL SeqNum=38 OpType=ALLREDUCE",
        "caught collective operation time out",
    ]
    r = rng("near-misses")
    return "".join(f"[rank{r.randrange(64)}]: {r.choice(variants)}\n" for _ in range(20_000)).encode()


def _redos_payloads(_: Path) -> bytes:
    payloads = [
        b"a" * 50_000 + b"!",
        b"(x+x+)+y" * 5_000,
        b"x" * 30_000 + b"y",
        b"WorkNCCL(" * 5_000,
        b"Watchdog caught " * 3_000,
        b"exitcode : " * 5_000,
        b"File \"" * 5_000 + b"\", line 1, in ",
        b"-----BEGIN PRIVATE KEY-----" + b"A" * 50_000,
        b"hf_" + b"a" * 50_000,
        b"1." * 25_000,
        b"[" * 20_000 + b"rank0]:" + b"]" * 20_000,
        b"\x1b[" + b"0;" * 30_000 + b"\x1b]0;" + b"t" * 30_000,
    ]
    return b"\n".join(payloads) + b"\n" + REAL_LOG


def _truncated_gzip(_: Path) -> bytes:
    lines = b"".join(b"step %d ok\n" % i for i in range(400_000)) + REAL_LOG
    packed = gzip.compress(lines, mtime=0)
    return packed[: len(packed) // 2]


def _long_numbers(_: Path) -> bytes:
    d = "9" * 5000
    lines = [
        f"[Rank {d}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={d}, OpType=ALLREDUCE, "
        f"NumelIn={d}, NumelOut={d}, Timeout(ms)={d}) ran for {d} milliseconds before timing out.",
        f"[Rank 1] last enqueued NCCL work: {d}, last completed NCCL work: {d}",
        f"Timed out waiting {d}ms for recv operation to complete",
        f"GLOBAL_RANK: {d}, MEMBER: {d}/{d}", f"world_size={d}", f"--nnodes={d} --nproc_per_node={d}",
        f"host:{d}:{d} [{d}] NCCL INFO Bootstrap", f"exitcode : {d}", f"{d}/{d} clients joined",
        f" 45%|####| {d}/{d} [10:00<12:00,  {d}.{d}s/it]", f"step: {d}  loss: 1.0 tps: {d}",
        f"total params: {d}", f"torch=={d}.{d}.{d}", f"NCCL version {d}.{d}.{d}+cuda{d}.{d}",
        f"ProcessGroupNCCL's watchdog got stuck for {d} seconds without making progress in monitoring enqueued collectives",
        f"torch.distributed.DistStoreError: Timed out after {d} seconds waiting for clients. {d}/{d} clients joined.",
        "SeqNum=" + "7" * 100_000,
        "Timeout(ms)=" + "1" * 100_000,
    ]
    return ("\n".join(lines) + "\n").encode() + REAL_LOG


CASES: list[Case] = [
    # empty and blank
    Case("empty", "no input at all", lambda _: b"", INPUT_ERROR, says=("empty", "paste")),
    Case("only-whitespace", "spaces and tabs, no text", lambda _: b" \t  \t" * 1000, INPUT_ERROR, says=("empty", "paste")),
    Case("only-newlines", "a million line breaks and nothing else", lambda _: b"\n" * 1_000_000, INPUT_ERROR, says=("empty", "paste")),
    Case("only-nuls", "a file of NUL bytes (a preallocated log nobody wrote to)", lambda _: b"\x00" * 100_000, INPUT_ERROR,
         says=("empty",)),
    # binary junk
    Case("random-bytes", "1 MiB of random bytes", lambda _: random_bytes("random", MiB), INPUT_ERROR, says=("binary", "give")),
    Case("elf-binary", "an executable (ELF header and machine code) given as a log",
         lambda _: b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 56 + random_bytes("elf", 200_000), INPUT_ERROR, says=("binary", "give")),
    Case("png-image", "a PNG image given as a log", lambda _: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random_bytes("png", 100_000),
         INPUT_ERROR, says=("binary", "give")),
    Case("zip-archive", "a zip archive given as a log", lambda _: b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + random_bytes("zip", 100_000),
         INPUT_ERROR, says=("binary", "give")),
    Case("gzip-as-plain", "a gzip'ed log under a plain name, and piped in", lambda _: gzip.compress(REAL_LOG, mtime=0), OK,
         top=SHM_CAUSE, facts=WATCHDOG_FACTS, core=False),
    Case("gzip-truncated", "a .gz cut off half-way (copied while still being written)", _truncated_gzip, INPUT_ERROR,
         says=("breaks off", "gzip -dc")),
    Case("gzip-corrupt", "a gzip header followed by garbage", lambda _: b"\x1f\x8b\x08\x00" + random_bytes("gz", 50_000), INPUT_ERROR,
         says=("cannot read", "check")),
    Case("gzip-in-gzip-in-gzip", "three layers of gzip (one more than the advisor unwraps)",
         lambda _: gzip.compress(gzip.compress(gzip.compress(REAL_LOG, mtime=0), mtime=0), mtime=0), INPUT_ERROR, says=("binary",)),
    # encodings
    Case("invalid-utf8-in-line", "invalid UTF-8 bytes in the middle of a real NCCL error line",
         lambda _: SHM.encode().replace(b"WU88OE", b"W\xff\xfe\xc3\x28OE").replace(b"node3", b"n\xe9ud\xa03") + b"\n", OK,
         top=SHM_CAUSE),
    Case("invalid-utf8-everywhere", "invalid UTF-8 sequences between and inside every word",
         lambda _: b"\xc3\x28 \xa0\xa1 \xe2\x28\xa1 \xf0\x28\x8c\xbc \xff\xfe\n".join(REAL_LOG.split(b" ")), ANSWERED),
    Case("utf16-le-bom", "a UTF-16 log with its byte-order mark (PowerShell's `>`)", lambda _: REAL_LOG.decode().encode("utf-16"), OK,
         top=SHM_CAUSE, facts=WATCHDOG_FACTS, core=False),
    Case("utf16-be-bom", "a big-endian UTF-16 log with its byte-order mark",
         lambda _: codecs.BOM_UTF16_BE + REAL_LOG.decode().encode("utf-16-be"), OK, top=SHM_CAUSE, core=False),
    Case("utf16-no-bom", "UTF-16 without a byte-order mark", lambda _: REAL_LOG.decode().encode("utf-16-le"), INPUT_ERROR,
         says=("UTF-16", "iconv")),
    Case("utf8-bom", "a UTF-8 byte-order mark before the first line", lambda _: codecs.BOM_UTF8 + SHM.encode() + b"\n", OK, top=SHM_CAUSE),
    Case("mixed-encodings", "latin-1 lines around UTF-8 lines (a hostname with an accent)",
         lambda _: "hôte-é: démarrage\n".encode("latin-1") + REAL_LOG + "fin ±µ\n".encode("latin-1") + "完成\n".encode(), OK,
         top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("nul-between-every-byte", "a NUL after every byte of a real log", lambda _: b"".join(bytes([c, 0]) for c in REAL_LOG),
         INPUT_ERROR, says=("UTF-16",)),
    Case("nul-hole-then-log", "3 MiB of NULs before the log (a log truncated while its writer went on)",
         lambda _: b"\x00" * (3 * MiB) + REAL_LOG, OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("nuls-inside-lines", "NUL bytes sprinkled through the text of a log (one every ten lines, three in the real lines)",
         lambda _: b"".join(b"step %d loss 0.%d%s ok\n" % (i, i, b"\x00" * (i % 10 == 0)) for i in range(2000))
         + REAL_LOG.replace(b" ", b"\x00 ", 3)
         + b"\x00tail\x00\n", OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    # terminals
    Case("ansi-wrapped", "colour codes, cursor moves and a window-title escape around a real error line",
         lambda _: b"\x1b]0;train.py\x07\x1b[2K\x1b[1A\x1b[1;31m" + WATCHDOG.encode() + b"\x1b[0m\n\x1b[33m\x1b[?25l"
         + SHM.encode() + b"\x1b[0m\x1b[?25h\n", OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("ansi-unterminated", "escape sequences that never end (a CSI of 100k parameters, an OSC without its terminator)",
         lambda _: b"\x1b[" + b"1;" * 50_000 + b"\n\x1b]0;" + b"t" * 100_000 + b"\n" + REAL_LOG, OK, top=SHM_CAUSE),
    Case("crlf", "Windows line ends", lambda _: REAL_LOG.replace(b"\n", b"\r\n") * 3, OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("lone-cr-progress", "a progress bar redrawn with lone CRs, the error glued to it",
         lambda _: b"".join(b"\r %3d%%|#####     | %d/1000 [00:10<00:20, 1.31s/it]" % (i % 100, i) for i in range(20_000))
         + b"\r" + REAL_LOG.replace(b"\n", b"\r"), OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    # long lines, prefixes, brackets
    Case("rank-fragment-10mb", "10 MB of `[rank` repeated on one line", lambda _: b"[rank" * (2 * 1_000_000) + b"\n" + REAL_LOG, OK,
         top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("rank0-prefix-million", "`[rank0]:` a million times on one line, then the real line", lambda _: b"[rank0]:" * 1_000_000
         + SHM.encode() + b"\n", OK, top=SHM_CAUSE),
    Case("rank0-prefix-lines", "a million lines of `[rank0]:` and nothing else, then the real log", lambda _: b"[rank0]:\n" * 1_000_000
         + REAL_LOG, OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("nested-brackets", "a million `[` then a million `(` (deep nesting to a parser)",
         lambda _: b"[" * 1_000_000 + b"(" * 1_000_000 + b"{" * 100_000 + b"\n" + REAL_LOG, OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("redos-shapes", "classic ReDoS payloads: `a`x50000+`!`, `(x+x+)+y`, repeated message prefixes, unterminated escapes",
         _redos_payloads, OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("blank-runs", "5 MB of spaces and 5 MB of tabs on one line", lambda _: b" " * 5_000_000 + b"\t" * 5_000_000 + b"\n" + REAL_LOG,
         OK, top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("long-numbers", "5000-digit numbers in every field the advisor reads (SeqNum=, Timeout(ms)=, world_size=...)",
         _long_numbers, ANSWERED, top=SHM_CAUSE),  # its shm and heartbeat lines are two specific causes: no clear lead
    Case("million-tiny-lines", "a million one-character lines, then the real log", lambda _: b"x\n" * 1_000_000 + REAL_LOG, OK,
         top=SHM_CAUSE, facts=WATCHDOG_FACTS),
    Case("near-miss-timeouts", "20,000 lines, each a near miss of the NCCL timeout message: never a diagnosis", _near_misses,
         frozenset({1})),
    # big: generated to a temporary file
    Case("giant-single-line", "one line of 32 MiB (200 MiB in the full run) without a newline, the real message at its end", _giant_line, OK,
         top=SHM_CAUSE, big=True),
    Case("giant-rank-prefix-line", "32 MiB (200 MiB) of `[rank0]:` on one line, then the real log", _giant_line_then_lines, OK,
         top=SHM_CAUSE, facts=WATCHDOG_FACTS, big=True),
    Case("gzip-bomb-text", "a gzip file of a few KiB per MiB that inflates to 32 MiB (200 MiB) of log lines", _text_gzip_bomb, OK,
         top=SHM_CAUSE, big=True, core=False),
    Case("gzip-bomb-nuls", "a 16 KiB gzip file that inflates to 256 MiB of NULs", _nul_gzip_bomb, INPUT_ERROR, says=("binary",),
         big=True, core=False),
    # the file system
    Case("missing-file", "a path that does not exist", _missing, INPUT_ERROR, says=("no such file", "check the path"), path=True),
    Case("directory", "a directory instead of a file", _directory, INPUT_ERROR, says=("is a directory", "cat "), path=True),
    Case("unreadable-file", "a file without read permission (skipped as root)", _unreadable, INPUT_ERROR,
         says=("permission denied", "advisor suggest -"), path=True),
    Case("symlink-loop", "two symbolic links pointing at each other", _symlink_loop, INPUT_ERROR, says=("loop", "give"), path=True),
    Case("dangling-symlink", "a symbolic link to a rotated-away file", _dangling, INPUT_ERROR, says=("missing file", "give"), path=True),
    Case("empty-file", "an existing, empty file", _empty_file, INPUT_ERROR, says=("empty", "check the path"), path=True),
    Case("dev-zero", "/dev/zero: an endless device", lambda _: "/dev/zero", INPUT_ERROR, says=("device", "advisor suggest -"), path=True),
    Case("dev-urandom", "/dev/urandom: an endless device of random bytes", lambda _: "/dev/urandom", INPUT_ERROR, says=("device",),
         path=True),
    Case("fifo", "a named pipe (FIFO) that a writer fills", _fifo, OK, top=SHM_CAUSE, path=True),
    Case("name-too-long", "a 5000-character file name", _long_name, INPUT_ERROR, says=("check the path",), path=True),
    Case("control-chars-in-name", "a file name with terminal escapes and a line break", _control_name, INPUT_ERROR,
         says=("no such file", "\\x1b"), path=True),
    Case("dash-as-log", "`--log -` (meaning standard input)", lambda _: "-", INPUT_ERROR, says=("advisor suggest -",), path=True),
]
BY_ID = {case.id: case for case in CASES}
assert len(BY_ID) == len(CASES), "duplicate case ids"


# --- README.md ----------------------------------------------------------------------------------

README = Path(__file__).with_name("README.md")
_MARK = "<!-- generated from corpus.py: python tests/hostile/corpus.py --write -->"


def listing() -> str:
    rows = ["| case | attacks | expected |", "| --- | --- | --- |"]
    for case in CASES:
        where = " (file system)" if case.path else " (generated file)" if case.big else ""
        rows.append(f"| `{case.id}`{where} | {case.attacks.replace('|', '/')} | {case.expectation.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def readme_text(current: str) -> str:
    """README.md with the part after the marker replaced by the listing."""
    head = current.split(_MARK)[0].rstrip("\n")
    return f"{head}\n\n{_MARK}\n\n{listing()}"


if __name__ == "__main__":
    text = readme_text(README.read_text(encoding="utf-8"))
    if "--write" in sys.argv[1:]:
        README.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(listing())
