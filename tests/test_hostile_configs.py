"""Hostile configs and env snapshots (tests/hostile/configs.py, listed in tests/hostile/CONFIGS.md)
through `advisor preflight` and `advisor suggest --env`: the documented exit code, a one-line
message that says what is wrong, no traceback, no hang, and nothing from the file executed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import hang_guard
from hostile.configs import BY_ID, CASES, LISTING, listing

HANG_GUARD_S = 60
WATCHDOG = ("[rank1]:[E217 14:55:02.441 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=38, OpType=_ALLGATHER_BASE, NumelIn=9510912, NumelOut=38043648, Timeout(ms)=1800000) "
            "ran for 1800033 milliseconds before timing out.")


def test_listing_is_current():
    assert LISTING.read_text(encoding="utf-8") == listing(), "regenerate it: python tests/hostile/configs.py --write"


def _args(case, path: str) -> list[str]:
    return ["--env", path] if case.env else ["--config", path]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_preflight(cli, tmp_path, case):
    path = case.make(tmp_path)
    with hang_guard(HANG_GUARD_S):
        result = cli("preflight", "--no-local-env", *_args(case, path), "--color", "never")
    assert result.code in case.exit, (result.code, result.err[-500:])
    assert "Traceback" not in result.err + result.out
    if result.code == 3:
        message = result.err.strip()
        assert message.count("\n") == 0, message
        for phrase in case.says:
            assert phrase in message, (phrase, message)
    assert "\x1b" not in result.out and "\x07" not in result.out
    assert not (tmp_path / "PWNED").exists() and not (tmp_path.parent / "PWNED").exists()


@pytest.mark.parametrize("case", [c for c in CASES if c.env], ids=[c.id for c in CASES if c.env])
def test_suggest_env(cli, tmp_path, case):
    path = case.make(tmp_path)
    with hang_guard(HANG_GUARD_S):
        result = cli("suggest", "--error", WATCHDOG, "--env", path)
    assert result.code in ({3} if 3 in case.exit else {0, 1}) and "Traceback" not in result.err
    assert "\x1b" not in result.out


def test_side_effects_never_run(tmp_path, cli):
    path = BY_ID["python-side-effects"].make(tmp_path)
    result = cli("preflight", "--no-local-env", "--config", path + ":llama3_70b_pwn", "--json")
    assert result.code == 1 and not (tmp_path / "PWNED").exists()
    assert [f["id"] for f in result.json["findings"]] == ["save-timeout-too-short"]  # still read: a 70 B model


def test_escapes_from_a_snapshot_are_shown_escaped(cli, tmp_path):
    path = BY_ID["env-escapes"].make(tmp_path)
    result = cli("preflight", "--env", path, "--color", "never")
    assert result.code == 1 and "\\x1b[2J" in result.out and "\x1b" not in result.out


SUBPROCESS_SAMPLE = ["yaml-bomb", "yaml-deep-nesting", "json-deep-nesting", "toml-deep", "python-deep-nesting", "fifo", "env-huge"]


@pytest.mark.parametrize("case_id", SUBPROCESS_SAMPLE)
def test_console_script(tmp_path, case_id):
    case = BY_ID[case_id]
    path = case.make(tmp_path)
    done = subprocess.run([sys.executable, "-m", "advisor", "preflight", "--no-local-env", *_args(case, path)],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode in case.exit and "Traceback" not in done.stderr, done.stderr[-2000:]
