"""Opening what a user hands the advisor: a file (plain or gzip), a pipe, standard input.

Shared by the CLI and the TUI. Every refusal is an `InputError` whose message says what is wrong
and what to do instead; binary data is refused after reading one block, not after streaming it all.
"""

from __future__ import annotations

import codecs
import gzip
import io
import os
import stat
import zlib
from typing import BinaryIO

HEAD = 65536
"""bytes read before deciding whether a stream is a text log."""
MAX_HOLE = 64 << 20
"""leading NUL bytes skipped before that decision: a log truncated while its writer went on
(`> train.log`, logrotate's copytruncate) starts with a hole of NULs; a stream of nothing but NULs
(`cat /dev/zero |`) is refused after this many, not read forever."""
_BLANK = b" \t\r\n\x00\x0b\x0c"
_UNWRAP = 2  # at most this many layers of gzip / UTF-16 around a log (a gzip bomb of gzips is binary)
_BOMS = (  # UTF-32 first: its little-endian BOM begins with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)


class InputError(Exception):
    """A log we cannot read; the message says what to do instead."""


def shown(text: str, limit: int = 200) -> str:
    """A user-given name as it may appear in a one-line message: control characters (a newline, a
    terminal escape) and undecodable bytes escaped, and no longer than `limit`."""
    out = "".join(ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii") for ch in text[:limit])
    return out + ("..." if len(text) > limit else "")


def open_log(path_text: str) -> tuple[BinaryIO, int | None]:
    name = shown(path_text)
    if not path_text:
        raise InputError("the log file name is empty: give the path of a log file")
    try:
        st = os.stat(path_text)  # follows symbolic links
    except ValueError:  # an embedded NUL byte
        raise InputError(f"{name}: not a valid file name (it contains a NUL byte); check the path") from None
    except OSError as exc:
        raise InputError(_stat_problem(path_text, name, exc)) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{name}: is a directory; give one log file (concatenate ranks with `cat {name}/* > all.log`)")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        raise InputError(f"{name}: is a device or socket, not a log file; give a log file, or pipe the output in: `COMMAND | advisor suggest -`")
    try:
        handle = open(path_text, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except PermissionError:
        raise InputError(f"{name}: permission denied; make it readable, or pipe it in: `sudo cat FILE | advisor suggest -`") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot open ({exc.strerror or exc}); check the path") from None
    regular = stat.S_ISREG(st.st_mode)
    size = st.st_size if regular else None  # a pipe or /dev/stdin has no size
    if size == 0:
        try:
            empty = not handle.peek(1)
        except OSError as exc:
            handle.close()
            raise InputError(f"{name}: cannot read ({exc.strerror or exc}); give a log file") from None
        if empty:
            handle.close()
            raise InputError(f"{name}: the file is empty; check the path (the job may log elsewhere), or paste the error with --error")
        size = None  # /proc and some network file systems report 0 for files that have content
    try:
        return sniff(handle, name), size
    except BaseException:
        handle.close()
        raise


def _stat_problem(path_text: str, name: str, exc: OSError) -> str:
    import errno

    if exc.errno == errno.ELOOP:
        return f"{name}: a loop of symbolic links; give the log file itself"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        if os.path.islink(path_text):
            return f"{name}: a symbolic link to a missing file ({shown(os.readlink(path_text))}); give the log file itself"
        hint = " (to read standard input, use `advisor suggest -`)" if path_text == "-" else ""
        return f"{name}: no such file; check the path{hint}"
    return f"{name}: cannot open ({exc.strerror or exc}); check the path"


def sniff(stream: BinaryIO, name: str, _depth: int = 0) -> BinaryIO:
    """Refuse binary data early, with a clear message, without reading the stream twice.

    A gzip stream is decompressed (a `.gz` file, or one piped in), and a UTF-16 or UTF-32 log with
    a byte-order mark (PowerShell's `>` writes UTF-16) is read as UTF-8, both as they stream."""
    from advisor.reader import looks_binary

    try:
        head = _read_all(stream, HEAD)
        hole = 0
        while head and not head.strip(b"\x00") and hole < MAX_HOLE:
            hole += len(head)  # a hole of NULs: its bytes carry no text, skip them
            head = _read_all(stream, HEAD)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{name}: cannot read ({exc}); check that the file is complete (a .gz still being written?)") from None
    if _depth < _UNWRAP and head[:2] == b"\x1f\x8b":
        return sniff(gzip.GzipFile(fileobj=Prepend(head, stream, name), mode="rb"), name, _depth + 1)
    for bom, codec in _BOMS:
        if _depth < _UNWRAP and head.startswith(bom):
            return sniff(Transcode(Prepend(head, stream, name), codec), name, _depth + 1)
    if head.startswith(codecs.BOM_UTF8):
        head = head[len(codecs.BOM_UTF8):]
    if looks_binary(head.lstrip(b"\x00")) or head and not head.strip(b"\x00"):
        if _utf16_without_bom(head):
            raise InputError(f"{name}: looks like UTF-16 text without a byte-order mark; convert it first: "
                             "`iconv -f UTF-16LE -t UTF-8 FILE > log.txt`")
        raise InputError(f"{name}: looks like binary data, not a text log (an archive? a core dump?); give the text log the job printed")
    return Prepend(head, stream, name)


def _utf16_without_bom(head: bytes) -> bool:
    """ASCII text in UTF-16: nearly every other byte a NUL, the bytes between them not."""
    sample = head[:4096]
    odd, even = sample[1::2], sample[0::2]
    return len(sample) >= 64 and (odd.count(0) > 0.9 * len(odd) > even.count(0) * 10 or even.count(0) > 0.9 * len(even) > odd.count(0) * 10)


def _read_all(stream: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes: a pipe or a raw stream may return fewer per read before its end."""
    parts: list[bytes] = []
    got = 0
    while got < size:
        data = stream.read(size - got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


class Prepend(io.RawIOBase):
    """A stream that first returns `head`, then the rest of `stream`.

    A read that fails part-way (a truncated or corrupt .gz, an I/O error) raises `InputError`.
    `blank` stays True while everything read so far was blank space (or NULs)."""

    def __init__(self, head: bytes, stream: BinaryIO, name: str = "the log"):
        self._head = head
        self._stream = stream
        self._name = name
        self._done = 0
        self.blank = True

    def read(self, size: int | None = -1) -> bytes:
        data = self._read(size)
        if self.blank and data:
            self.blank = not data.strip(_BLANK)
        return data

    def readable(self) -> bool:
        return True

    def _read(self, size: int | None) -> bytes:
        if self._head:
            if size is None or size < 0 or size >= len(self._head):
                data, self._head = self._head, b""
                self._done += len(data)
                rest = self._read_stream(-1 if size is None or size < 0 else size - len(data))
                data += rest
            else:
                data, self._head = self._head[:size], self._head[size:]
                self._done += len(data)
            return data
        return self._read_stream(size)

    def _read_stream(self, size: int | None) -> bytes:
        if size == 0:
            return b""
        try:
            data = self._stream.read(size) or b""
            self._done += len(data)
            return data
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputError(
                f"{self._name}: the compressed data breaks off after {self._done:,} bytes ({exc}); "
                "decompress what is there with `gzip -dc FILE > part.log` and give --log part.log"
            ) from None
        except OSError as exc:
            raise InputError(f"{self._name}: cannot read on after {self._done:,} bytes ({exc.strerror or exc})") from None

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            super().close()


class Transcode(io.RawIOBase):
    """A UTF-16 or UTF-32 byte stream (with its byte-order mark) as UTF-8, decoded as it is read."""

    def __init__(self, stream: BinaryIO, codec: str):
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder(codec)(errors="replace")
        self._buffer = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        want = None if size is None or size < 0 else size
        while not self._eof and (want is None or len(self._buffer) < want):
            raw = self._stream.read(1 << 20 if want is None else max(want, 4096))
            self._eof = not raw
            self._buffer += self._decoder.decode(raw or b"", final=self._eof).encode("utf-8", "replace")
        if want is None:
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:want], self._buffer[want:]
        return data

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            super().close()
