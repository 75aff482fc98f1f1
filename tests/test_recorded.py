"""The recorded reproductions (kb/recorded, shipped in the package as advisor.kb.recorded): logs of
real failures printed by torch, gloo, torchrun, HF Trainer, accelerate, Lightning and TRL on CPU
(`python repro/record.py` makes them; repro/README.md says how).

Each log, diagnosed in-process from the log alone, must put its labelled cause (or one of its
also_acceptable codes) first, and among the first three. The runs in the manifest's known_misses
are not diagnosed right yet: they are expected to fail, strictly, so fixing one fails the suite
until it is taken off the list.
"""

from __future__ import annotations

import functools

import pytest
import yaml

from advisor.knowledge import builtin_kb_dir

RECORDED = builtin_kb_dir() / "recorded"
MANIFEST = yaml.safe_load((RECORDED / "manifest.yaml").read_text(encoding="utf-8"))
RUNS = {run["id"]: run for run in MANIFEST["runs"]}
KNOWN_MISSES = {k: set(v or []) for k, v in (MANIFEST.get("known_misses") or {}).items()}
CODES = set(yaml.safe_load((builtin_kb_dir() / "codes.yaml").read_text(encoding="utf-8"))["causes"])


@functools.lru_cache(maxsize=None)
def codes_for(run_id: str) -> tuple[str, ...]:
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    log = (RECORDED / RUNS[run_id]["log"]).read_text(encoding="utf-8")
    return tuple(c.code for c in diagnose(DiagnoseRequest(log=log, max_causes=10)).causes)


def accepted(run: dict) -> set[str]:
    return {run["cause"], *run.get("also_acceptable", [])}


def params(kind: str):
    return [pytest.param(i, id=i, marks=[pytest.mark.xfail(strict=True, reason=f"known {kind} miss")]
                         if i in KNOWN_MISSES.get(kind, set()) else []) for i in RUNS]


@pytest.mark.parametrize("run_id", params("top1"))
def test_labelled_cause_is_first(run_id):
    run, codes = RUNS[run_id], codes_for(run_id)
    assert codes[:1] and codes[0] in accepted(run), f"{run_id}: expected {sorted(accepted(run))}, got {list(codes[:3])}"


@pytest.mark.parametrize("run_id", params("top3"))
def test_labelled_cause_is_in_the_first_three(run_id):
    run, codes = RUNS[run_id], codes_for(run_id)
    assert accepted(run) & set(codes[:3]), f"{run_id}: expected {sorted(accepted(run))}, got {list(codes[:3])}"


def test_manifest_and_logs_agree():
    logs = {p.name for p in RECORDED.glob("*.log")}
    assert logs == {run["log"] for run in RUNS.values()}
    assert len(RUNS) == len(MANIFEST["runs"]), "duplicate run ids"
    for kind, ids in KNOWN_MISSES.items():
        assert kind in ("top1", "top3") and ids <= set(RUNS), kind
    assert KNOWN_MISSES.get("top3", set()) <= KNOWN_MISSES.get("top1", set()), "a top-3 miss is a top-1 miss too"


def test_every_run_is_labelled_with_known_codes_and_versions():
    for run in RUNS.values():
        assert run["cause"] in CODES, run["id"]
        assert set(run.get("also_acceptable", [])) <= CODES, run["id"]
        assert run["torch_version"] and run["framework_version"], run["id"]
        assert isinstance(run["exit_code"], int), run["id"]
        # every run fails, except a healthy one whose only story is a harmless warning
        assert (run["exit_code"] == 0) == (run["cause"] == "benign-warning"), run["id"]


def test_logs_name_files_under_the_neutral_root_only():
    """The one normalisation: the recording machine's checkout and virtual environment are /workspace."""
    for run in RUNS.values():
        text = (RECORDED / run["log"]).read_text(encoding="utf-8")
        assert text.strip(), run["id"]
        for line in text.splitlines():
            if "repro/scenarios/" in line:
                assert "/workspace/repro/scenarios/" in line, f"{run['id']}: {line}"
            if "/site-packages/" in line:
                assert "/workspace/.venv/lib/" in line, f"{run['id']}: {line}"


def test_every_cpu_cause_has_a_reproduction_under_two_launchers_or_frameworks():
    # codes that cannot happen on CPU (GPU, NCCL, InfiniBand, drivers, mismatched NCCL/CUDA), or
    # whose client needs vLLM or CUDA (external-service-unreachable): see repro/README.md
    not_on_cpu = {"heartbeat-monitor-kill", "duplicate-gpu-assignment", "infiniband-rdma-issue", "p2p-topology-issue",
                  "version-mismatch", "gpu-oom-on-rank", "gpu-hardware-fault",
                  "external-service-unreachable"}
    variants: dict[str, set[tuple[str, str]]] = {}
    for run in RUNS.values():
        variants.setdefault(run["cause"], set()).add((run["launcher"], run["framework"]))
    assert CODES - not_on_cpu <= set(variants), sorted(CODES - not_on_cpu - set(variants))
    assert all(len(v) >= 2 for v in variants.values()), {c: v for c, v in variants.items() if len(v) < 2}


def test_causes_take_recorded_runs_as_their_example_logs(kb):
    """A cause's example may name a recorded run: the loader reads the log the software printed, and
    kb check runs it like any example (every cause a CPU run reproduces has at least one)."""
    recorded = {ex.recorded: ex.log for c in kb.causes.values() for ex in c.examples.positive if ex.recorded}
    assert len(recorded) >= 20
    for run_id, log in recorded.items():
        assert log == (RECORDED / f"{run_id}.log").read_text(encoding="utf-8"), run_id
    codes = {c.code for c in kb.causes.values() if any(ex.recorded for ex in c.examples.positive)}
    assert len(codes) >= 14, sorted(codes)


def test_an_example_has_its_text_or_a_recorded_run_not_both(tmp_path):
    from pydantic import ValidationError

    from advisor import schema

    with pytest.raises(ValidationError):
        schema.Example(name="both", log="x", recorded="save-straggler--torchrun")
    with pytest.raises(ValidationError):
        schema.Example(name="neither")
    assert schema.Example(name="one", recorded="save-straggler--torchrun").recorded
