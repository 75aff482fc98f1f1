"""The reproduction suite, run fresh (repro/scenarios.yaml, environment: torch CPU + the pins of one
stack, `hf` unless ADVISOR_REPRO_STACK names another: .ci/integration runs each stack's runs in its
own environment):
every scenario must still fail the way it was recorded in kb/recorded — the expected exit status,
its key messages — and the advisor must give the fresh log the same first cause as the recorded
one; only where neither is a verdict may the lead be another of the recorded top three.
A scenario that no longer fails, or fails differently after an upgrade, shows up here; then
re-record with `python repro/record.py --only <id>` and review the diff.

The runs go a few at a time (ADVISOR_REPRO_JOBS, default 3): most of a run is waiting for a
timeout. A run that does not fail the expected way, or whose log gets another verdict than its
recording, is run once more before it counts, since the machine's load can shift timings; the
retry is reported in the failure message if it fails again.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from corpus import require

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("repro_record", REPO / "repro" / "record.py")
record = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = record  # dataclasses look their module up while the class is built
_spec.loader.exec_module(record)

STACK = os.environ.get("ADVISOR_REPRO_STACK", record.DEFAULT_STACK)
RUNS = record.load_runs(stack=STACK)
JOBS = int(os.environ.get("ADVISOR_REPRO_JOBS", "3"))


def _differences(result) -> list[str]:
    """How a fresh run differs from its recording: the manifest's checks, then the first cause."""
    problems = result.problems()
    if problems:
        return problems
    recorded = (record.RECORDED / f"{result.run.id}.log").read_text(encoding="utf-8")
    (status, fresh), (was, then) = record.diagnose_verdict(result.text), record.diagnose_verdict(recorded)
    if fresh[:1] == then[:1]:
        return []  # the same lead (its confidence may move with what the run printed)
    if "diagnosed" not in (status, was) and fresh[:1] and fresh[0] in then[:3]:
        return []  # without a verdict the order of close candidates may move with timing
    return [f"{status} {fresh[:1]}, recorded {was} {then[:3]}"]


def _run_twice_if_needed(run):
    first = record.execute(run)
    if not _differences(first):
        return first, None
    return record.execute(run), first


@pytest.fixture(scope="module")
def fresh():
    # the default stack's frameworks by module; any stack's pins, by the installed distributions' versions
    for module in ("torch",) + (("transformers", "trl", "accelerate", "lightning") if STACK == record.DEFAULT_STACK else ()):
        require(module)
    mismatched = record.stack_mismatches(STACK)
    assert not mismatched, f"this environment is not the {STACK} stack: {', '.join(mismatched)}"
    with ThreadPoolExecutor(max_workers=max(JOBS, 1)) as pool:
        runnable = [r for r in RUNS if not record.blockers(r)]
        return dict(zip((r.id for r in runnable), pool.map(_run_twice_if_needed, runnable)))


# The first test's set-up runs the whole suite (the module fixture, 3 runs at a time): about 8-10
# minutes on a quiet 2-core machine, far more when the machine is shared. Each run is killed at its
# own timeout (repro/scenarios.yaml, 180 s by default), so this guard only has to bound the suite.
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.id)
def test_scenario_fails_as_recorded(run, fresh):
    missing = record.blockers(run)
    if missing:
        pytest.skip("; ".join(missing))
    result, earlier = fresh[run.id]
    differences = _differences(result)
    retried = f" (first attempt: {'; '.join(_differences(earlier))})" if earlier else ""
    assert not differences, f"{run.id}: {'; '.join(differences)}{retried}\n--- log ---\n{result.text[-6000:]}"
