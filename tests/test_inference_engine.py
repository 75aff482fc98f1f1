"""Who issued the collective: a vLLM worker's own lines set `inference_engine`, and a hang there
points to the engine, not to a training loop's stragglers."""

from __future__ import annotations

import pytest

from advisor.diagnose import diagnose, read_log
from advisor.models import DiagnoseRequest

WATCHDOG = ("[rank1]:[E ProcessGroupNCCL.cpp:523] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=50404, OpType=ALLREDUCE, NumelIn=8000, NumelOut=8000, Timeout(ms)=600000) ran for "
            "600327 milliseconds before timing out.")


def run(kb, log: str, **answers):
    return diagnose(DiagnoseRequest(log=log, answers={k: str(v) for k, v in answers.items()}), kb)


@pytest.mark.parametrize("prefix", [
    "(RayWorkerVllm pid=1394) ",          # vLLM 0.3's Ray actor
    "(RayWorkerWrapper pid=2376582) ",    # vLLM 0.4+ Ray actor
    "(VllmWorkerProcess pid=2301) ",      # multiproc_worker_utils
    "(VllmWorker rank=1 pid=881) ",       # v1 multiproc executor, 0.8-0.9
])
def test_a_vllm_worker_watchdog_sets_the_engine_and_leads(kb, prefix):
    d = run(kb, prefix + WATCHDOG)
    assert d.facts["inference_engine"] == "vllm"
    assert d.causes[0].id == "inference-engine-collective-hang"
    assert d.status != "diagnosed"  # an engine regression is a suspicion, not a finding


def test_vllm_log_format_after_a_worker_prefix_sets_the_engine(kb):
    line = "(Worker pid=1890) INFO 08-27 02:41:50 [parallel_state.py:1165] world_size=4 rank=1 local_rank=1 backend=nccl\n"
    assert read_log(kb, line).facts.values["inference_engine"].value == "vllm"
    d = run(kb, line)
    assert d.causes and d.causes[0].id == "inference-engine-collective-hang"


@pytest.mark.parametrize("line", [
    "(Worker pid=1890) starting epoch 3\n",                     # some Ray actor called Worker, not vLLM's format
    "(WorkerDict pid=66442) INFO 08-27 02:41:50 [x.py:1] hi\n",  # verl's actor: another name
    "INFO 08-27 02:41:50 [parallel_state.py:1165] world_size=4 rank=1\n",  # no process prefix
])
def test_lookalike_lines_do_not_name_an_engine(kb, line):
    assert "inference_engine" not in read_log(kb, line).facts.values


def test_a_training_rank_timeout_is_not_the_engine(kb):
    d = run(kb, WATCHDOG)
    assert "inference_engine" not in d.facts
    assert "inference-engine-collective-hang" not in [c.id for c in d.causes]


def test_the_engine_hang_offers_the_custom_all_reduce_switch(kb):
    d = run(kb, "(RayWorkerWrapper pid=2376582) " + WATCHDOG)
    assert d.fix.cause_id == "inference-engine-collective-hang"
    assert "disable-custom-all-reduce" in [a.id for a in d.fix.actions]



@pytest.mark.parametrize("line", [
    "[10:14:05 TP0] Init torch distributed begin.",                    # SGLang 0.3: time only, " TP{rank}"
    "[2025-03-02 10:14:05 TP1] Load weight end. type=LlamaForCausalLM",  # 0.4: date and time
    "[2025-03-02 10:14:05 DP0 TP1] Capture cuda graph begin.",          # 0.4.6 with data parallel
    "[2025-03-02 10:14:05.123 PP1 TP0 EP0] Prefill batch. #new-seq: 1",  # 0.5 with SGLANG_LOG_MS
])
def test_sglang_scheduler_lines_set_the_engine(kb, line):
    """SGLang's configure_logger: "[%(asctime)s{prefix}] %(message)s", the prefix naming the scheduler's parallel ranks."""
    assert read_log(kb, line + "\n").facts.values["inference_engine"].value == "sglang"


@pytest.mark.parametrize("line", [
    "[2025-03-02 10:14:05 INFO] evaluating",     # a level, not a parallel rank
    "[10:14:05 TPU0] compiling",                  # another tag
    "step 3 [2025-03-02 10:14:05 TP1] x",         # not at the start of the line
])
def test_lookalike_bracketed_times_do_not_name_sglang(kb, line):
    assert "inference_engine" not in read_log(kb, line + "\n").facts.values


def test_an_sglang_rank_timeout_leads_to_the_engine(kb):
    d = run(kb, "[2025-03-02 10:14:07 TP1] Capture cuda graph begin.\n" + WATCHDOG + "\n")
    assert d.facts["inference_engine"] == "sglang"
    assert d.causes[0].id == "inference-engine-collective-hang" and d.status != "diagnosed"


def test_an_engine_rule_counts_although_every_engine_shares_it(kb):
    """The engine fact is not normalized over its values: a rule that holds for vLLM and SGLang alike
    must still count (normalizing would cancel it), so a vLLM worker's log plus an unprefixed
    watchdog line leads to the engine."""
    d = run(kb, "(Worker pid=1890) INFO 08-27 02:41:50 [parallel_state.py:1165] world_size=2 rank=1 local_rank=1 backend=nccl\n"
                + WATCHDOG + "\n")
    assert d.causes[0].id == "inference-engine-collective-hang"
    assert any(f["fact"].startswith("inference_engine") and f["weight"] > 0 for f in d.causes[0].evidence["facts"])


# --- a kernel compiled while serving: a slow step, not a hang -------------------------------------

JIT = ("(EngineCore pid=881) WARNING 05-02 10:11:12 [jit_monitor.py:129] CuTeDSL JIT compilation during inference: "
       "W4A16FusedMoeKernel. This causes a latency spike; consider extending warmup to cover this shape/config.")
RPC_TIMEOUT = "EngineCore ERROR TimeoutError: RPC call to sample_tokens timed out."


def test_a_kernel_compiled_while_serving_makes_the_timeout_a_slow_step(kb):
    d = run(kb, JIT + "\n" + RPC_TIMEOUT + "\n")
    assert d.facts["jit_during_inference"] is True and d.facts["inference_engine"] == "vllm"
    assert d.causes[0].id == "collective-slower-than-timeout"
    assert d.status != "diagnosed"
    shown = "\n".join(sn.content for sn in d.fix.snippets)
    assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in shown


def test_the_rpc_timeout_alone_is_no_slow_step(kb):
    d = run(kb, "(EngineCore pid=881) " + RPC_TIMEOUT + "\n")
    assert "jit_during_inference" not in d.facts
    assert not d.causes or d.causes[0].id != "collective-slower-than-timeout"


def test_an_engine_setting_applies_only_to_a_log_an_engine_printed(kb):
    from advisor.fixes import applicability
    from advisor.models import FactValue, Facts

    fix = next(f for f in kb.causes["collective-slower-than-timeout"].fixes if f.id == "vllm-execute-timeout")
    training = Facts(values={"framework": FactValue(value="transformers")})
    assert applicability(fix, training) == (False, "for vllm only")  # unknown excludes: a training job runs no engine
    served = Facts(values={"inference_engine": FactValue(value="vllm")})
    assert applicability(fix, served)[0] is True
    sglang = Facts(values={"inference_engine": FactValue(value="sglang")})
    assert applicability(fix, sglang)[0] is False
