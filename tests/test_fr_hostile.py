"""Hostile Flight Recorder dumps (tests/hostile/dumps.py) through the reader, the CLI, the HTTP API
and, for the resource attacks, the real console script under a memory ceiling.

Nothing runs code from a dump, nothing hangs, nothing prints a traceback; a file that cannot be a
dump is one line naming it (exit 3); an empty, cut or recorder-off dump is a finding and the
diagnosis goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.fr_dumps import DumpError, parse_dump_bytes, read_dumps
from helpers import FIXTURES, hang_guard, run_cli
from hostile.dumps import CASES, LISTING, DumpCase, listing

HANG_S = 60
MEMORY_CEILING_MIB = 400
"""peak RSS of the console script on a resource attack (the 64 MiB gunzip cap included); CPython's
own unpickler needs 1.6 GB for the 11-byte memo attack's smaller sibling (slot 100,000,000)."""
EXE = shutil.which("advisor", path=os.path.dirname(sys.executable)) or "advisor"
STRAGGLER = FIXTURES / "flight_recorder" / "gloo-2.13" / "straggler" / "pickle"
OWNED = Path("/tmp/advisor-owned")


def ids(cases):
    return [c.id for c in cases]


def write(case: DumpCase, folder: Path) -> Path:
    path = folder / case.name
    path.write_bytes(case.make(folder))
    return path


def test_listing_is_current():
    assert LISTING.read_text(encoding="utf-8") == listing(), "run: python tests/hostile/dumps.py --write"


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_reader(tmp_path, case):
    data = case.make(tmp_path)
    OWNED.unlink(missing_ok=True)
    with hang_guard(HANG_S):
        if case.outcome == "error":
            with pytest.raises(DumpError) as caught:
                parse_dump_bytes(data, 0, case.name)
            message = str(caught.value)
            assert message.startswith(case.name.encode("unicode_escape").decode("ascii")) or "\\x1b" in message
            assert "\x1b" not in message
            for phrase in case.says:
                assert phrase in message, message
        else:
            dump = parse_dump_bytes(data, 0, case.name)
            told = (dump.problem or "") + " ".join(dump.notes)
            assert bool(dump.problem) == (case.outcome == "finding"), told
            for phrase in case.says:
                assert phrase in told, told
    assert not OWNED.exists(), "code from a dump ran"


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_cli_beside_real_dumps(tmp_path, case):
    """The hostile file as rank 0 of a real job's dumps: an error stops with the file named; a
    finding leaves the other ranks' analysis standing."""
    for f in STRAGGLER.iterdir():
        if not f.name.endswith("_0"):
            shutil.copy(f, tmp_path / f.name)
    write(case, tmp_path)
    with hang_guard(HANG_S):
        r = run_cli("suggest", "--dumps", str(tmp_path), "--json")
    assert "Traceback" not in r.err and "\x1b" not in r.err
    if case.outcome == "error":
        assert r.code == 3 and r.out == "" and r.err.count("\n") == 1, r.err
    else:
        assert r.code in (0, 1), r.err
        fr = r.json["flight_recorder"]
        assert {1, 2, 3} <= set(fr["ranks_dumped"])
        if case.outcome == "finding":
            assert 0 in fr["ranks_missing"]


def test_api_refuses_what_the_json_reader_refuses():
    from fastapi.testclient import TestClient

    from advisor.api import Settings, create_app

    client = TestClient(create_app(settings=Settings()), raise_server_exceptions=False)
    for trace in ({"entries": "x"}, {"version": ["a"] * 5, "entries": [1, None, "x", {"process_group": {}}]},
                  {"version": "2.10", "pg_config": {"0": {"ranks": "[" + "9999999," * 1000 + "]"}}, "entries": []}):
        r = client.post("/v1/diagnose", json={"dumps": [{"rank": 0, "trace": trace}]})
        assert r.status_code in (200, 422), r.text
        assert "Traceback" not in r.text


MEASURE = """\
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[2:], capture_output=True, timeout=float(sys.argv[1]))
json.dump({"code": done.returncode, "err": done.stderr.decode("utf-8", "replace"),
           "maxrss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}, sys.stdout)
"""

CONSOLE = [c for c in CASES if c.console]


@pytest.mark.parametrize("case", CONSOLE, ids=ids(CONSOLE))
def test_console_script_memory(tmp_path, case):
    path = write(case, tmp_path)
    done = subprocess.run([sys.executable, "-c", MEASURE, str(HANG_S), EXE, "suggest", "--dumps", str(path), "--json"],
                          capture_output=True, timeout=HANG_S + 30)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    result = json.loads(done.stdout)
    assert "Traceback" not in result["err"]
    assert result["code"] == (3 if case.outcome == "error" else result["code"]) and result["code"] in (0, 1, 3)
    assert result["maxrss_mib"] < MEMORY_CEILING_MIB, f"peak memory {result['maxrss_mib']:.0f} MiB"


def test_a_folder_of_many_files_is_bounded(tmp_path):
    for i in range(4100):
        (tmp_path / f"rank_{i}").write_bytes(b"")
    with pytest.raises(DumpError, match="over 4096 dump files"):
        read_dumps([str(tmp_path)])


def test_a_fifo_named_like_a_dump_is_never_opened(tmp_path):
    fifo = tmp_path / "nccl_trace_rank_0"
    os.mkfifo(fifo)
    with hang_guard(10):
        with pytest.raises(DumpError, match="no files|no dump files"):
            read_dumps([str(tmp_path)])
        with pytest.raises(DumpError, match="not a regular file"):
            read_dumps([str(fifo)])
