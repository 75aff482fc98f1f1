"""Reproductions that need other releases than the default integration environment (a framework
bug, recorded with the release that has it) name a `stack` in repro/scenarios.yaml: its pins are
tests/integration/envs/<stack>.txt, the recorder refuses to record it with other releases, and CI
re-runs it in that environment's stage."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("repro_record_stacks", ROOT / "repro" / "record.py")
record = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = record  # dataclasses look their module up while the class is built
_spec.loader.exec_module(record)


def test_the_runs_of_each_stack_add_up_to_every_run():
    runs = record.load_runs()
    stacks = {r.stack for r in runs}
    assert record.DEFAULT_STACK in stacks and len(stacks) >= 2
    by_stack = [r.id for s in sorted(stacks) for r in record.load_runs(stack=s)]
    assert sorted(by_stack) == sorted(r.id for r in runs)
    assert all(r.stack == "trl-0.15" for r in record.load_runs(stack="trl-0.15"))


def test_every_stack_has_pins_and_a_ci_stage_that_reruns_its_runs():
    ci = (ROOT / ".ci" / "integration").read_text(encoding="utf-8")
    for stack in {r.stack for r in record.load_runs()}:
        assert (record.ENVS / f"{stack}.txt").is_file(), stack
        assert re.search(rf"^run_env {re.escape(stack)} tests/integration/envs/{re.escape(stack)}\.txt .*test_repro\.py", ci, re.M), stack
        if stack != record.DEFAULT_STACK:  # the stage must select the stack's runs, not the default's
            assert f"export ADVISOR_REPRO_STACK={stack}\nrun_env {stack} " in ci, stack


def test_pins_are_read_from_the_requirements_file(tmp_path, monkeypatch):
    (tmp_path / "x.txt").write_text("# comment\njsonargparse[signatures]==4.53.0\npy-spy==0.4.3  # dumps\nfoo>=1\n")
    monkeypatch.setattr(record, "ENVS", tmp_path)
    assert record.stack_pins("x") == {"jsonargparse": "4.53.0", "py-spy": "0.4.3"}
    monkeypatch.setattr(record, "version_of", lambda name: {"jsonargparse": "4.53.0"}.get(name))
    assert record.stack_mismatches("x") == ["py-spy==0.4.3 (installed: none)"]


def test_a_run_of_another_stack_carries_its_own_releases_in_the_manifest():
    manifest = yaml.safe_load((ROOT / "kb" / "recorded" / "manifest.yaml").read_text(encoding="utf-8"))
    declared = {r.id: r for r in record.load_runs()}
    others = [e for e in manifest["runs"] if declared[e["id"]].stack != record.DEFAULT_STACK]
    assert others
    for entry in others:
        stack = declared[entry["id"]].stack
        assert entry["stack"] == stack
        pins = record.stack_pins(stack)
        for package in ("trl", "transformers", "accelerate"):
            if package in pins:
                assert entry["recorded_with"][package] == pins[package], (entry["id"], package)


def test_a_run_that_needs_what_the_machine_lacks_is_skipped_with_the_reason(monkeypatch):
    shm = [r for r in record.load_runs() if r.scenario == "shm-exhausted"]
    assert shm and all(r.requires == ["user-namespaces"] for r in shm)
    monkeypatch.setitem(record.REQUIREMENTS, "impossible", (["false"], "something this machine lacks"))
    assert record.unmet("impossible") == "this machine does not allow something this machine lacks"
    monkeypatch.setitem(record.REQUIREMENTS, "trivial", (["true"], "nothing"))
    assert record.unmet("trivial") is None
