"""The reproduction suite, run fresh (repro/scenarios.yaml, environment: torch CPU + the `hf` pins):
every scenario must still fail the way it was recorded in kb/recorded — the expected exit status,
its key messages — and the advisor must give the fresh log the same first cause as the recorded
one. A scenario that no longer fails, or fails differently after an upgrade, shows up here; then
re-record with `python repro/record.py --only <id>` and review the diff.

The runs go a few at a time (ADVISOR_REPRO_JOBS, default 3): most of a run is waiting for a
timeout. A run that does not fail the expected way is run once more before it counts, since the
machine's load can shift timings; the retry is reported in the failure message if it fails again.
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

RUNS = record.load_runs()
JOBS = int(os.environ.get("ADVISOR_REPRO_JOBS", "3"))


def _run_twice_if_needed(run):
    first = record.execute(run)
    if not first.problems():
        return first, None
    return record.execute(run), first


@pytest.fixture(scope="module")
def fresh():
    for module in ("torch", "transformers", "trl", "accelerate", "lightning"):
        require(module)
    with ThreadPoolExecutor(max_workers=max(JOBS, 1)) as pool:
        return dict(zip((r.id for r in RUNS), pool.map(_run_twice_if_needed, RUNS)))


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.id)
def test_scenario_fails_as_recorded(run, fresh):
    result, earlier = fresh[run.id]
    problems = result.problems()
    retried = f" (also on the first attempt: {'; '.join(earlier.problems())})" if earlier else ""
    assert not problems, f"{run.id}: {'; '.join(problems)}{retried}\n--- log tail ---\n{result.text[-3000:]}"
    recorded = (record.RECORDED / f"{run.id}.log").read_text(encoding="utf-8")
    assert record.diagnose_codes(result.text)[:1] == record.diagnose_codes(recorded)[:1], run.id
