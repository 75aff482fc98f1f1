"""Guided questions: the simulated dialogue over the founding scenarios (and the shared cases when
they are beside the checkout), and --interactive in a pty."""

from __future__ import annotations

import os
import pty
import statistics
import sys

import pytest
import yaml

from helpers import benchmark_module, case_paths, read_until, scenario_paths

dialogue = benchmark_module("dialogue")


@pytest.mark.parametrize("path", scenario_paths(), ids=lambda p: p.stem)
def test_dialogue_settles_each_founding_scenario(kb, path):
    row = dialogue.simulate(yaml.safe_load(path.read_text(encoding="utf-8")), kb)
    assert row["correct"], row
    assert len(row["asked"]) == len(set(row["asked"])), row  # no question asked twice


def test_dialogue_meets_the_target(kb):
    paths = case_paths()
    if not paths:
        pytest.skip("no shared cases")
    rows = [dialogue.simulate(yaml.safe_load(p.read_text(encoding="utf-8")), kb) for p in paths]
    assert sum(r["correct"] for r in rows) / len(rows) >= 0.90
    assert statistics.mean(len(r["asked"]) for r in rows) <= 2.0
    for r in rows:
        assert len(r["asked"]) == len(set(r["asked"])), f"{r['id']} asked a question twice"


LOG = ("[rank1]:[E101 01:00:00.100 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
       "WorkNCCL(SeqNum=522, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, Timeout(ms)=1800000) ran for 1800021 milliseconds before timing out.")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
def test_interactive_mode_in_a_real_terminal(tmp_path):
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real CLI on a terminal
        os.environ["NO_COLOR"] = "1"
        os.chdir(tmp_path)  # away from the source tree, so the installed package is what runs
        os.execv(sys.executable, [sys.executable, "-m", "advisor", "suggest", "--error", LOG, "--interactive"])
    try:
        first = read_until(fd, b"> ")
        assert b"What was the job doing" in first  # the phase question comes first
        assert b"1. starting up" in first and b"? = don't know" in first
        os.write(fd, b"lunch\r")
        assert b"choose one of" in read_until(fd, b"> ")  # a bad answer is explained, and asked again
        os.write(fd, b"5\r")  # the 5th choice: saving a checkpoint
        after = read_until(fd, b"> ")
        # an answered phase ranks the save first but is not yet specific evidence: no verdict yet
        assert b"ahead so far, not yet sure: A checkpoint save outlasted the collective timeout" in after
        os.write(fd, b"?\r")  # don't know
        os.write(fd, b"q\r")  # stop asking
        rest = read_until(fd, b"References")
        assert b"Diagnosis: " in rest or b"Likely: " in rest or b"Possibly: " in rest
        assert b"[checkpoint-save-straggler]" in rest
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
