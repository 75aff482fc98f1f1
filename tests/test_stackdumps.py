"""py-spy dumps of hung processes (advisor.stackdumps): which collective each process waits in,
which processes are outside any collective while others wait, and what those are doing. The dumps
in tests/fixtures/stackdumps were printed by py-spy 0.4.3 on real hung gloo jobs (its README)."""

from __future__ import annotations

from advisor.diagnose import diagnose
from advisor.models import DiagnoseRequest
from advisor.stack_activity import activity
from advisor.stackdumps import DumpFrame
from helpers import FIXTURES

DUMPS = FIXTURES / "stackdumps"


def run(kb, text: str):
    return diagnose(DiagnoseRequest(log=text), kb)


def fact(d, name):
    return d.facts.get(name)


def test_a_rank_saving_while_the_others_wait_is_the_save_straggler(kb):
    d = run(kb, (DUMPS / "save.txt").read_text())
    assert fact(d, "waiting_ops") == {"pid 24272": "barrier", "pid 24273": "barrier"}
    assert fact(d, "dump_stragglers") == ["pid 24271"]
    assert fact(d, "straggler_activity") == ["save"]
    assert "save_checkpoint (straggler.py:5)" in d.fact_sources["straggler_activity"].detail
    assert d.causes[0].code == "checkpoint-save-straggler"


def test_ranks_in_different_collectives_are_a_mismatch(kb):
    d = run(kb, (DUMPS / "mismatch.txt").read_text())
    assert fact(d, "waiting_ops") == {"pid 26737": "all_reduce", "pid 26738": "all_gather"}
    assert fact(d, "op_mismatch") is True
    assert fact(d, "dump_stragglers") is None  # everyone waits: nobody is being waited for
    assert d.causes[0].code == "collective-mismatch"


def test_a_rank_waiting_for_its_dataloader_and_not_the_helpers(kb):
    """torchrun's agent and the DataLoader worker are dumped too: neither is a rank."""
    text = (DUMPS / "data.txt").read_text()
    assert "SimpleElasticAgent._invoke_run" in text and "_worker_loop" in text
    d = run(kb, text)
    assert fact(d, "dump_stragglers") == ["pid 26908"]
    assert fact(d, "straggler_activity") == ["dataloader"]
    assert d.causes[0].code == "dataloader-worker-hang"


def test_every_process_in_the_same_collective_names_no_straggler(kb):
    text = (DUMPS / "save.txt").read_text()
    waiting_only = text[text.index("Process 24272"):]  # drop the saving rank's dump
    d = run(kb, waiting_only)
    assert fact(d, "waiting_ops") == {"pid 24272": "barrier", "pid 24273": "barrier"}
    assert fact(d, "dump_stragglers") is None and fact(d, "straggler_activity") is None
    assert fact(d, "op_mismatch") is None


def _processes(text: str):
    """The dumped processes the collector reads from `text` (the scanner's own probes)."""
    from advisor.facts import FactCollector
    from advisor.knowledge import load_kb
    from advisor.reader import iter_blocks
    from advisor.scan import scan

    collector = FactCollector()
    scan(iter_blocks(text), load_kb().probe_table, [collector])
    return collector.dumps.processes()


def _one_stack(frames: list[str]):
    (proc,) = _processes('Thread 7 (idle): "MainThread"\n' + "".join(f"    {f}\n" for f in frames))
    return proc.waits_in


NATIVE = """\
Thread 1302975 (active): "MainThread"
    sched_yield (libc.so.6)
    ncclLaunchKernelBefore_NoUncapturedCuda (enqueue.cc:968)
    groupLaunch (group.cc:339)
    ncclGroupEndInternal (group.cc:418)
    ncclEnqueueCheck (enqueue.cc:1981)
    ncclAllReduce (collectives.cc:49)
    c10d::ProcessGroupNCCL::allreduce_impl (ProcessGroupNCCL.cpp:3912)
    forward (vllm/distributed/device_communicators/pynccl.py:120)
    <module> (server.py:10)
Thread 1303001 (idle): "Thread-2"
    wait (threading.py:331)
    run (pin_memory.py:50)
"""


def test_native_frames_name_the_nccl_call():
    """`py-spy dump --native`: NCCL's entry point says which collective (no Python c10d frame)."""
    procs = _processes(NATIVE)
    assert [(p.key, p.waits_in) for p in procs] == [("pid 1302975", "all_reduce")]  # the pin-memory thread is no process


def test_rank_prefixes_key_the_processes_by_rank(kb):
    lines = []
    for rank, op in ((0, "all_reduce"), (1, "broadcast")):
        lines += [f'[rank{rank}]:Thread {100 + rank} (idle): "MainThread"',
                  f"[rank{rank}]:    {op} (torch/distributed/distributed_c10d.py:3252)",
                  f"[rank{rank}]:    <module> (train.py:9)"]
    d = run(kb, "\n".join(lines) + "\n")
    assert fact(d, "waiting_ops") == {"0": "all_reduce", "1": "broadcast"}
    assert fact(d, "op_mismatch") is True


def test_frame_lines_without_a_thread_header_are_not_a_dump(kb):
    """An indented `name (file.py:N)` line outside a dump (a model summary, a pasted listing)."""
    text = "model summary\n    all_reduce (torch/distributed/distributed_c10d.py:3252)\n    <module> (train.py:9)\n"
    d = run(kb, text)
    assert fact(d, "waiting_ops") is None


def test_a_stack_ends_at_a_gap():
    """Frame-like lines far below a dump's last frame belong to something else."""
    from advisor.stackdumps import FRAME_GAP, StackDumps

    dumps = StackDumps()
    dumps.thread(1, None, "7", "MainThread")
    dumps.frame(2, "train", "train.py", 3)
    dumps.frame(3 + FRAME_GAP, "all_reduce", "torch/distributed/distributed_c10d.py", 1)
    (proc,) = dumps.processes()
    assert proc.waits_in is None and [f.name for f in dumps.threads[0].frames] == ["train"]


def test_activity_reads_torch_frames_that_are_an_activity():
    frames = [DumpFrame("_try_get_data", "torch/utils/data/dataloader.py", 1291), DumpFrame("main", "mix.py", 16)]
    assert activity(frames) == "dataloader"
    assert activity([DumpFrame("save", "torch/serialization.py", 900), DumpFrame("step", "loop.py", 3)]) == "save"
    assert activity([DumpFrame("fetch", "torch/utils/data/_utils/fetch.py", 54)]) == "data"
    # other torch frames say nothing; the user's frame decides
    assert activity([DumpFrame("all_reduce", "torch/distributed/distributed_c10d.py", 1),
                     DumpFrame("evaluate", "trainer.py", 10)]) == "eval"
    assert activity([DumpFrame("all_reduce", "/venv/lib/torch/distributed/distributed_c10d.py", 1)]) is None


def test_verbose_output_names_the_process_and_its_frame(kb):
    from advisor.render import render_text

    text = render_text(run(kb, (DUMPS / "save.txt").read_text()), verbose=True)
    facts = text[text.index("\nFacts\n"):]
    assert "dump_stragglers = ['pid 24271']" in facts
    assert "pid 24271 is in save_checkpoint (straggler.py:5)" in facts


def test_the_debug_servers_rank_headers_key_the_processes(kb):
    """torch >= 2.11's debug server (torch/distributed/debug/_debug_handlers.py, PySpyHandler.dump)
    joins every rank's py-spy dump under '=== Rank <i>: <address> ==='."""
    text = (DUMPS / "mismatch.txt").read_text()
    first, second = text.index("Process 26737"), text.index("Process 26738")
    joined = ("=== Rank 0: 10.0.0.1:8090 ===\n" + text[first:second]
              + "=== Rank 1: 10.0.0.2:8090 ===\n" + text[second:])
    d = run(kb, joined)
    assert fact(d, "waiting_ops") == {"0": "all_reduce", "1": "all_gather"}
    assert fact(d, "op_mismatch") is True


def test_ddp_and_native_calls_that_wait():
    """DDP's constructor broadcasts the module states from distributed/utils.py (torch 2.13); NCCL's
    all-to-all entry point is ncclAlltoAll (src/collectives.cc)."""
    assert _one_stack(["_sync_params_and_buffers (torch/distributed/utils.py:318)",
                       "_sync_module_states (torch/distributed/utils.py:300)",
                       "__init__ (torch/nn/parallel/distributed.py:835)", "<module> (train.py:9)"]) == "broadcast"
    assert _one_stack(["_sync_buffers (torch/nn/parallel/distributed.py:2100)", "<module> (train.py:9)"]) == "broadcast"
    assert _one_stack(["ncclAlltoAll (collectives.cc:98)", "<module> (train.py:9)"]) == "all_to_all"
    # the same function names in another file are not DDP's
    assert _one_stack(["_sync_buffers (mylib/sync.py:3)", "<module> (train.py:9)"]) is None


# Python's faulthandler dumps (CPython Python/traceback.c). The fixtures are real: the same programs
# under `PYTHONFAULTHANDLER=1 torchrun --nproc_per_node N --tee 3`, every rank sent SIGABRT while
# hung (what NCCL's watchdog does to a timed-out rank), as the fixtures' README says.

def test_faulthandler_dumps_name_the_save_straggler_though_their_lines_interleave(kb):
    text = (DUMPS / "faulthandler-save.txt").read_text()
    # the ranks aborted at once: rank 1's last frame arrives after rank 0's whole dump
    assert text.index("[default0]:Fatal Python error") < text.index("[default1]:  File \"/work/straggler.py\", line 17 in <module>")
    d = run(kb, text)
    assert fact(d, "waiting_ops") == {"1": "barrier", "2": "barrier"}
    assert fact(d, "dump_stragglers") == ["rank 0"]
    assert fact(d, "straggler_activity") == ["save"]
    assert d.causes[0].code == "checkpoint-save-straggler"


def test_faulthandler_dumps_in_different_collectives_are_a_mismatch(kb):
    d = run(kb, (DUMPS / "faulthandler-mismatch.txt").read_text())
    assert fact(d, "waiting_ops") == {"0": "all_reduce", "1": "all_gather"}
    assert fact(d, "op_mismatch") is True
    assert d.causes[0].code == "collective-mismatch"


def _unprefixed_dumps(text: str) -> str:
    """Each rank's lines in turn, their prefixes removed: the per-rank error files of `torchrun
    --redirect 3 --log-dir` pasted one after another."""
    import re

    lines = [re.match(r"\[default(\d)\]:(.*)", line) for line in text.splitlines()]
    by_rank: dict[str, list[str]] = {}
    for m in lines:
        if m:
            by_rank.setdefault(m.group(1), []).append(m.group(2))
    return "\n".join("\n".join(by_rank[r]) for r in sorted(by_rank)) + "\n"


def test_unprefixed_faulthandler_dumps_are_one_process_each():
    text = _unprefixed_dumps((DUMPS / "faulthandler-save.txt").read_text())
    assert "[default" not in text and text.count("Fatal Python error: Aborted") == 3
    procs = _processes(text)
    assert [(p.key, p.waits_in, p.activity) for p in procs] == [
        ("dump 1", None, "save"), ("dump 2", "barrier", None), ("dump 3", "barrier", None)]


def test_threads_of_one_faulthandler_dump_are_one_process():
    """faulthandler.dump_traceback(all_threads=True): the threads of one process, a blank line
    apart; only the thread that runs the script counts, once."""
    text = ("Timeout (0:05:00)!\n"
            "Thread 0x00007ff58249a6c0 (most recent call first):\n"
            '  File "/usr/lib/python3.11/threading.py", line 331 in wait\n'
            '  File "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/pin_memory.py", line 50 in _pin_memory_loop\n'
            '  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap\n'
            "\n"
            "Thread 0x00007ff583019b80 [python] (most recent call first):\n"
            '  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252 in all_reduce\n'
            '  File "/work/train.py", line 9 in <module>\n')
    assert [(p.key, p.waits_in) for p in _processes(text)] == [("dump 1", "all_reduce")]


def test_a_faulthandler_dump_without_the_script_frame_is_no_rank(kb):
    """A rank aborted inside an exception hook (or with no Python frame) shows no training loop:
    the cascade fixture's rank 1 and 2 (rank 0 was saving, the others' barrier broke)."""
    text = (DUMPS / "faulthandler-cascade.txt").read_text()
    assert "in _distributed_excepthook" in text and "<no Python frame>" in text
    assert [(p.key, p.activity) for p in _processes(text)] == [("dump 1", "save")]
    d = run(kb, text)
    assert fact(d, "dump_stragglers") is None  # nobody dumped waiting: nothing to compare with
    assert d.causes[0].code == "checkpoint-save-straggler"


def test_torchruns_failure_summary_names_the_rank_of_a_dumped_pid(kb):
    """py-spy keys a dump by pid; torchrun's failure summary pairs each failed rank with its pid
    ("rank : 0 (local_rank: 0)" then "exitcode : -15 (pid: N)"), so the dump and the rank's own
    traceback are one process, not two (the recorded run: py-spy taken while it hung, then the
    timeout and the summary)."""
    from helpers import REPO

    text = (REPO / "kb/recorded/save-straggler--torchrun-py-spy.log").read_text()
    assert "Process 29712:" in text and "exitcode  : -15 (pid: 29712)" in text
    d = run(kb, text)
    assert fact(d, "waiting_ops") == {"1": "all_reduce"}
    assert fact(d, "dump_stragglers") == ["rank 0"] and fact(d, "straggler_activity") == ["save"]
    # near miss: an exit code with a pid far from any summary rank line names no rank
    far = text.replace("  exitcode  : -15 (pid: 29712)", "\n" * 5 + "  exitcode  : -15 (pid: 29712)")
    assert fact(run(kb, far), "dump_stragglers") == ["pid 29712"]


def test_recorded_runs_aborted_with_faulthandler_name_the_saving_rank(kb):
    """The save-straggler runs recorded with PYTHONFAULTHANDLER=1 and every rank sent SIGABRT while
    it hung (repro/scenarios.yaml `abort_after`): under torchrun and the HF Trainer the aborted
    ranks' stacks say rank 0 was saving while rank 1 waited in a collective."""
    from helpers import REPO

    for run_id, op in (("save-straggler--torchrun-faulthandler", "all_reduce"),
                       ("save-straggler--hf-trainer-faulthandler", "all_gather")):
        text = (REPO / "kb/recorded" / f"{run_id}.log").read_text()
        assert text.count("Fatal Python error: Aborted") == 2
        d = run(kb, text)
        assert fact(d, "waiting_ops") == {"1": op}, run_id
        assert fact(d, "dump_stragglers") == ["rank 0"] and fact(d, "straggler_activity") == ["save"], run_id
        assert d.causes[0].code == "checkpoint-save-straggler"
