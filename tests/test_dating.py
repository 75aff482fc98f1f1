"""A release dated from the wordings a log shows (advisor.dating): the catalogue's per-release
wordings, not hand-written probes, say which torch / NCCL printed a log."""

from __future__ import annotations

import pytest

from advisor.dating import date_release, printed_specs, releases_of
from advisor.diagnose import diagnose, read_log
from advisor.models import DiagnoseRequest
from advisor.versions import parse_specifier, parse_version

STUCK = ("[rank0]:[E306 00:30:11.701177518 ProcessGroupNCCL.cpp:1484] [Rank 0] ProcessGroupNCCL's watchdog got stuck for "
         "480 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API "
         "{middle}hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api, or "
         "other deadlock-prone behaviors.")
HEARTBEAT = ("[rank4]:[E ProcessGroupNCCL.cpp:1316] [Rank 0] Heartbeat monitor timed out! Process will be terminated "
             "after dumping debug info. workMetaList_.size()=2")
NOT_DESTROYED_26 = ("[rank0]:[W1 1:1:1 ProcessGroupNCCL.cpp:1250] WARNING: destroy_process_group() was not called before "
                    "program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown")


def dated(kb, text: str, fact: str = "torch_version"):
    value = read_log(kb, text).facts.values.get(fact)
    return value and value.value, value and value.detail


def test_each_wording_of_a_message_dates_its_own_releases(kb):
    new, detail = dated(kb, STUCK.format(middle="(e.g., CudaEventDestroy) "))
    assert new[0] == "2.5.1" and new[-1] == "2.13.0" and "c10d-nccl.watchdog-stuck" in detail
    old, _ = dated(kb, STUCK.format(middle=""))
    assert old == ["2.3.1", "2.4.1"]
    assert dated(kb, HEARTBEAT)[0] == ["2.3.1", "2.4.1"]


def test_the_wording_the_line_follows_furthest_is_the_one_printed(kb):
    """NCCL < 2.14.3 printed `Call to ibv_alloc_pd failed`, later releases add `with error %s`: a
    line with the longer text matches both, and was printed by the newer releases."""
    message = kb.messages["nccl-ib.call-ibv-alloc-pd-failed-error"] if "nccl-ib.call-ibv-alloc-pd-failed-error" in kb.messages else next(
        m for m in kb.messages.values() if m.text.startswith("Call to ibv_alloc_pd failed"))
    new = printed_specs(message, "host:1:2 [0] NCCL WARN Call to ibv_alloc_pd failed with error Cannot allocate memory")
    old = printed_specs(message, "host:1:2 [0] NCCL WARN Call to ibv_alloc_pd failed")
    assert new == (message.versions,) and old == (message.wording[0].versions,) and new != old


def test_a_cut_line_fits_any_of_its_wordings(kb):
    message = kb.messages["c10d-nccl.watchdog-stuck"]
    cut = "[Rank 0] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making"
    assert set(printed_specs(message, cut)) == {message.versions, *(w.versions for w in message.wording)}


def test_nothing_is_dated_when_the_oldest_mined_release_still_fits(kb):
    """torch < 2.3 worded the watchdog's death `NCCL watchdog thread terminated`: 2.1 and 2.2 fit, and
    so may any older, unmined release, so no version is claimed."""
    line = "[E ProcessGroupNCCL.cpp:821] [Rank 2] NCCL watchdog thread terminated with exception: boom"
    assert printed_specs(kb.messages["c10d-nccl.watchdog-thread-exception"], line) == ("<2.3",)
    assert dated(kb, line)[0] is None


def test_messages_that_contradict_each_other_date_nothing(kb):
    assert dated(kb, HEARTBEAT + "\n" + NOT_DESTROYED_26)[0] is None  # 2.3-2.4 and >= 2.6: two installs
    assert dated(kb, NOT_DESTROYED_26)[0][0] == "2.6.0"


def test_a_printed_version_wins_over_the_wording(kb):
    value, detail = dated(kb, "PyTorch version: 2.4.1+cu121\n" + STUCK.format(middle="(e.g., CudaEventDestroy) "))
    assert value == "2.4.1+cu121" and detail is None


def test_a_dated_release_settles_what_a_cause_requires(kb):
    """The heartbeat monitor's kill needs torch >= 2.2: the heartbeat message's own wording proves it,
    so the cause is not left `unconfirmed` on the torch version."""
    diagnosis = diagnose(DiagnoseRequest(log=HEARTBEAT), kb)
    lead = next(c for c in diagnosis.causes if c.id == "nccl-heartbeat-monitor")
    assert "torch_version" not in lead.unconfirmed
    assert diagnosis.fact_sources["torch_version"].origin == "inferred"
    assert diagnosis.fact_sources["torch_version"].basis == "message wording"
    # the timeout's explanation says how the version is known
    assert "you have torch 2.3.1 .. 2.4.1 (inferred from the message wording)" in str(diagnosis.timeout.model_dump())


def test_releases_are_read_from_the_artifacts_the_catalogue_names():
    assert releases_of(["torch==2.4.1 torch-2.4.1-cp311.whl: torch/lib (strings)", "torch==2.10.0 x", "torch==2.4.1 y"]) == ["2.4.1", "2.10.0"]
    assert releases_of(["NVIDIA/nccl v2.21.5-1 src/ (WARN formats)", "nvidia-nccl-cu13==2.29.7 libnccl.so.2"]) == ["2.21.5", "2.29.7"]
    assert date_release("torch", [], [("m", (">=2.6",))]) is None


def test_every_version_range_in_the_catalogue_selects_a_mined_release(kb):
    """A message's `versions` (and each older wording's) must name releases its software was mined
    at: a range that selects none is a typo or a stale entry, and would date every log wrongly."""
    bad = []
    for message in kb.messages.values():
        component = message.id.split(".", 1)[0]
        _, releases = kb.releases[component]
        for spec in [message.versions, *(w.versions for w in message.wording)]:
            if spec and not any(parse_version(r) in parse_specifier(spec) for r in releases):
                bad.append((message.id, spec))
    assert not bad, bad[:10]


@pytest.mark.parametrize("component", ["c10d-nccl", "c10d-store", "nccl-ib", "nccl-socket", "trl", "deepspeed-engine"])
def test_the_software_of_a_dated_component_has_several_mined_releases(kb, component):
    software, releases = kb.releases[component]
    assert len(releases) >= 4 and releases == sorted(releases, key=parse_version), (software, releases)
