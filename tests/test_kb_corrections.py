"""The knowledge errors an audit found against the released packages, each pinned at its version
boundary: the rendezvous store's timeout, accelerate's dropped default and DeepSpeed path, Flight
Recorder by torch version, ProcessGroupNCCL's destructor warning by torch version, virbr bridges by
NCCL version, one save-timeout rule, the TRL version behind TRL's bugs (Open-R1 has no releases),
torchtitan's resumed runs. Sources: the references in the KB files named in each test.
"""

from __future__ import annotations

import pytest

from advisor import tuning
from advisor.diagnose import diagnose
from advisor.fixes import applicability, flight_recorder_note
from advisor.knowledge import load_kb
from advisor.models import DiagnoseRequest, Facts, FactValue

KB = load_kb()

WATCHDOG_1800 = ("[rank3]:[E210 10:01:02.441 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
                 "WorkNCCL(SeqNum=40, OpType=_ALLGATHER_BASE, NumelIn=7012352, NumelOut=28049408, Timeout(ms)=1800000) ran for "
                 "1800033 milliseconds before timing out.")
SFT_LOG = ("{'loss': 1.9921, 'grad_norm': 2.81, 'learning_rate': 2e-05, 'mean_token_accuracy': 0.6012, 'epoch': 0.0}\n"
           "  0%|          | 1/3120 [00:04<3:29:11,  4.02s/it]\n" + WATCHDOG_1800)


def facts(**values) -> Facts:
    return Facts(values={k: FactValue(value=v, origin="answer") for k, v in values.items()})


def run(log: str, questions: int = 0, **answers):
    return diagnose(DiagnoseRequest(log=log, answers={k: str(v) for k, v in answers.items()}, max_questions=questions), KB)


def fix(cause: str, fix_id: str):
    return next(f for f in KB.causes[cause].fixes if f.id == fix_id)


# --- the TCPStore init_process_group builds follows the process-group timeout --------------------


def test_no_kb_text_says_the_store_waits_300_s_or_that_ddp_timeout_leaves_it():
    texts = [KB.frameworks["pytorch"].description, KB.frameworks["transformers"].description,
             KB.causes["node-startup-skew"].explanation]
    for text in texts:
        flat = " ".join(text.split())
        assert "the TCPStore waits 300 s" not in flat and "TCPStore's 300 s" not in flat
    assert "only a store built without a timeout waits 300 s" in " ".join(KB.frameworks["pytorch"].description.split())
    assert "rendezvous TCPStore built on the env:// path follows it" in " ".join(KB.frameworks["transformers"].description.split())


@pytest.mark.parametrize("framework, seconds, source", [
    ("transformers", 1800, "hf-ddp-timeout"),
    ("lightning", 1800, "lightning-strategy-timeout"),
    ("pytorch", 600, "pytorch-default"),
])
def test_a_store_connect_timeout_follows_the_framework_timeout(framework, seconds, source):
    line = f"torch.distributed.DistNetworkError: The client socket has timed out after {seconds}s while trying to connect to (10.0.0.7, 29500)."
    t = run(line, framework=framework, torch_version="2.5.1").timeout
    assert t.clock == "init-store" and t.seconds == seconds
    assert t.source == (source if source != "pytorch-default" else "pg-collective")
    assert t.reachable.value is True


def test_only_a_store_built_without_a_timeout_waits_300_s():
    t = run("[E socket.cpp:793] [c10d] The client socket has timed out after 300s while trying to connect to (10.0.0.7, 29500).",
            framework="transformers").timeout
    assert t.origin.startswith("torch default: 300 s") and t.reachable.trap == "store-follows-pg-timeout"


# --- accelerate: the dropped default (accelerate#2703) and the DeepSpeed path, 0.30 / 0.31 ---------


def test_accelerate_kb_says_the_default_is_dropped_and_deepspeed_applies():
    text = " ".join(KB.frameworks["accelerate"].description.split())
    assert "only values that differ from the class default" in text and "DEEPSPEED_TIMEOUT" in text
    ds = " ".join(KB.frameworks["deepspeed"].description.split())
    assert "accelerate passes only an explicit, non-default InitProcessGroupKwargs timeout" in ds


@pytest.mark.parametrize("version", ["0.30.1", "0.31.0"])
def test_without_initprocessgroupkwargs_torchs_default_applies_on_every_accelerate_version(version):
    line = WATCHDOG_1800.replace("1800000", "600000").replace("1800033", "600033")
    t = run(line, framework="accelerate", framework_version=version, torch_version="2.4.0").timeout
    assert t.origin.startswith("torch default: 600 s") and t.reachable.trap == "accelerate-dropped-default"
    assert f"accelerate {version}" in t.origin


# --- Flight Recorder: dump on timeout by default from 2.7, torchfrtrace in the wheel from 2.10 -----


@pytest.mark.parametrize("torch, fr26, fr27", [("2.6.0", True, False), ("2.7.0", False, True)])
def test_flight_recorder_dump_on_timeout_by_version(torch, fr26, fr27):
    f = facts(torch_version=torch)
    assert applicability(fix("mismatched-collectives", "flight-recorder-26"), f)[0] is fr26
    assert applicability(fix("mismatched-collectives", "flight-recorder"), f)[0] is fr27
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT" in [s.env for s in fix("mismatched-collectives", "flight-recorder-26").settings]


@pytest.mark.parametrize("torch, command", [("2.9.1", False), ("2.10.0", True)])
def test_torchfrtrace_ships_in_the_wheel_from_2_10(torch, command):
    note = flight_recorder_note(torch)
    assert ("`torchfrtrace <dump dir>`" in note) is command
    assert ("fr_trace.py" in note) is (not command)


def test_no_kb_text_promises_torchfrtrace_from_2_6():
    steps = " ".join(fix("mismatched-collectives", "detail-run").steps.split())
    assert "torch >= 2.6, Flight Recorder dumps plus `torchfrtrace" not in steps


# --- ProcessGroupNCCL's destructor warning, by torch version --------------------------------------

DESTRUCT = {
    "2.3": "[rank0]:[W515 07:06:42.829 ProcessGroupNCCL.cpp:1117] WARNING: process group has NOT been destroyed before it is being destructed.",
    "2.4": "[rank0]:[W1120 09:12:44.512 ProcessGroupNCCL.cpp:1250] WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.",
    "2.6": "[rank0]:[W117 03:41:45.075 ProcessGroupNCCL.cpp:1524] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources.",
}


@pytest.mark.parametrize("wording, first, last", [
    ("2.3", "2.3.1", "2.3.1"),
    ("2.4", "2.4.1", "2.5.1"),  # 2.4 and 2.5 print the same words
    ("2.6", "2.6.0", "2.13.0"),
])
def test_the_destructor_warning_is_harmless_and_dates_torch(wording, first, last):
    d = run(DESTRUCT[wording])
    assert d.causes[0].id == "launcher-noise" and d.status == "no-match"  # harmless lines alone: the failure is elsewhere
    source = d.fact_sources["torch_version"]
    assert source.value[0] == first and source.value[-1] == last and source.origin == "inferred"
    assert "c10d-nccl.not-destroyed" in source.detail  # dated by the catalogue's wordings of the message


# --- virbr bridges are skipped by NCCL only from 2.28 ----------------------------------------------


@pytest.mark.parametrize("nccl, shown", [("2.27.7", True), ("2.28.3", False)])
def test_exclude_virbr_is_advised_only_before_nccl_2_28(nccl, shown):
    assert applicability(fix("wrong-socket-interface", "exclude-virbr"), facts(nccl_version=nccl))[0] is shown
    text = " ".join(KB.causes["wrong-socket-interface"].explanation.split())
    assert "Only from NCCL 2.28 are libvirt `virbr*` bridges skipped" in text


# --- one save-timeout rule, model size known or not -------------------------------------------------


def test_an_unknown_model_size_follows_the_same_rule_as_a_known_one():
    unknown = tuning.checkpoint_save_timeout(facts())
    assumed = tuning.checkpoint_save_timeout(facts(model_size_b=tuning.ASSUMED_MODEL_B))
    assert unknown.value == assumed.value == tuning.save_floor(tuning.ASSUMED_MODEL_B)
    assert "assumed 7 B" in unknown.derivation and "usual need" not in unknown.derivation
    assert "model_size_b" in unknown.missing


@pytest.mark.parametrize("size, floor", [(0.9, 600), (1.0, 1800), (10.0, 1800), (10.5, 3600)])
def test_save_floor_by_model_size(size, floor):
    assert tuning.save_floor(size) == floor


# --- TRL's SFT gather bug is keyed on the TRL version (asked for under Open-R1) ---------------------


@pytest.mark.parametrize("answers, top", [
    ({"framework": "open-r1", "trl_version": "0.15.0"}, True),
    ({"framework": "open-r1", "trl_version": "0.15.1"}, False),
    ({"framework": "trl", "framework_version": "0.15.0"}, True),
    ({"framework": "trl", "framework_version": "0.15.1"}, False),
])
def test_the_sft_gather_bug_follows_the_trl_version(answers, top):
    d = run(SFT_LOG, **answers)
    assert (d.causes[0].id == "trl-sft-token-accuracy-gather") is top


def test_open_r1s_own_version_does_not_key_a_trl_bug():
    d = run(SFT_LOG, framework="open-r1", framework_version="0.15.0")
    cause = next(c for c in d.causes if c.id == "trl-sft-token-accuracy-gather")
    assert all(f["fact"] != "framework_version" for f in cause.evidence["facts"])
    assert "trl_version" not in d.facts


def test_under_open_r1_the_advisor_asks_for_the_trl_version():
    d = run(SFT_LOG, questions=3, framework="open-r1")
    assert "trl_version" in [q.id for q in d.questions]
    d = run(SFT_LOG, questions=3, framework="open-r1", trl_version="0.15.0")
    assert "trl_version" not in [q.id for q in d.questions]


def test_the_trl_version_is_read_from_the_log_under_open_r1():
    d = run("trl==0.15.0\n" + SFT_LOG, framework="open-r1")
    assert d.facts["trl_version"] == "0.15.0" and d.causes[0].id == "trl-sft-token-accuracy-gather"


# --- torchtitan <= 0.2.2 keeps the init timeout on a resumed run -------------------------------------


def test_torchtitan_kb_says_resumed_runs_keep_the_init_timeout_up_to_0_2_2():
    text = " ".join(KB.frameworks["torchtitan"].description.split())
    assert "resumed from a checkpoint never makes it" in text
    trap = next(t for t in KB.timers["torchtitan-train-timeout"].traps if t.id == "torchtitan-resumed-022")
    assert trap.applies.framework_version == "<=0.2.2"


@pytest.mark.parametrize("framework", [None, "lightning", "llama-factory"])
def test_the_trl_version_is_not_asked_of_a_run_without_trl(framework):
    answers = {"framework": framework} if framework else {}
    d = run(SFT_LOG.replace("mean_token_accuracy", "accuracy"), questions=5, **answers)
    assert "trl_version" not in [q.id for q in d.questions]
