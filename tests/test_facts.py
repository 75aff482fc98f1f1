"""Facts read from logs: collectives, ranks, versions, phase, first failure vs cascade."""

from __future__ import annotations

import pytest

from advisor.diagnose import read_log


def facts(kb, text: str) -> dict:
    return {k: v.value for k, v in read_log(kb, text).facts.values.items()}


def watchdog(rank: int, seq: int, op: str = "ALLREDUCE", tmo: int = 1800000, nin: int = 1, nout: int = 1, ts: str = "14:55:02") -> str:
    return (f"[rank{rank}]:[E217 {ts}.441 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={nin}, NumelOut={nout}, Timeout(ms)={tmo}) ran for {tmo + 33} milliseconds before timing out.")


def test_watchdog_fields(kb):
    f = facts(kb, watchdog(3, 38, "_ALLGATHER_BASE", 1800000, 9510912, 38043648))
    assert f["op_type"] == "_ALLGATHER_BASE" and f["op_family"] == "allgather"
    assert f["timeout_ms"] == 1800000 and f["ran_for_ms"] == 1800033 and f["seq_num"] == 38
    assert f["group_size"] == 4  # NumelOut / NumelIn of an all-gather
    assert f["ranks_reporting"] == [3] and f["first_failure"] == "timeout"


def test_reporters_silent_ranks_and_desync(kb):
    text = "\n".join([
        "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4",
        watchdog(1, 522), watchdog(2, 522), watchdog(3, 521, "BROADCAST"),
    ])
    f = facts(kb, text)
    assert f["world_size"] == 4
    assert f["ranks_reporting"] == [1, 2, 3]
    assert f["silent_ranks"] == [0]
    assert f["rank0_silent"] is True
    assert f["seq_spread"] is True


def test_op_mismatch_at_the_same_sequence_number(kb):
    f = facts(kb, watchdog(0, 77, "ALLREDUCE") + "\n" + watchdog(1, 77, "BROADCAST"))
    assert f["op_mismatch"] is True


def test_last_enqueued_and_completed_per_rank(kb):
    line = ("[rank2]:[E506 08:41:53.527 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 2] Exception (either an "
            "error or timeout) detected by watchdog at work: 59709, last enqueued NCCL work: 59709, last completed NCCL work: 59708.")
    f = facts(kb, line)
    assert f["rank_progress"]["2"]["last_enqueued"] == 59709
    assert f["rank_progress"]["2"]["last_completed"] == 59708


def test_versions_and_torch_inferred_from_wording(kb):
    f = facts(kb, "PyTorch version: 2.4.1+cu121\nNCCL INFO NCCL version 2.21.5+cuda12.4\n[pip3] trl==0.15.0\n")
    assert f["torch_version"] == "2.4.1+cu121" and f["nccl_version"] == "2.21.5" and f["cuda_version"] == "12.1"  # the torch build tag comes first
    reading = read_log(kb, "[rank0]:[E1 1:1:1 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 0] failure detected by watchdog at work sequence id: 5")
    torch = reading.facts.values["torch_version"]
    # the prefix format is torch >= 2.5's; the message's wording, which the line follows until it is cut, >= 2.6's
    assert torch.value[0] == "2.6.0" and torch.origin == "inferred" and "torch 2.6.0 .. " in torch.detail


def test_framework_detection_prefers_the_most_specific(kb):
    log = ("[INFO|2025-04-28 10:02:11] llamafactory.launcher:69 >> Initializing 16 distributed tasks at: 10.0.0.1:29500\n"
           "{'loss': 1.2, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.1}\n***** Running training *****\n")
    f = facts(kb, log)
    assert f["framework"] == "llama-factory"
    assert f["world_size"] == 16 and f["rendezvous_host"] == "10.0.0.1" and f["rendezvous_loopback"] is False


def test_phase_is_the_last_cue_before_the_first_failure(kb):
    log = "***** Running training *****\n{'loss': 1.0, 'epoch': 1.0}\nSaving model checkpoint to out/checkpoint-1\n" + watchdog(1, 900) + "\n***** Running Evaluation *****\n"
    assert facts(kb, log)["phase"] == "save"


def test_first_step_and_end_of_epoch_from_progress(kb):
    first = "{'loss': 1.0, 'epoch': 0.0}\n  0%|          | 1/1250 [00:03<1:10:12,  3.37s/it]\n" + watchdog(1, 38)
    assert facts(kb, first)["phase"] == "first-step"
    end = "{'loss': 1.0, 'epoch': 0.9}\n100%|██████████| 500/500 [05:00<00:00,  1.66it/s]\n" + watchdog(1, 9000)
    assert facts(kb, end)["phase"] == "end-of-epoch"


def test_first_failure_in_time_not_in_log_order(kb):
    # ranks' logs concatenated rank by rank: the OOM on rank 3 is later in the file but earlier in time
    log = "\n".join([
        watchdog(0, 3321, ts="10:30:00"),
        "[rank3]:[E217 10:01:00.000 x.cpp:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ])
    f = facts(kb, log)
    assert f["first_failure"] == "oom"


def test_cascade_exceptions_are_not_user_exceptions(kb):
    log = ("torch.distributed.DistBackendError: [Rank 0] Watchdog caught collective operation timeout\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")
    assert "user_exception" not in facts(kb, log)
    f = facts(kb, "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nKeyError: 'input_ids'\n")
    assert f["user_exception"] == "KeyError: 'input_ids'"
    assert f["exception_in_framework"] is False and f["exception_module"] == "user"


def test_exception_inside_framework_code(kb):
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/lib/python3.11/site-packages/trl/trainer/sft_trainer.py", line 448, in compute_loss\n'
           '  File "/usr/lib/python3.11/site-packages/torch/nn/functional.py", line 3086, in cross_entropy\n'
           "RuntimeError: shape mismatch\n")
    f = facts(kb, log)
    assert f["exception_module"] == "trl" and f["exception_in_framework"] is True


def test_cut_off_traceback_still_counts(kb):
    log = ("rank0]: Traceback (most recent call last):\n"
           '[rank0]:   File "torchtitan/torchtitan/train.py", line 541, in <module>\n'
           '[rank0]:   File "lib/python3.10/site-packages/torch/distributed/device_mesh.py", line 730, in __getitem__\n')
    f = facts(kb, log)
    assert "cut off" in f["user_exception"]
    assert f["exception_module"] == "torchtitan"


def test_a_cut_off_traceback_after_an_nccl_error_is_that_errors_stack(kb):
    """A traceback printed after NCCL reported an error, and cut before its last line, is most likely
    that error's own stack: it is not read as another rank's application exception."""
    stack = ("Traceback (most recent call last):\n"
             '  File "/opt/conda/bin/fairseq-train", line 33, in <module>\n'
             '  File "/workspace/fairseq/fairseq_cli/train.py", line 352, in cli_main\n')
    after = "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:514, invalid usage, NCCL version 2.6.3\n\n" + stack
    assert "user_exception" not in facts(kb, after)
    assert "cut off" in facts(kb, stack)["user_exception"]  # alone it still counts


def test_invalid_usage_at_set_up_points_to_two_ranks_on_one_gpu(kb):
    """Without NCCL_DEBUG the duplicate-GPU WARN is not printed; the bare ncclInvalidUsage at set-up
    still leads there (NCCL's only invalid-usage check while a communicator is created)."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    line = "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:514, invalid usage, NCCL version 2.6.3\n"
    d = diagnose(DiagnoseRequest(log=line), kb)
    assert d.causes[0].code == "duplicate-gpu-assignment" and d.status != "diagnosed"
    mid_training = diagnose(DiagnoseRequest(log=line, answers={"phase": "train"}), kb)
    assert mid_training.causes[0].code != "duplicate-gpu-assignment"


def test_loopback_rendezvous(kb):
    f = facts(kb, "[E socket.cpp:793] [c10d] The client socket has timed out after 1800s while trying to connect to (127.0.0.1, 43771).")
    assert f["rendezvous_loopback"] is True and f["store_timeout_s"] == 1800


def test_hosts_and_gpus_from_nccl_lines(kb):
    log = "\n".join(f"node{n}:1{n}{g}:1{n}{g} [{g}] NCCL INFO Bootstrap : Using eth0:10.0.0.{n}<0>" for n in range(2) for g in range(4))
    f = facts(kb, log)
    assert f["nodes"] == 2 and f["gpus_per_node"] == 4


def test_model_size_from_name_and_param_count(kb):
    assert facts(kb, "Saving model checkpoint to data/Qwen2.5-1.5B-Instruct/checkpoint-5")["model_size_b"] == 1.5
    assert facts(kb, "trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.06")["model_size_b"] == 6.74


def test_slowdown_before_failure(kb):
    steps = "\n".join(f"step: {i}  loss:  3.0  memory: 61.02GiB(77.12%)  tps: 4,100  mfu: 38.90%" for i in range(10, 60, 10))
    log = steps + "\nstep: 60  loss:  3.0  memory: 61.02GiB(77.12%)  tps: 90  mfu: 0.8%\n" + watchdog(7, 100, tmo=100000)
    assert facts(kb, log)["slowdown"] is True


def test_silent_hang_has_no_error_lines(kb):
    f = facts(kb, "Global seed set to 42\nEpoch 0:   0%|          | 0/1000 [00:00<?, ?it/s]\n")
    assert f["no_error_lines"] is True


def test_signals_and_exit_codes(kb):
    log = ("E1121 18:58:41.973000 19609 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 19730) of binary: python3\n"
           "  traceback : Signal 9 (SIGKILL) received by PID 19730\n")
    f = facts(kb, log)
    assert f["exit_code"] == -9 and f["signal"] == "SIGKILL" and f["first_failure"] == "killed"


def test_python_faulthandlers_fatal_signal_names_the_signal(kb):
    """faulthandler's "Fatal Python error: <signal>" (Modules/faulthandler.c): a segfault, bus error,
    illegal instruction or FPE is the process crashing; an abort is what NCCL's watchdog or C++'s
    terminate does after an error printed above it, so it is no failure of its own."""
    segv = "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f1205428b80 (most recent call first):\n"
    f = facts(kb, segv)
    assert f["signal"] == "SIGSEGV" and f["first_failure"] == "killed"
    assert facts(kb, segv.replace("Segmentation fault", "Floating-point exception"))["signal"] == "SIGFPE"
    assert facts(kb, segv.replace("Segmentation fault", "Floating point exception"))["signal"] == "SIGFPE"  # older CPython
    abort = facts(kb, segv.replace("Segmentation fault", "Aborted"))
    assert abort["signal"] == "SIGABRT" and "first_failure" not in abort
    assert "signal" not in facts(kb, "Fatal Python error: init_fs_encoding: failed to get the Python codec\n")


def test_prediction_and_lightning_eval_bars_are_the_eval_phase(kb):
    """Lightning names its bars "{Validation|Testing|Predicting|Sanity Checking} DataLoader N"
    (callbacks/progress/progress_bar.py); a script announcing its predictions is evaluating too."""
    for cue in ("Predicting DataLoader 0:  40%|████      | 2/5 [00:01<00:01,  2.10it/s]",
                "Sanity Checking DataLoader 0:   0%|          | 0/2 [00:00<?, ?it/s]",
                "Running predictions on sample val_0 on rank=0:  25%|██▌       | 1/4 [01:49<05:29, 109.87s/it]"):
        assert facts(kb, "{'loss': 1.0, 'epoch': 0.5}\n" + cue + "\n" + watchdog(1, 900))["phase"] == "eval", cue
    # a bar that only counts predictions made during training is no phase cue
    assert facts(kb, "{'loss': 1.0, 'epoch': 0.5}\nlogged 3 predictions to wandb\n" + watchdog(1, 900)).get("phase") != "eval"


def test_transformers_5_quoted_step_logs_are_training(kb):
    """transformers >= 5.0 prints the step dict's floats as strings (ProgressCallback.on_log,
    f"{v:.4g}"); 4.x printed numbers. Both are the train phase and carry the epoch."""
    for dict_line in ("{'loss': '4.153', 'grad_norm': '0.7983', 'learning_rate': '0.000875', 'epoch': '0.125'}",
                      "{'loss': 4.153, 'grad_norm': 0.7983, 'learning_rate': 0.000875, 'epoch': 0.125}"):
        bar = " 25%|██▌       | 2/8 [00:00<00:00, 19.73it/s]"
        f = facts(kb, "***** Running training *****\n" + bar + dict_line + "\n" + watchdog(1, 900))
        assert f["phase"] == "train" and f["step"] == 2, dict_line


def test_several_step_dicts_without_a_bar_are_past_the_first_step(kb):
    """A log file without progress bars (tqdm off, or not captured) still shows each logging step's
    dict: one dict is the first step, a second means training ran on."""
    line = "{'loss': 1.2, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.1}\n"
    assert facts(kb, "***** Running training *****\n" + line + watchdog(1, 900))["phase"] == "first-step"
    assert facts(kb, "***** Running training *****\n" + line * 3 + watchdog(1, 900))["phase"] == "train"


def test_a_loopback_transport_address_and_gloo_world(kb):
    gloo = ("RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:152]\n"
            "  timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:41233\n"
            "  (rank=8, size=16, local=[127.0.0.1])\n")
    f = facts(kb, gloo)
    assert f["loopback_transport"] is True and f["world_size"] == 16
    nccl = "gpu7:81:81 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>\n"
    assert facts(kb, nccl)["loopback_transport"] is True
    routable = ("timed out connecting: SO_ERROR: Connection refused, remote=[10.4.0.17]:41233\n"
                "gpu7:81:81 [0] NCCL INFO NET/Socket : Using [0]eth0:10.4.0.7<0>\n"
                "[rank0]: RuntimeError: Connection closed by peer [127.0.0.1]:38211\n")
    assert "loopback_transport" not in facts(kb, routable)


# What launchers put before each line (advisor.facts.LINE_PREFIX): the probes anchored at a line's
# start read through it.
LAUNCHER_PREFIXES = [
    "[rank1]:",                     # torchrun (torch >= 2.3's excepthook, --tee)
    "worker-1: ",                   # pdsh, DeepSpeed's multi-node runner
    "10.0.0.7: ",                   # pdsh with addresses in the hostfile
    "[1,3]<stderr>:",               # Open MPI mpirun --tag-output
    "Tue Jun  9 20:10:40 2020[1]<stderr>:",  # horovodrun
    "  3: ",                        # srun --label
    "(RayTrainWorker pid=4028, ip=10.0.0.3) ",  # Ray
    "2026-09-18 19:29:44 [rank1]:",  # a collector's timestamp, then torchrun's prefix
    "[2024-03-18 17:38:50,208] ",
]


@pytest.mark.parametrize("prefix", LAUNCHER_PREFIXES)
def test_line_anchored_facts_read_through_launcher_prefixes(kb, prefix):
    from advisor.facts import FACT_PROBES
    from advisor.regex import compile_pattern

    probes = {p.id: compile_pattern(p.pattern, p.ignore_case) for p in FACT_PROBES}
    expect = [
        ("exception-line", "KeyError: 'label_17'", "type", "KeyError"),
        ("nccl-host", "gpu-node7:4711:4790 [3] NCCL INFO Channel 00/02 :    0   1", "host", "gpu-node7"),
        ("elastic-rank", "  rank      : 3 (local_rank: 3)", "rank", "3"),
        ("topo-row", "GPU0     X      NV12    SYS", None, None),
    ]
    for probe, line, group, value in expect:
        m = probes[probe].search(prefix + line)
        assert m is not None, (probe, prefix)
        assert group is None or m.group(group) == value, (probe, prefix, m.group(group))
    log = "\n".join(prefix + line for line in [
        "Traceback (most recent call last):", '  File "/work/train.py", line 40, in compute', "    return table[key]",
        "KeyError: 'label_17'"])
    assert facts(kb, log)["user_exception"] == "KeyError: 'label_17'"


def test_an_exception_message_naming_another_exception_keeps_the_raised_type(kb):
    f = facts(kb, "Traceback (most recent call last):\n  File \"/w/t.py\", line 1, in <module>\n"
                  "RuntimeError: ValueError raised in a worker\n")
    assert f["user_exception"].startswith("RuntimeError: ValueError")


def test_the_nccl_transport_that_failed_comes_from_its_source_file(kb):
    """NCCL's error trail (`file:line -> code`) names each source file the error passed through; the
    first under src/transport/ says which transport failed. A WARN line is not read for it: it is
    already its own catalogued message (one line, one vote)."""
    trail = ("gpu3:811:902 [2] misc/socket.cc:484 NCCL WARN socketProgressOpt: Call to recv from 10.0.0.2<40021> failed : Connection reset by peer\n"
             "gpu3:811:902 [2] NCCL INFO misc/socket.cc:565 -> 6\n"
             "gpu3:811:902 [2] NCCL INFO transport/net_ib.cc:1120 -> 6\n"
             "gpu3:811:902 [2] NCCL INFO transport/net.cc:848 -> 6\n"
             "gpu3:811:902 [2] NCCL INFO transport/p2p.cc:402 -> 6\n")
    assert facts(kb, trail)["nccl_failed_transport"] == "ib"
    # NCCL < 2.4 printed WARN / INFO without "NCCL", from .cu files; newer releases split net_ib into a folder
    old = "node1:54573:54696 [1] include/socket.h:194 WARN Call to recv failed : Connection reset by peer\nnode1:54573:54696 [1] INFO transport/net_socket.cu:537 -> 2\n"
    assert facts(kb, old)["nccl_failed_transport"] == "socket"
    split = "h:1:2 [0] NCCL INFO transport/net_ib/connect.cc:812 -> 3\n"
    assert facts(kb, split)["nccl_failed_transport"] == "ib"
    shm = "h:1:2 [0] NCCL INFO transport/shm.cc:590 -> 1\n"
    assert facts(kb, shm)["nccl_failed_transport"] == "shm"
    # near misses: a connection announcement, a WARN site, a CUDA failure NCCL ignored (INFO), the generic net.cc
    quiet = ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
             "h:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.0.12<42301> with status=12\n"
             "h:1:2 [0] NCCL INFO transport/p2p.cc:7 Cuda failure 'invalid argument'\n"
             "h:1:2 [0] NCCL INFO transport/net.cc:848 -> 6\n")
    assert "nccl_failed_transport" not in facts(kb, quiet)


def test_a_bootstrap_system_error_in_the_trail_is_the_bootstrap_network(kb):
    """src/bootstrap.cc with ncclSystemError (2): a socket call of NCCL's init-time TCP connections
    failed. Its other codes (3 internal, 6 remote) are NCCL's own state; a transport further down
    the same trail still names the transport."""
    trail = ("n3:2330:2658 [2] NCCL INFO misc/socket.cc:567 -> 2\n"
             "n3:2330:2658 [2] NCCL INFO misc/socket.cc:618 -> 2\n"
             "n3:2330:2658 [2] NCCL INFO bootstrap.cc:270 -> 2\n")
    f = facts(kb, trail)
    assert f["nccl_failed_transport"] == "bootstrap"
    assert f["first_failure"] == "nccl-error" and "no_error_lines" not in f  # an NCCL error, not a silent hang
    assert "nccl_failed_transport" not in facts(kb, "h:1:2 [4] NCCL INFO bootstrap.cc:554 -> 3\n")
    assert "nccl_failed_transport" not in facts(kb, "[0] NCCL INFO bootstrap.cc:701 -> 6\n")
    assert "nccl_failed_transport" not in facts(kb, "h:1:2 [0] NCCL INFO bootstrap.cc:270 -> 25\n")


# an NCCL error trail, the transport its file names, and a near miss that must not point there
TRAIL_CAUSES = [
    ("n3:2331:2666 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP; OOB ibp75s0:192.168.0.103<0>\n"
     "n3:2330:2658 [2] NCCL INFO misc/socket.cc:567 -> 2\n"
     "n3:2330:2658 [2] NCCL INFO bootstrap.cc:270 -> 2\n", "wrong-network-interface", ("-> 2", "-> 3")),
    ("node1:54573:54696 [1] include/socket.h:194 WARN Call to recv failed : Connection reset by peer\n"
     "node1:54573:54696 [1] INFO transport/net_ib.cu:537 -> 2\n"
     "node1:54573:54696 [1] INFO bootstrap.cu:169 -> 2\n", "infiniband-rdma-issue", ("net_ib.cu", "net_socket.cu")),
]


@pytest.mark.parametrize("log,code,near_miss", TRAIL_CAUSES, ids=["bootstrap-socket", "ib-transport"])
def test_the_transport_an_error_trail_names_leads(kb, log, code, near_miss):
    """A bootstrap system error points to the interface NCCL picked (an internal error there does
    not); a trail through the IB transport points to InfiniBand (the socket transport's does not)."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    assert diagnose(DiagnoseRequest(log=log), kb).causes[0].code == code
    assert diagnose(DiagnoseRequest(log=log.replace(*near_miss)), kb).causes[0].code != code


def test_a_docker_bridge_address_is_read_where_ranks_pick_or_dial_it(kb):
    picked = "gpu-a:1201:1201 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n"
    bridged = "gpu-a:1201:1290 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.5<0>\n"
    dialed = "[E socket.cpp:922] [c10d] The client socket has timed out after 1800s while trying to connect to (172.17.0.2, 44737).\n"
    gloo = "RuntimeError: Connection refused, remote=[172.17.0.3]:41233\n"
    for text in (picked, bridged, dialed, gloo):
        assert facts(kb, text)["bridge_address"] is True, text
    # near misses: another private range, an address that only contains 172.17, a model path
    others = ("gpu-a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.172.17.5<0>\n"
              "[c10d] The client socket has timed out after 1800s while trying to connect to (172.16.0.2, 44737).\n"
              "loading /data/ckpt-172.17.3.1/model.safetensors\n")
    assert "bridge_address" not in facts(kb, others)


def test_a_bridge_address_that_never_answers_is_an_unreachable_address_not_a_late_start(kb):
    """A paste that wraps the address (so the rendezvous host is not read) and a later watchdog
    timeout: with a routable address a late start leads; a Docker bridge address explains it."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    log = ("Loading checkpoint shards: 100%|##########| 38/38 [00:33<00:00,  1.69it/s]\n"
           "[E socket.cpp:922] [c10d] The client socket has timed out after 1800s while trying to connect to ({host}\n, 44737).\n"
           "[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3856, "
           "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800268 milliseconds before timing out.\n")
    assert diagnose(DiagnoseRequest(log=log.format(host="172.17.0.2")), kb).causes[0].code == "rendezvous-unreachable"
    assert diagnose(DiagnoseRequest(log=log.format(host="10.0.1.75")), kb).causes[0].code == "slow-startup-skew"


# Frameworks' own progress lines, by the sources they were read in:
# OpenMMLab: mmcv's runner ('workflow: ..., max: N epochs') and TextLoggerHook, mmengine's LogProcessor;
# Megatron-LM: initialize.py, training.py, checkpointing.py, core/datasets (v2.6 .. main)
FRAMEWORK_PHASE_LINES = {
    "openmmlab": [
        ("2020-01-14 09:01:53,683 - mmdet - INFO - workflow: [('train', 1)], max: 12 epochs", "first-step"),
        ("2020-01-14 09:01:53,683 - mmseg - INFO - workflow: [('train', 1), ('val', 1)], max: 80000 iters", "first-step"),
        ("2020-01-14 09:05:53,683 - mmdet - INFO - Epoch [1][50/7330]\tlr: 1.000e-02, eta: 1 day, 2:03:04", "train"),
        ("2020-01-14 09:05:53,683 - mmseg - INFO - Iter [50/80000]\tlr: 9.997e-03, eta: 9:01:02", "train"),
        ("2023/01/14 09:05:53 - mmengine - INFO - Epoch(train)  [1][  50/7330]  lr: 1.0000e-02  eta: 1 day", "train"),
        ("2023/01/14 09:25:53 - mmengine - INFO - Epoch(val)  [1][ 100/5000]    eta: 0:03:00", "eval"),
        ("2020-01-14 09:25:53,683 - mmdet - INFO - Epoch(val) [1][500]\tbbox_mAP: 0.3000", "eval"),
    ],
    "megatron": [
        ("> initializing torch distributed ...", "init"),
        ("> compiling and loading fused kernels ...", "init"),
        (">>> done with compiling and loading fused kernels. Compilation time: 41.228 seconds", "init"),
        ("building GPT model ...", "init"),
        ("> building train, validation, and test datasets ...", "data-prep"),
        (" > building dataset index ...", "data-prep"),
        ("INFO:megatron.core.datasets.gpt_dataset:Build and save the GPTDataset train indices", "data-prep"),
        (" iteration      100/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): 1234.5 |", "train"),
        ("saving checkpoint at iteration    2000 to /ckpt in torch_dist format", "save"),
        ("Evaluating iter 10/100", "eval"),
    ],
}
# the same words in other shapes: no cue
FRAMEWORK_LOOK_ALIKES = {
    "openmmlab": "workflow: train, max: 12 epochs\nEpoch [1] done, loss 0.3\nIter 50/8000 lr 0.01\n",
    "megatron": "initializing torch distributed\nbuilding the model\niteration 100 consumed samples 51200\nEvaluation iter 10 of 100\n",
}


@pytest.mark.parametrize("framework, line, phase", [(fw, line, phase) for fw, rows in FRAMEWORK_PHASE_LINES.items()
                                                    for line, phase in rows])
def test_framework_progress_lines_say_the_phase(kb, framework, line, phase):
    assert facts(kb, line + "\n" + watchdog(1, 900))["phase"] == phase


@pytest.mark.parametrize("framework", sorted(FRAMEWORK_LOOK_ALIKES))
def test_framework_look_alikes_say_no_phase(kb, framework):
    assert "phase" not in facts(kb, FRAMEWORK_LOOK_ALIKES[framework] + watchdog(1, 900))
