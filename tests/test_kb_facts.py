"""`advisor kb facts`: every versioned fact of the KB, derived from the KB data, for audit."""

from __future__ import annotations

import json

from advisor.kbfacts import versioned_facts
from advisor.knowledge import load_kb
from helpers import run_cli

KB = load_kb()


def test_json_lists_every_timer_default_trap_and_knob_default():
    result = run_cli("kb", "facts", "--json")
    assert result.code == 0, result.err
    rows = json.loads(result.out)
    kinds = {row["kind"] for row in rows}
    assert {"timer-default", "timer-trap", "framework-knob", "fix-applies", "rule-version", "format-window"} <= kinds
    # derived, not hand-kept: one row per default and per trap in the table
    assert sum(r["kind"] == "timer-default" for r in rows) == sum(len(t.defaults) for t in KB.timers.values())
    assert sum(r["kind"] == "timer-trap" for r in rows) == sum(len(t.traps) for t in KB.timers.values())
    for row in rows:
        assert row["references"], row
        assert all(url.startswith("https://") for url in row["references"])
        assert set(row) == {"kind", "subject", "knob", "default", "unit", "versions", "note", "references"}


def test_the_audited_facts_are_listed_with_their_versions():
    rows = versioned_facts(KB)

    def find(subject_part: str, versions_part: str) -> dict:
        return next(r for r in rows if subject_part in r["subject"] and versions_part in r["versions"])

    assert find("timers.pg-collective", "torch >=2.2; backend nccl")["default"] == 600
    assert find("timers.hf-ddp-timeout", "transformers >=4.22")["default"] == 1800
    assert find("timers.accelerate-init-kwargs", "accelerate <0.31")["note"].endswith("never forwarded to the clock")
    assert find("timers.nccl-ib-timeout", "NCCL >=2.23")["default"] == 20
    assert find("timers.torchtitan-train-timeout.traps", "torchtitan <=0.2.2")
    assert find("causes.wrong-socket-interface.fixes.exclude-virbr", "NCCL <2.28")
    assert find("causes.trl-sft-token-accuracy-gather.rules", "trl_version ==0.15.0")


def test_text_output_names_each_fact_and_its_reference():
    result = run_cli("kb", "facts")
    assert result.code == 0
    assert "[timer-default] timers.heartbeat-monitor: TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = 480 s  (torch >=2.5)" in result.out
    assert "https://github.com/pytorch/pytorch/pull/133028" in result.out
    assert result.out.rstrip().endswith("versioned facts")
