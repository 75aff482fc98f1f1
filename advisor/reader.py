"""Streams a log of any size as normalized byte blocks that end on line boundaries.

Memory stays bounded by the block size whatever the input: a 1 GB multi-rank log is read in
4 MiB blocks, a 200 MB line without a newline is cut into block-sized pieces. Normalization happens
on bytes, before anything is decoded, so the scanner can skip the uninteresting 99.9% of a log
without ever turning it into Python strings:

* CRLF becomes LF; a lone CR (a progress bar redrawing itself) becomes LF, so the log message that
  a tqdm bar was glued to stands on its own line. Line numbers therefore count those redraws.
* ANSI colour and cursor sequences are removed.
* NUL bytes become spaces (binary junk must not hide the text around it).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

BLOCK_SIZE = 4 << 20

# CSI (colours, cursor moves), OSC (window titles, hyperlinks) and two-byte escapes.
_ANSI = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)|[@-Z\\-_])")


@dataclass(frozen=True, slots=True)
class Block:
    data: bytes
    """normalized bytes; ends with LF unless the input ended (or a giant line was cut)."""
    first_line: int
    """1-based number of the line `data` starts on."""
    continues_line: bool
    """the first line of `data` continues the last line of the previous block (a cut giant line)."""
    newlines: int = -1
    """line breaks in `data` (counted once here: every pass over a gigabyte counts)."""

    def __post_init__(self) -> None:
        if self.newlines < 0:
            object.__setattr__(self, "newlines", self.data.count(b"\n"))


_CRLF = None  # RE2 program for CRLF, compiled on the first big block


def _has_crlf(chunk: bytes) -> bool:
    """`b"\\r\\n" in chunk`, at memchr speed on progress-bar logs.

    CPython's two-byte search steps a couple of bytes at a time when the first byte is common (a
    tqdm log holds a CR every ~80 bytes): ~1 s per GB. RE2 jumps from CR to CR with memchr.
    """
    global _CRLF
    if len(chunk) < 1 << 16:
        return b"\r\n" in chunk
    if _CRLF is None:
        import re2

        _CRLF = re2.compile(rb"\r\n")
    return _CRLF.search(chunk) is not None


def normalize(chunk: bytes) -> bytes:
    if b"\r" in chunk:
        if _has_crlf(chunk):
            chunk = chunk.replace(b"\r\n", b"\n")
        chunk = chunk.replace(b"\r", b"\n")
    if b"\x1b" in chunk:
        chunk = _ANSI.sub(b"", chunk)
    if b"\x00" in chunk:
        chunk = chunk.replace(b"\x00", b" ")
    return chunk


def open_source(source: str | bytes | BinaryIO) -> BinaryIO:
    """Text, bytes or a binary stream, as a binary stream."""
    if isinstance(source, str):
        return io.BytesIO(encode(source))
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source))
    return source


def iter_blocks(
    source: str | bytes | BinaryIO,
    block_size: int = BLOCK_SIZE,
    on_progress: Callable[[int], None] | None = None,
    count_lines: bool = True,
) -> Iterator[Block]:
    """Yield normalized blocks; `on_progress(bytes_read)` is called after every read.

    With `count_lines=False` every block says first_line=0 and newlines=0: for a consumer that
    counts lines itself on its way through the block (the scanner), a second full pass saved.
    """
    stream = open_source(source)
    pending = b""  # an incomplete last line carried into the next block
    line = 1
    continues = False
    total = 0
    while True:
        raw = stream.read(block_size)
        if not raw:
            break
        total += len(raw)
        if on_progress is not None:
            on_progress(total)
        # a CR at the very end may be the first half of a CRLF split across reads
        if raw.endswith(b"\r"):
            extra = stream.read(1)
            total += len(extra)
            raw += extra
        data = pending + normalize(raw)
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) < block_size:
            pending = data  # no line end yet: keep reading
            continue
        if cut == 0:
            cut = len(data)  # a giant line: cut it, the next block continues it
        block, pending = data[:cut], data[cut:]
        newlines = block.count(b"\n") if count_lines else 0
        yield Block(block, line if count_lines else 0, continues, newlines)
        line += newlines
        continues = not block.endswith(b"\n")
    if pending:
        yield Block(pending, line if count_lines else 0, continues, -1 if count_lines else 0)


def encode(text: str) -> bytes:
    """Text as the bytes it came from: an undecodable byte that Python smuggled in as a surrogate
    (command-line arguments) becomes that byte again; any other lone surrogate (JSON allows
    `"\\ud800"`) becomes U+FFFD instead of an exception."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode("utf-8", "surrogateescape")


def decode(data: bytes) -> str:
    """Bytes of a log as text: invalid UTF-8 becomes U+FFFD, never an exception."""
    return data.decode("utf-8", "replace")


def looks_binary(sample: bytes) -> bool:
    """True for data that is not a text log (an image, an archive, a core dump).

    Counts control bytes other than the whitespace and escape a terminal log contains; invalid
    UTF-8 alone does not make a log binary (a latin-1 hostname is still text).
    """
    if not sample:
        return False
    control = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return b"\x00" in sample[:4096] and control > len(sample) // 50 or control > len(sample) // 10
