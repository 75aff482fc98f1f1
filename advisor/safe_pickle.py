"""A restricted unpickler for data files from strangers (Flight Recorder dumps).

`pickle.load` on untrusted bytes runs code: a GLOBAL opcode names any callable and REDUCE calls
it. The usual defence, a `pickle.Unpickler` whose `find_class` refuses, stops that but not a
resource attack on CPython's C unpickler: an 11-byte pickle whose LONG_BINPUT names memo slot
100,000,000 makes it allocate and zero a 1.6 GB memo table (its memo is an array grown to twice
the largest index seen). This module therefore interprets the opcodes itself: only the ones that
build builtin containers and scalars (dict, list, tuple, set, str, bytes, int, float, bool, None)
are known; the memo is a dict with a bounded number of entries; every object counts against a
budget, strings and integers have length caps, and the nesting of the result is checked. Anything
else (GLOBAL, REDUCE, BUILD, PERSID, EXT*, ...) is refused by name, without importing anything.

torch writes its dumps with its own pickler (protocol 2: EMPTY_DICT, MARK, SETITEMS, BINUNICODE,
BININT*, LONG1, BINFLOAT, TUPLE2, BINPUT/BINGET, NEWTRUE/NEWFALSE, NONE), a subset of what is read
here; protocols 0-5 are accepted for data written by Python's own pickle.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any


class UnsafePickle(ValueError):
    """The bytes are not a pickle of plain data, or exceed a limit; the message says which."""


@dataclass(frozen=True)
class Limits:
    max_objects: int = 4_000_000
    """objects created (every scalar and container counts): bounds time and memory."""
    max_memo: int = 1_000_000
    """distinct memo slots."""
    max_str: int = 1 << 20
    """bytes in one string."""
    max_long_bytes: int = 16
    """bytes in one LONG1/LONG4 integer (a 64-bit value needs 9)."""
    max_depth: int = 32
    """nesting of containers in the result (a Flight Recorder dump nests 5 deep)."""


DEFAULT = Limits()

# opcodes that reach for code or outside state: refused by name
_REFUSED = {
    b"c": "GLOBAL", b"\x93": "STACK_GLOBAL", b"R": "REDUCE", b"b": "BUILD", b"i": "INST", b"o": "OBJ",
    b"\x81": "NEWOBJ", b"\x92": "NEWOBJ_EX", b"P": "PERSID", b"Q": "BINPERSID", b"\x82": "EXT1",
    b"\x83": "EXT2", b"\x84": "EXT4", b"\x97": "NEXT_BUFFER", b"\x98": "READONLY_BUFFER",
}
_SCALARS = (str, int, float, bytes, type(None))


def loads(data: bytes, limits: Limits = DEFAULT) -> Any:
    """The object in `data`, built from plain-data opcodes only; raises `UnsafePickle`."""
    return RestrictedUnpickler(data, limits).load()


class RestrictedUnpickler:
    """Reads one pickle; `find_class` refuses everything (there is no class a dump needs).

    The loop dispatches on the opcode byte, the commonest opcodes of torch's dumps first (memo
    reads and writes, lists, small integers). It runs about 15 times slower than CPython's C
    unpickler (0.17 s for a 2,000-entry dump with 30-frame stacks, 0.6 MB): the price of owning
    every allocation."""

    def __init__(self, data: bytes, limits: Limits = DEFAULT):
        self.data = bytes(data)
        self.limits = limits
        self.pos = 0

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickle(f"refuses to load {module[:80]}.{name[:80]}: only plain data (dicts, lists, "
                           "strings, numbers) is read, never code or classes")

    def load(self) -> Any:  # noqa: C901 - one loop is the fast way to interpret opcodes in Python
        data = self.data
        end = len(data)
        limits = self.limits
        max_objects, max_memo, max_str = limits.max_objects, limits.max_memo, limits.max_str
        stack: list[Any] = []
        marks: list[int] = []
        memo: dict[int, Any] = {}
        objects = 0
        pos = 0
        unpack_from = struct.unpack_from

        def fail(message: str) -> UnsafePickle:
            return UnsafePickle(message)

        def need(n: int) -> None:
            if pos + n > end:
                raise fail(f"truncated: the data ends inside an opcode at byte {pos:,} of {end:,}")

        def line() -> bytes:
            nonlocal pos
            stop = data.find(b"\n", pos, pos + 4096)
            if stop < 0:
                raise fail(f"truncated or malformed: a text argument at byte {pos:,} has no end")
            text = data[pos:stop]
            pos = stop + 1
            return text

        def pop_mark() -> list[Any]:
            if not marks:
                raise fail(f"malformed: a MARK is missing before byte {pos:,}")
            start = marks.pop()
            items = stack[start:]
            del stack[start:]
            return items

        def pop() -> Any:
            if not stack or (marks and marks[-1] >= len(stack)):
                raise fail(f"malformed: a value is missing at byte {pos:,}")
            return stack.pop()

        def top() -> Any:
            if not stack:
                raise fail(f"malformed: the stack is empty at byte {pos:,}")
            return stack[-1]

        def setitems(target: Any, items: list[Any]) -> None:
            if type(target) is not dict or len(items) % 2:
                raise fail(f"malformed: SETITEMS on a {type(target).__name__} at byte {pos:,}")
            for i in range(0, len(items), 2):
                key = items[i]
                if not isinstance(key, _SCALARS):  # a nested tuple key would hash recursively in C
                    raise fail(f"a dict key that is not a string or number at byte {pos:,}")
                target[key] = items[i + 1]

        def string(n: int, codec: str) -> Any:
            nonlocal pos
            if n > max_str:
                raise fail(f"a string of {n:,} bytes at byte {pos:,} (the limit is {max_str:,})")
            need(n)
            raw = data[pos:pos + n]
            pos += n
            if codec == "utf-8":
                return raw.decode("utf-8", "replace")
            return raw.decode("latin-1") if codec == "latin-1" else raw

        def long(n: int) -> int:
            nonlocal pos
            if n < 0 or n > limits.max_long_bytes:
                raise fail(f"an integer of {n:,} bytes at byte {pos:,}: too large to be a count or a time")
            need(n)
            value = int.from_bytes(data[pos:pos + n], "little", signed=True)
            pos += n
            return value

        def text_int(text: bytes) -> int | bool:
            if text in (b"00", b"01"):
                return text == b"01"
            body = text.strip().rstrip(b"L")
            digits = body.lstrip(b"+-")
            if len(digits) > 40 or not digits.isdigit():
                raise fail(f"a malformed or oversized integer at byte {pos:,}")
            return int(body)

        def put(index: int) -> None:
            if index not in memo and len(memo) >= max_memo:
                raise fail(f"too many memo entries (over {max_memo:,})")
            memo[index] = top()

        def get(index: int) -> Any:
            try:
                return memo[index]
            except KeyError:
                raise fail(f"malformed: memo slot {index} is read before it is written (byte {pos:,})") from None

        while True:
            if pos >= end:
                raise fail(f"truncated: the data ends after {end:,} bytes, before the pickle's STOP")
            op = data[pos]
            pos += 1
            objects += 1
            if objects > max_objects:
                raise fail(f"too many objects (over {max_objects:,}): not a dump this tool reads")
            if op == 0x68:  # h BINGET
                need(1)
                stack.append(get(data[pos]))
                pos += 1
            elif op == 0x6A:  # j LONG_BINGET
                need(4)
                stack.append(get(unpack_from("<I", data, pos)[0]))
                pos += 4
            elif op == 0x72:  # r LONG_BINPUT
                need(4)
                put(unpack_from("<I", data, pos)[0])
                pos += 4
            elif op == 0x71:  # q BINPUT
                need(1)
                put(data[pos])
                pos += 1
            elif op == 0x94:  # MEMOIZE
                put(len(memo))
            elif op == 0x5D:  # ] EMPTY_LIST
                stack.append([])
            elif op == 0x4D:  # M BININT2
                need(2)
                stack.append(data[pos] | data[pos + 1] << 8)
                pos += 2
            elif op == 0x4B:  # K BININT1
                need(1)
                stack.append(data[pos])
                pos += 1
            elif op == 0x28:  # ( MARK
                marks.append(len(stack))
            elif op == 0x61:  # a APPEND
                value = pop()
                target = top()
                if type(target) is not list:
                    raise fail(f"malformed: APPEND to a {type(target).__name__} at byte {pos:,}")
                target.append(value)
            elif op == 0x65:  # e APPENDS
                items = pop_mark()
                target = top()
                if type(target) is not list:
                    raise fail(f"malformed: APPENDS to a {type(target).__name__} at byte {pos:,}")
                target.extend(items)
            elif op == 0x58:  # X BINUNICODE
                need(4)
                n = unpack_from("<I", data, pos)[0]
                pos += 4
                stack.append(string(n, "utf-8"))
            elif op == 0x8C:  # SHORT_BINUNICODE
                need(1)
                n = data[pos]
                pos += 1
                stack.append(string(n, "utf-8"))
            elif op == 0x75:  # u SETITEMS
                items = pop_mark()
                setitems(top(), items)
            elif op == 0x7D:  # } EMPTY_DICT
                stack.append({})
            elif op == 0x4A:  # J BININT
                need(4)
                stack.append(unpack_from("<i", data, pos)[0])
                pos += 4
            elif op == 0x8A:  # LONG1
                need(1)
                n = data[pos]
                pos += 1
                stack.append(long(n))
            elif op == 0x86:  # TUPLE2
                if len(stack) - (marks[-1] if marks else 0) < 2:
                    raise fail(f"malformed: TUPLE2 on a short stack at byte {pos:,}")
                b = stack.pop()
                stack[-1] = (stack[-1], b)
            elif op == 0x4E:  # N NONE
                stack.append(None)
            elif op == 0x88:  # NEWTRUE
                stack.append(True)
            elif op == 0x89:  # NEWFALSE
                stack.append(False)
            elif op == 0x47:  # G BINFLOAT
                need(8)
                stack.append(unpack_from(">d", data, pos)[0])
                pos += 8
            elif op == 0x73:  # s SETITEM
                value = pop()
                key = pop()
                setitems(top(), [key, value])
            elif op == 0x80:  # PROTO
                need(1)
                pos += 1
            elif op == 0x95:  # FRAME
                need(8)
                pos += 8
            elif op == 0x2E:  # . STOP
                if len(stack) != 1 or marks:
                    raise fail("malformed: the pickle ends with a stack that is not exactly one value")
                check_shape(stack[0], limits.max_depth, max_objects * 2)
                return stack[0]
            elif op == 0x30:  # 0 POP
                pop()
            elif op == 0x31:  # 1 POP_MARK
                pop_mark()
            elif op == 0x32:  # 2 DUP
                stack.append(top())
            elif op == 0x8B:  # LONG4
                need(4)
                n = unpack_from("<i", data, pos)[0]
                pos += 4
                stack.append(long(n))
            elif op in (0x49, 0x4C):  # I INT, L LONG (protocol 0)
                stack.append(text_int(line()))
            elif op == 0x46:  # F FLOAT (protocol 0)
                text = line()
                try:
                    value = float(text) if len(text) < 64 else None
                except ValueError:
                    value = None
                if value is None:
                    raise fail(f"a malformed float at byte {pos:,}")
                stack.append(value)
            elif op == 0x8D:  # BINUNICODE8
                need(8)
                n = unpack_from("<Q", data, pos)[0]
                pos += 8
                stack.append(string(n, "utf-8"))
            elif op == 0x56:  # V UNICODE (protocol 0)
                stack.append(line().decode("raw_unicode_escape", "replace"))
            elif op in (0x54, 0x42):  # T BINSTRING (py2 str), B BINBYTES
                need(4)
                n = unpack_from("<i" if op == 0x54 else "<I", data, pos)[0]
                pos += 4
                stack.append(string(n, "latin-1" if op == 0x54 else "bytes"))
            elif op in (0x55, 0x43):  # U SHORT_BINSTRING, C SHORT_BINBYTES
                need(1)
                n = data[pos]
                pos += 1
                stack.append(string(n, "latin-1" if op == 0x55 else "bytes"))
            elif op == 0x8E:  # BINBYTES8
                need(8)
                n = unpack_from("<Q", data, pos)[0]
                pos += 8
                stack.append(string(n, "bytes"))
            elif op == 0x64:  # d DICT
                items = pop_mark()
                target: dict = {}
                setitems(target, items)
                stack.append(target)
            elif op == 0x6C:  # l LIST
                stack.append(pop_mark())
            elif op == 0x29:  # ) EMPTY_TUPLE
                stack.append(())
            elif op == 0x74:  # t TUPLE
                stack.append(tuple(pop_mark()))
            elif op in (0x85, 0x87):  # TUPLE1, TUPLE3
                n = op - 0x84
                if len(stack) - (marks[-1] if marks else 0) < n:
                    raise fail(f"malformed: TUPLE{n} on a short stack at byte {pos:,}")
                items = stack[-n:]
                del stack[-n:]
                stack.append(tuple(items))
            elif op == 0x8F:  # EMPTY_SET
                stack.append(set())
            elif op in (0x90, 0x91):  # ADDITEMS, FROZENSET
                items = pop_mark()
                if not all(isinstance(item, _SCALARS) for item in items):
                    raise fail(f"malformed: a set item that is not a string or number at byte {pos:,}")
                if op == 0x91:
                    stack.append(frozenset(items))
                else:
                    target = top()
                    if type(target) is not set:
                        raise fail(f"malformed: ADDITEMS to a {type(target).__name__} at byte {pos:,}")
                    target.update(items)
            elif op == 0x70:  # p PUT (protocol 0)
                text = line()
                if not text.isdigit() or len(text) > 12:
                    raise fail(f"malformed: a PUT index at byte {pos:,}")
                put(int(text))
            elif op == 0x67:  # g GET (protocol 0)
                text = line()
                if not text.isdigit() or len(text) > 12:
                    raise fail(f"malformed: a GET index at byte {pos:,}")
                stack.append(get(int(text)))
            elif op == 0x63:  # c GLOBAL: read the names to say what was asked for, import nothing
                module = line().decode("utf-8", "replace")
                name = line().decode("utf-8", "replace")
                self.pos = pos
                self.find_class(module, name)
            elif bytes((op,)) in _REFUSED:
                raise fail(f"refuses the {_REFUSED[bytes((op,))]} opcode at byte {pos - 1:,}: it would build "
                           "objects or call code; a dump holds only dicts, lists, strings and numbers")
            else:
                raise fail(f"not a pickle of plain data: unknown opcode 0x{op:02x} at byte {pos - 1:,}")


def check_shape(value: Any, max_depth: int, max_nodes: int) -> None:
    """Refuse a result that nests deeper than `max_depth`, contains itself, or expands past
    `max_nodes` values when walked as a tree: memo references can share one container many times
    (a list of two references to a list of two references to ... doubles per level), and whoever
    walks the result must not pay for that. A container seen again is walked again only when it now
    sits deeper than before (at most `max_depth` times): the work stays linear in the data."""
    checked: dict[int, int] = {}  # id -> the deepest depth it passed at
    on_path: set[int] = set()
    budget = [max_nodes]

    def walk(item: Any, depth: int) -> None:
        kind = type(item)
        if kind is not dict and kind is not list and kind is not tuple:
            return
        key = id(item)
        if key in on_path:
            raise UnsafePickle("the data contains itself (a reference cycle): not a dump this tool reads")
        if depth >= max_depth:
            raise UnsafePickle(f"nested deeper than {max_depth} levels: not a dump this tool reads")
        if checked.get(key, -1) >= depth:
            return
        checked[key] = depth
        budget[0] -= len(item)
        if budget[0] < 0:
            raise UnsafePickle(f"the data expands to over {max_nodes:,} values (shared references): refused")
        on_path.add(key)
        for child in (item.values() if kind is dict else item):
            walk(child, depth + 1)
        on_path.discard(key)

    walk(value, 0)
