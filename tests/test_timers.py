"""The timer table (kb/timers.yaml) and the `timeout` object of every timeout diagnosis: which clock
fired, its value and where it came from, whether the user's setting reaches it, what fires next.

The version boundaries tested here are the released packages' (torch 2.1/2.2 and 2.4/2.5 wheels,
transformers 4.21/4.22, 4.24/4.25 and 4.30/4.31, accelerate 0.30/0.31, TRL 0.16/0.17, torchtitan
0.2.2/0.3.0, NCCL 2.22/2.23): see the references in kb/timers.yaml.
"""

from __future__ import annotations

import json

import pytest

from advisor import schema, timers
from advisor.diagnose import diagnose
from advisor.knowledge import check_timers, load_kb, message_ids
from advisor.models import DiagnoseRequest, Facts, FactValue, FailureEvent
from advisor.render import render_markdown, render_text
from helpers import run_cli

KB = load_kb()

WATCHDOG = ("[rank1]:[E1003 08:41:02.511 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=4021, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={ms}) ran for {ms} milliseconds before timing out.")
HEARTBEAT = ("[rank0]:[F305 11:20:45.908 ProcessGroupNCCL.cpp:1565] [PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL's "
             "watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.")
HEARTBEAT_24 = ("[rank12]:[E1003 08:41:02.511204019 ProcessGroupNCCL.cpp:1316] [PG 0 Rank 12] Heartbeat monitor timed out! "
                "Process will be terminated after dumping debug info. workMetaList_.size()=2")
STORE_CONNECT = "[E socket.cpp:793] [c10d] The client socket has timed out after {s}s while trying to connect to (127.0.0.1, 29500)."


def timeout_of(log: str, **answers):
    d = diagnose(DiagnoseRequest(log=log, answers={k: str(v) for k, v in answers.items()}, max_questions=0), KB)
    return d.timeout


def watchdog(ms: int) -> str:
    return WATCHDOG.format(ms=ms)


# --- the table ------------------------------------------------------------------------------------


def test_the_table_holds_every_clock_the_issue_names():
    wanted = {
        "pg-collective", "heartbeat-monitor", "init-store", "store-based-barrier", "elastic-join", "elastic-last-call",
        "elastic-close", "c10d-read-timeout", "gloo-op", "deepspeed-timeout", "accelerate-init-kwargs", "hf-ddp-timeout",
        "lightning-strategy-timeout", "torchtitan-init-timeout", "torchtitan-train-timeout", "vllm-server-wait",
        "vllm-weight-sync-store", "nccl-ib-timeout", "nccl-ib-retry-cnt",
    }
    assert wanted <= set(KB.timers)
    assert KB.timers["deepspeed-timeout"].unit == "min"
    assert KB.timers["nccl-ib-timeout"].unit == "exponent"


def test_every_setting_feeds_a_clock_and_every_value_carries_a_reference():
    for timer in KB.timers.values():
        if timer.kind == "setting":
            assert KB.timers[timer.feeds].kind == "clock", timer.id
        for value in timer.defaults:
            assert value.references and all(u.startswith("https://") for u in value.references), timer.id
        for trap in timer.traps:
            assert trap.references, trap.id


def test_message_ids_link_to_the_kb_signatures():
    ids = message_ids(KB)
    assert "collective-timeout" in ids  # a shared signature
    assert "nccl-heartbeat-monitor.watchdog-stuck" in ids  # a cause's own signature
    for timer in KB.timers.values():
        for mid in timer.messages:
            assert mid in ids, (timer.id, mid)


def test_a_bad_timer_is_a_kb_error_naming_the_field():
    bad = KB.timers["pg-collective"].model_copy(update={"messages": ["no-such-message"], "next": "no-such-clock"})
    kb = load_kb()
    saved = dict(kb.timers)
    try:
        kb.timers["pg-collective"] = bad
        errors = [str(e) for e in check_timers(kb)]
    finally:
        kb.timers.clear()
        kb.timers.update(saved)
    assert any("timers.pg-collective.messages[0]" in e and "no-such-message" in e for e in errors)
    assert any("timers.pg-collective.next" in e for e in errors)


def test_a_setting_must_name_its_clock():
    with pytest.raises(ValueError, match="feeds"):
        schema.Timer(id="x-y", name="a setting here", kind="setting", layer="framework", key="x_y",
                     what="w" * 40, set="set it so", defaults=[], follows="pg-collective", references=["https://a.b/c"])


# --- the five objects the closing note quotes -----------------------------------------------------


def test_heartbeat_kill_is_reached_by_no_framework_setting():
    t = timeout_of(HEARTBEAT, framework="llama-factory")
    assert (t.clock, t.seconds, t.next_clock) == ("heartbeat-monitor", 480, "pg-collective")
    assert t.origin.startswith("torch default:") and ">=2.5" in t.origin
    assert t.reachable.value is False and t.reachable.trap == "heartbeat-independent"
    assert t.reachable.setting == "hf-ddp-timeout"
    assert "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" in t.reachable.how


def test_600000_ms_under_accelerate_is_torchs_default_because_accelerate_drops_its_own():
    t = timeout_of(watchdog(600000), framework="accelerate")
    assert (t.clock, t.seconds, t.source, t.next_clock) == ("pg-collective", 600, "pg-collective", "heartbeat-monitor")
    assert t.origin.startswith("torch default: 600 s") and "class default" in t.origin
    assert t.reachable.value is True and t.reachable.setting == "accelerate-init-kwargs"
    assert t.reachable.trap == "accelerate-dropped-default"
    assert "https://github.com/huggingface/accelerate/issues/2703" in t.references


def test_1800000_ms_under_hf_trainer_is_ddp_timeout():
    t = timeout_of(watchdog(1800000), framework="transformers", transformers_version="4.46.0")
    assert (t.clock, t.seconds, t.source) == ("pg-collective", 1800, "hf-ddp-timeout")
    assert t.origin.startswith("framework default:") and "ddp_timeout = 1800 s" in t.origin
    assert t.reachable.value is True and t.reachable.trap is None


def test_torchtitan_100_s_is_the_train_timeout():
    t = timeout_of(watchdog(100000), framework="torchtitan")
    assert (t.clock, t.seconds, t.source) == ("pg-collective", 100, "torchtitan-train-timeout")
    assert "train_timeout_seconds" in t.origin and t.reachable.value is True


def test_tcpstore_client_timeout_follows_the_process_group_timeout():
    t = timeout_of(STORE_CONNECT.format(s=1800), framework="transformers")
    assert (t.clock, t.seconds, t.source, t.next_clock) == ("init-store", 1800, "hf-ddp-timeout", "pg-collective")
    assert "follows the process-group timeout" in t.origin
    assert t.reachable.value is True and t.reachable.trap == "store-follows-pg-timeout"


# --- traps ----------------------------------------------------------------------------------------


def test_accelerate_with_deepspeed_gets_deepspeeds_30_minutes():
    t = timeout_of(watchdog(1800000), framework="accelerate", uses_deepspeed="yes")
    assert t.source == "deepspeed-timeout" and t.reachable.trap == "accelerate-deepspeed-path"
    assert "DEEPSPEED_TIMEOUT" in t.origin


@pytest.mark.parametrize("version, seconds, reaches, trap", [
    ("4.30.2", 600, False, "hf-plain-path-429-430"),
    ("4.31.0", 600, False, "hf-pg-created-early"),  # passed again: torch's default means the group existed already
    ("4.31.0", 1800, True, None),
])
def test_hf_plain_path_dropped_ddp_timeout_in_4_29_to_4_30(version, seconds, reaches, trap):
    t = timeout_of(watchdog(seconds * 1000), framework="transformers", transformers_version=version, torch_version="2.4.0")
    assert t.reachable.value is reaches and t.reachable.trap == trap


@pytest.mark.parametrize("version, source", [("4.24.0", "deepspeed-timeout"), ("4.25.1", "hf-ddp-timeout")])
def test_hf_passes_ddp_timeout_to_deepspeed_from_4_25(version, source):
    t = timeout_of(watchdog(1800000), framework="transformers", transformers_version=version, uses_deepspeed="yes")
    assert t.source == source
    assert t.reachable.value is (source == "hf-ddp-timeout")


def test_hf_ignores_ddp_timeout_with_use_cpu():
    t = timeout_of(watchdog(1800000), framework="trl", transformers_version="4.46.0", use_cpu="yes")
    assert t.reachable.value is False and t.reachable.trap == "hf-use-cpu"


def test_torchs_default_under_hf_means_the_group_existed_before_trainingarguments():
    t = timeout_of(watchdog(600000), framework="open-r1", transformers_version="4.46.0", torch_version="2.5.1")
    assert t.origin.startswith("torch default: 600 s")
    assert t.reachable.value is False and t.reachable.trap == "hf-pg-created-early"


def test_a_group_other_than_the_default_one_has_its_own_timeout():
    line = ("[rank3]:[E ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID 5(mesh_tp) Rank 3] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600019 milliseconds")
    t = timeout_of(line, framework="transformers", transformers_version="4.46.0")
    assert t.reachable.trap == "new-group-own-timeout" and t.reachable.value is False
    assert "2 (mesh_tp)" in t.origin


@pytest.mark.parametrize("version, resumed, reaches, trap", [
    ("0.2.2", "yes", False, "torchtitan-resumed-022"),
    ("0.3.0", "yes", True, None),
])
def test_torchtitan_022_never_switches_a_resumed_run_to_the_train_timeout(version, resumed, reaches, trap):
    t = timeout_of(watchdog(300000), framework="torchtitan", framework_version=version, resumed=resumed, phase="train")
    assert t.source == "torchtitan-init-timeout"
    assert t.reachable.value is reaches and t.reachable.trap == trap


def test_torchtitan_resume_is_read_from_its_checkpoint_line():
    log = ("[rank0]:[titan] 2025-03-01 10:00:00,000 - root - INFO - Loading the checkpoint from ./outputs/checkpoint/step-1000.\n"
           "[rank0]:[titan] 2025-03-01 10:01:00,000 - root - INFO - step: 1001  loss:  3.1  memory: 30.2GiB(38.2%)  tps: 5,120\n"
           + watchdog(300000))
    t = timeout_of(log, framework_version="0.2.2")
    assert t.reachable.trap == "torchtitan-resumed-022" and t.reachable.value is False


def test_deepspeed_timeout_is_in_minutes():
    t = timeout_of(watchdog(7200000), framework="deepspeed")
    assert "DEEPSPEED_TIMEOUT=120 (minutes)" in t.origin and t.reachable.trap == "deepspeed-minutes"


# --- which clock, by message ----------------------------------------------------------------------


def test_gloo_receive_timeout_is_gloos_own_clock_with_the_gloo_default():
    t = timeout_of("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms "
                   "for recv operation to complete", framework="pytorch")
    assert (t.clock, t.seconds, t.next_clock) == ("gloo-op", 1800, None)
    assert t.origin.startswith("torch default:")


def test_store_based_barrier_reads_the_printed_timedelta():
    t = timeout_of("RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: "
                   "store_based_barrier_key:1 (world_size=16, worker_count=8, timeout=0:45:00)", framework="pytorch")
    assert (t.clock, t.seconds) == ("store-based-barrier", 2700)


def test_rendezvous_timeout_prints_no_value_so_the_default_is_inferred():
    t = timeout_of("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", framework="lightning")
    assert (t.clock, t.seconds, t.inferred) == ("elastic-join", 600, True)
    assert t.reachable.value is False and t.reachable.trap == "rendezvous-not-framework"
    assert "join_timeout" in t.reachable.how


@pytest.mark.parametrize("version, seconds, origin", [("0.16.0", 120, "framework default"), ("0.17.0", 240, "framework default"),
                                                      ("0.16.0", 240, "explicit setting")])
def test_vllm_server_wait_default_by_trl_version(version, seconds, origin):
    t = timeout_of(f"ConnectionError: The vLLM server can't be reached at 0.0.0.0:8000 after {seconds}.0 seconds. Make sure the "
                   "server is running by running `trl vllm-serve`.", framework="trl", framework_version=version)
    assert (t.clock, t.seconds, t.next_clock) == ("vllm-server-wait", seconds, "vllm-weight-sync-store")
    assert t.origin.startswith(origin)


def test_weight_sync_store_is_vllms_300_s_which_ddp_timeout_does_not_reach():
    log = ("[W socket.cpp:463] [c10d] waitForInput: socket SocketImpl(fd=57, addr=[::ffff:10.0.0.3]:40112, "
           "remote=[ip-10-0-0-2]:51216) timed out after 300000ms")
    t = timeout_of(log, framework="open-r1")
    assert (t.clock, t.seconds) == ("vllm-weight-sync-store", 300)
    assert t.reachable.value is False and t.reachable.trap == "weight-sync-not-ddp-timeout"


@pytest.mark.parametrize("nccl, exponent, seconds", [("2.22.3", 18, 8.6), ("2.23.4", 20, 34.4), ("2.13.4", 14, 0.5)])
def test_ib_timeout_is_an_exponent_and_its_wait_inferred_by_nccl_version(nccl, exponent, seconds):
    log = (f"NCCL version {nccl}+cuda12.4\n"
           "gpu-b:3381:3402 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.0.12<42301> with "
           "status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.0.11 remoteGids::ffff:10.1.0.12")
    t = timeout_of(log)
    assert t.clock == "nccl-ib-timeout" and t.inferred
    assert f"NCCL_IB_TIMEOUT={exponent}" in t.origin and t.seconds == seconds
    assert t.reachable.trap == "ib-timeout-exponent"


@pytest.mark.parametrize("torch, seconds, kind", [("2.1.2", 1800, "torch default"), ("2.2.0", 600, "torch default"),
                                                  ("2.2.0", 1800, "explicit setting")])
def test_torchs_own_default_changed_in_2_2(torch, seconds, kind):
    t = timeout_of(watchdog(seconds * 1000), framework="pytorch", torch_version=torch)
    assert t.origin.startswith(kind)


HEARTBEAT_22 = "[E ProcessGroupNCCL.cpp:1223] [Rank 3] NCCL monitor thread timeout. Basically, this could be due to CUDA or NCCL calls"


@pytest.mark.parametrize("log, torch, seconds", [(HEARTBEAT_22, "2.2.0", 120), (HEARTBEAT_24, "2.3.1", 600),
                                                 (HEARTBEAT_24, "2.4.1", 600), (HEARTBEAT_24, "2.5.0", 480)])
def test_heartbeat_default_by_torch_version_when_the_message_prints_none(log, torch, seconds):
    """Read from ProcessGroupNCCL's constructor in the released wheels (getCvarInt defaults)."""
    t = timeout_of(log, torch_version=torch)
    assert (t.clock, t.seconds, t.inferred) == ("heartbeat-monitor", seconds, True)


@pytest.mark.parametrize("version, seconds, reaches", [("4.21.0", 600, False), ("4.22.0", 1800, True)])
def test_ddp_timeout_exists_from_transformers_4_22(version, seconds, reaches):
    t = timeout_of(watchdog(seconds * 1000), framework="transformers", framework_version=version, torch_version="2.2.0")
    assert t.reachable.value is reaches
    assert ("has no ddp_timeout" in t.origin) is (not reaches)


@pytest.mark.parametrize("version, seconds, forwarded", [("0.30.1", 1800, False), ("0.31.0", 600, False)])
def test_accelerates_class_default_by_version_is_never_forwarded(version, seconds, forwarded):
    ctx = timers.Context(Facts(values={"framework": FactValue(value="accelerate"), "framework_version": FactValue(value=version)}),
                         ["accelerate", "pytorch"])
    values = timers.defaults_for(KB.timers["accelerate-init-kwargs"], ctx, "nccl")
    assert [(v.value, v.forwarded) for v in values] == [(seconds, forwarded)]


def test_no_clock_no_timeout_object():
    assert timeout_of("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB") is None


def test_the_first_clock_in_time_wins_and_a_fact_alone_still_names_it():
    facts = Facts(values={"timeout_ms": FactValue(value=600000)},
                  events=[FailureEvent(kind="exception", line=1, text="ValueError: bad")])
    firing = timers.which_clock(KB, facts)
    assert firing.timer.id == "pg-collective" and firing.seconds == 600


def test_same_facts_same_object():
    a = timeout_of(watchdog(600000), framework="accelerate")
    b = timeout_of(watchdog(600000), framework="accelerate")
    assert a == b


# --- front ends -----------------------------------------------------------------------------------


def test_text_markdown_and_json_carry_the_timeout():
    d = diagnose(DiagnoseRequest(log=HEARTBEAT, answers={"framework": "trl"}), KB)
    text = render_text(d)
    assert "\nTimeout\n" in text and "heartbeat-monitor" in text and "does NOT reach it" in text
    md = render_markdown(d)
    assert "### Timeout" in md and "heartbeat-independent" in md
    result = run_cli("suggest", "--json", "--error", HEARTBEAT)
    data = json.loads(result.out)
    assert {"clock", "seconds", "origin", "reachable", "next_clock"} <= set(data["timeout"])
    assert data["timeout"]["reachable"]["value"] is False


def test_a_diagnosis_without_a_timeout_has_no_timeout_section():
    d = diagnose(DiagnoseRequest(log="torch.OutOfMemoryError: CUDA out of memory."), KB)
    assert d.timeout is None and "\nTimeout\n" not in render_text(d)


@pytest.mark.parametrize("answers, source, reaches", [
    ({"framework": "torchtitan", "phase": "init"}, "torchtitan-init-timeout", True),  # its init timeout is 300 s
    ({"framework": "transformers"}, "init-store", False),  # ddp_timeout is 1800: a 300 s store was built without one
    ({}, None, None),  # either, until the framework is known
])
def test_a_300_s_store_wait_is_the_store_default_only_where_no_setting_gives_300(answers, source, reaches):
    t = timeout_of("[c10d] wait timeout after 300000ms, keys: /default_pg/0//cuda//0", **answers)
    assert (t.clock, t.seconds, t.source) == ("init-store", 300, source)
    assert t.reachable.value is reaches
