"""The restricted unpickler: plain data in, nothing else; no code, no import, no resource blow-up."""

from __future__ import annotations

import os
import pickle
import struct
import sys
import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.safe_pickle import Limits, UnsafePickle, loads
from helpers import FIXTURES

DUMPS = FIXTURES / "flight_recorder"


def test_reads_torchs_own_dumps_exactly_as_pickle_does():
    files = sorted(p for p in DUMPS.glob("gloo-*/*/pickle/*") if p.is_file())
    assert len(files) >= 10
    for path in files:
        data = path.read_bytes()
        assert loads(data) == pickle.loads(data), path  # trusted fixtures: pickle.loads only to compare


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo owned",))


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_refuses_a_callable_at_every_protocol(protocol):
    with pytest.raises(UnsafePickle, match="refuses"):
        loads(pickle.dumps(_Evil(), protocol=protocol))


@pytest.mark.parametrize("payload, opcode", [
    (b"\x80\x02(cbuiltins\nlist\no.", "refuses to load builtins.list"),  # OBJ after a GLOBAL
    (b"(ibuiltins\nlist\n.", "INST"),
    (b"\x80\x02P1\n.", "PERSID"),
    (b"\x80\x02N\x85Q.", "BINPERSID"),
    (b"\x80\x02\x82\x01.", "EXT1"),
    (b"\x80\x02}}b.", "BUILD"),
    (b"\x80\x02)}\x81.", "NEWOBJ"),
    (b"\x80\x05\x97.", "NEXT_BUFFER"),
])
def test_refuses_every_opcode_that_reaches_for_code(payload, opcode):
    with pytest.raises(UnsafePickle, match=opcode):
        loads(payload)


def test_a_global_is_named_but_never_imported():
    assert "antigravity" not in sys.modules
    with pytest.raises(UnsafePickle, match="antigravity.fly"):
        loads(b"\x80\x02cantigravity\nfly\n)R.")
    assert "antigravity" not in sys.modules


def test_a_huge_memo_index_allocates_nothing():
    # CPython's C unpickler grows its memo array to twice the largest index: this 11-byte pickle
    # makes it allocate and zero 1.6 GB (index 1e8), or fail with MemoryError at 2**31
    payload = b"\x80\x02N" + b"r" + struct.pack("<I", 2**31 - 1) + b"."
    tracemalloc.start()
    try:
        assert loads(payload) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("payload, says", [
    (b"\x80\x02" + b"N\x94" * 1_100_000 + b".", "too many memo entries"),
    (b"\x80\x02]q\x00h\x00a.", "contains itself"),
    (b"\x80\x02" + b"]" * 100 + b"a" * 99 + b".", "nested deeper"),
    (b"\x80\x02}N" + b"\x85" * 50 + b"Ns.", "dict key"),
    (b"\x80\x02\x8f(N\x85\x90.", "set item"),
    (b"\x80\x02X\xff\xff\xff\xff" + b"a" * 10 + b".", "4,294,967,295 bytes"),
    (b"\x80\x02\x8b\x00\x00\x00\x10" + b"\x01" * 16 + b".", "integer of 268,435,456 bytes"),
    (b"\x80\x02I" + b"9" * 3000 + b"\n.", "oversized integer"),
    (b"\x80\x02I" + b"9" * 5000 + b"\n.", "has no end"),
    (pickle.dumps({"a": [1, 2, 3]}, protocol=2)[:-4], "truncated"),
    (b"\x80\x02N", "truncated"),
    (b"\x80\x02NN.", "not exactly one value"),
    (b"\x80\x02a.", "missing"),
    (b"\x80\x02h\x05.", "read before it is written"),
    (b"\x80\x02\xff.", "unknown opcode 0xff"),
])
def test_malformed_and_oversized_input_is_refused_by_name(payload, says):
    with pytest.raises(UnsafePickle, match=says):
        loads(payload)


def test_shared_references_that_double_per_level_stay_cheap():
    # level n is a list of two references to level n-1: 2**30 leaves as a tree, 31 lists in memory
    levels = 30
    body = b"0".join(b"](h%ch%ceq%c" % (i, i, i + 1) for i in range(levels))  # each level popped once memoized
    payload = b"\x80\x02]q\x000" + body + b"."
    started = time.perf_counter()
    value = loads(payload)
    assert time.perf_counter() - started < 5  # a hang guard, not a benchmark: linear work is milliseconds
    depth = 0
    while value:
        value, depth = value[0], depth + 1
    assert depth == levels


def test_the_object_budget_bounds_work():
    payload = b"\x80\x02]" + b"(" + b"N" * 5000 + b"e."
    with pytest.raises(UnsafePickle, match="too many objects"):
        loads(payload, Limits(max_objects=1000))
    assert loads(payload) == [None] * 5000


_plain = st.recursive(  # no bytes: protocols 0-2 pickle them as a call to codecs.encode, refused
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=10) | st.integers(), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=int(os.environ.get("ADVISOR_FUZZ_EXAMPLES", "120")), derandomize=True, deadline=None)
@given(value=_plain, protocol=st.integers(min_value=0, max_value=5))
def test_plain_data_round_trips_at_every_protocol(value, protocol):
    assert loads(pickle.dumps(value, protocol=protocol)) == value


@settings(max_examples=int(os.environ.get("ADVISOR_FUZZ_EXAMPLES", "120")), derandomize=True, deadline=None)
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_either_load_or_are_refused(data):
    try:
        loads(b"\x80\x02" + data)
    except UnsafePickle:
        pass
