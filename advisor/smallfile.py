"""Reading a small text file a user names (a training config, an env snapshot) without surprises.

Configs and snapshots are kilobytes. A path to a directory, a device, a FIFO, a 2 GB file, an
image or a UTF-16 file gets a one-line `InputError` that says what is wrong and what to give
instead, never a traceback and never a hang.
"""

from __future__ import annotations

import codecs
import os
import stat

from advisor.inputs import InputError, shown


def read_text_file(path_text: str, what: str, limit: int) -> str:
    """The file's text (UTF-8, a BOM dropped); raises InputError with the reason otherwise."""
    name = shown(path_text)
    if not path_text:
        raise InputError(f"the {what} file name is empty: give the path of a {what} file")
    try:
        st = os.stat(path_text)
    except ValueError:
        raise InputError(f"{name}: not a valid file name (it contains a NUL byte); check the path") from None
    except OSError as exc:
        reason = "no such file" if not os.path.lexists(path_text) else (exc.strerror or str(exc)).lower()
        if os.path.islink(path_text) and not os.path.exists(path_text):
            reason = "a symbolic link to a missing file or a loop of links"
        raise InputError(f"{name}: {reason}; check the path of the {what} file") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{name}: is a directory; give the {what} file itself")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{name}: is not a regular file (a device, pipe or socket); save the {what} to a file and give its path")
    if st.st_size > limit:
        raise InputError(f"{name}: {st.st_size:,} bytes is too big for a {what} (the limit is {limit:,}); "
                         f"is this the right file?")
    try:
        with open(path_text, "rb") as handle:
            data = handle.read(limit + 1)
    except PermissionError:
        raise InputError(f"{name}: permission denied; make the {what} file readable") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror or exc}); check the path") from None
    if len(data) > limit:
        raise InputError(f"{name}: over {limit:,} bytes is too big for a {what}; is this the right file?")
    return decode_text(data, name, what)


def decode_text(data: bytes, name: str, what: str) -> str:
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InputError(f"{name}: the {what} is UTF-16; convert it to UTF-8 (`iconv -f UTF-16 -t UTF-8 FILE > new`)")
    if b"\x00" in data:
        raise InputError(f"{name}: binary data (NUL bytes), not a {what}; give the {what} file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{name}: not UTF-8 text (bad byte at line {line}); is this a {what}? save it as UTF-8") from None
    if not text.strip():
        raise InputError(f"{name}: the {what} file is empty; check the path")
    return text
