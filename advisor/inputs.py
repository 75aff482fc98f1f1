"""Opening what a user hands the advisor: a file (plain or gzip), a pipe, standard input.

Shared by the CLI and the TUI. Every refusal is an `InputError` whose message says what is wrong
and what to do instead; binary data is refused after reading one block, not after streaming it all.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import BinaryIO


class InputError(Exception):
    """A log we cannot read; the message says what to do instead."""


def open_log(path_text: str) -> tuple[BinaryIO, int | None]:
    path = Path(path_text)
    if not path.exists():
        raise InputError(f"{path_text}: no such file")
    if path.is_dir():
        raise InputError(f"{path_text}: is a directory; give one log file (concatenate ranks with `cat {path_text}/* > all.log`)")
    try:
        handle = path.open("rb")
    except PermissionError:
        raise InputError(f"{path_text}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path_text}: cannot open ({exc.strerror or exc})") from None
    regular = path.is_file()
    size = path.stat().st_size if regular else None  # a pipe or /dev/stdin has no size
    if size == 0:
        handle.close()
        raise InputError(f"{path_text}: the file is empty")
    head = handle.peek(2)[:2] if hasattr(handle, "peek") else b""
    if head == b"\x1f\x8b":
        return sniff(gzip.GzipFile(fileobj=handle), path_text), size
    return sniff(handle, path_text), size


def sniff(stream: BinaryIO, name: str) -> BinaryIO:
    """Refuse binary data early, with a clear message, without reading the stream twice."""
    from advisor.reader import looks_binary

    try:
        head = stream.read(65536)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"{name}: cannot read ({exc})") from None
    if looks_binary(head):
        raise InputError(f"{name}: looks like binary data, not a text log (an archive? a core dump?)")
    return Prepend(head, stream)


class Prepend(io.RawIOBase):
    """A stream that first returns `head`, then the rest of `stream`."""

    def __init__(self, head: bytes, stream: BinaryIO):
        self._head = head
        self._stream = stream

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._head:
            if size is None or size < 0 or size >= len(self._head):
                data, self._head = self._head, b""
                rest = self._stream.read(-1 if size is None or size < 0 else size - len(data))
                return data + (rest or b"")
            data, self._head = self._head[:size], self._head[size:]
            return data
        return self._stream.read(size) or b""

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            super().close()


