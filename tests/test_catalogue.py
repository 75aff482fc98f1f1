"""The message catalogue as the scanner sees it: every searched message is found by the block path
(the alternation of leading literals and whole patterns), NCCL's through its line gate, and the
coverage report has the promised shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.catalogue import coverage, render
from advisor.reader import iter_blocks
from advisor.regex import compile_bytes_alternation, leading_literals
from advisor.scan import scan


class Found:
    def __init__(self):
        self.ids: set[str] = set()

    def on_hit(self, hit):
        if hit.probe.id.startswith("msg:"):
            self.ids.add(hit.probe.id[4:])


def block_path_finds(kb, text: str, monkeypatch) -> set[str]:
    import advisor.scan as scan_module

    monkeypatch.setattr(scan_module, "SMALL_LINES", -1)  # the path a big log takes
    listener = Found()
    scan(iter_blocks(text + "\n"), kb.probe_table, [listener])
    return listener.ids


def printed(kb, message) -> str:
    text = message.sample if message.sample is not None else render(message.text)
    if kb.message_files[message.id.split(".", 1)[0]]["software"] == "nccl" and "NCCL WARN" not in text and "NCCL INFO" not in text:
        level = "WARN" if message.level != "info" else "INFO"
        return f"gpu-node-3:4242:4300 [1] misc/file.cc:123 NCCL {level} {text}"
    return text


def test_every_searched_or_gated_message_is_found_on_the_block_path(kb, monkeypatch):
    missed = []
    for probe in kb.probe_table.probes:
        if not probe.id.startswith("msg:"):
            continue
        message = probe.payload[0]
        gated = kb.message_files[message.id.split(".", 1)[0]]["software"] == "nccl"
        if not (probe.searched or gated):
            continue  # a passenger: explained on lines other probes find
        if message.id not in block_path_finds(kb, printed(kb, message), monkeypatch):
            missed.append(message.id)
    assert not missed, f"{len(missed)} messages not found on the block path, e.g. {missed[:10]}"


def test_a_passenger_is_explained_on_a_line_another_probe_found(kb, monkeypatch):
    passengers = [p.payload[0] for p in kb.probe_table.probes if p.id.startswith("msg:") and not p.searched
                  and kb.message_files[p.payload[0].id.split(".", 1)[0]]["software"] != "nccl"]
    if not passengers:
        pytest.skip("every message is searched")
    message = passengers[0]
    line = "RuntimeError: " + printed(kb, message) + " (exception)"
    assert message.id in block_path_finds(kb, line, monkeypatch)


def test_leading_literals_stand_for_the_start_of_a_pattern():
    assert leading_literals("Cannot re-initialize CUDA in forked subprocess") == (r"cannot[ \t]+re\-initialize[ \t]+cud",)
    assert leading_literals(r"(?:Invalid rank requested|Rank \d+ is out of range)") is None  # "rank" alone is too common
    assert leading_literals(r"Checkpoint \S+ is about to be saved") is None  # one common word
    assert leading_literals(r"(?m)^host:\d+ NCCL WARN") is None  # line anchors: kept whole
    assert leading_literals(r"\bWatchdog caught collective operation timeout") == (r"watchdog[ \t]+caught[ \t]+collecti",)  # cut at MAX_LEAD


def test_the_literal_alternation_matches_what_the_literals_say():
    fragments = sorted(set(leading_literals(r"NET/IB : Got completion from peer (\S+)") or ()) | set(
        leading_literals(r"op\.preamble\.length <= op\.nbytes\. \d+ vs \d+") or ()))
    assert fragments
    alternation = compile_bytes_alternation(["(?i:" + "|".join(fragments) + ")"], ignore_case=False)
    assert alternation.search(b"x NET/IB : Got completion from peer 10.0.0.1<4000> with status=12")
    assert alternation.search(b"op.preamble.length <= op.nbytes. 64 vs 32")
    assert not alternation.search(b"NET/IB: using mlx5_0")


def test_coverage_reports_every_component(kb):
    report = coverage(kb.message_files, kb.messages)
    assert report["messages"] == len(kb.messages) and report["mapped"] <= report["messages"]
    assert set(report["components"]) == set(kb.message_files)
    for name, row in report["components"].items():
        assert row["messages"] == sum(1 for m in kb.messages if m.split(".", 1)[0] == name)
        assert row["mapped"] == row["messages"] - row["context"]
        assert row["mined_from"], f"{name} says where its messages were read"


def _message(id_, text, pattern, cause="master-unreachable", role="cause"):
    from advisor import schema

    points = [schema.PointsTo(cause=cause, weight=3)] if role == "cause" else []
    return schema.Message(id=id_, level="warn", text=text, pattern=pattern, source="x.cc",
                          meaning="a message for the collision test", role=role, points_to=points)


def test_a_pattern_that_claims_another_messages_wording_is_reported():
    from advisor.catalogue import collisions

    short = _message("c.connect", "Connect to %s failed", r"Connect to \S+ failed")
    long = _message("c.connect-refused", "Connect to %s failed : Connection refused", r"Connect to \S+ failed : Connection refused",
                    cause="wrong-socket-interface")
    problems = collisions([short, long])
    assert [p[0] for p in problems] == ["c.connect"] and "c.connect-refused" in problems[0][1]
    same_way = long.model_copy(update={"points_to": short.points_to})
    assert collisions([short, same_way]) == []  # the same message, extended: allowed
    case = _message("c.upper", "CONNECT TO %s FAILED", r"CONNECT TO \S+ FAILED").model_copy(update={"case_sensitive": True})
    assert collisions([case, long]) == []


# Wordings that cause files used to match with their own regexes before the catalogue entry that
# prints them became the evidence: each must still count for its cause, whichever of the two holds it.
MOVED_TO_THE_CATALOGUE = {
    "dataloader-worker-died": ["RuntimeError: DataLoader worker (pid 2121) is killed by signal: Killed.",
                               "RuntimeError: DataLoader worker (pid(s) 123, 456) exited unexpectedly"],
    "rank-killed": ["  exitcode  : -9 (pid: 1234)",
                    "E1123 10:00:00.000 1 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 0 (pid: 1) of binary: /venv/bin/python",
                    "torch.distributed.elastic.multiprocessing.api.SignalException: Signal 9 (SIGKILL) received by PID 1234"],
    "dev-shm-too-small": ["node3:2710:2730 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-1 (size 9637888)",
                          "node3:2710:2730 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637888 bytes, error: No space left on device (28)",
                          " 3 0x0000000000068d6c ncclShmOpen()  ???:0"],
    "ib-rdma-fault": ["gpu-b:3381:3402 [0] NCCL WARN NET/IB : Got async event : port error",
                      "gpu-b:3381:3402 [0] NCCL WARN NET/IB : Got non-fatal async event: GID table change"],
    "nccl-plugin-noise": ["gpu-a:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
                          "gpu-a:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."],
    "pcie-p2p-broken": ["gpu-c:5512:5620 [2] transport/p2p.cc:275 NCCL WARN failed to peer with device 3(=3b000): 217 peer access is not supported between these two devices",
                        "gpu-c:5512:5620 [2] NCCL WARN Cuda failure 'peer access is not supported between these two devices'",
                        "gpu-c:5512:5620 [2] NCCL WARN cudaIpcOpenMemHandle failed : invalid argument"],
    "world-size-mismatch": ["gpu-a:1:1 [0] init.cc:1120 NCCL WARN Invalid rank requested : 8/8"],
    "wrong-socket-interface": ["gpu-a:1:1 [0] misc/socket.cc:484 NCCL WARN Net : Connect to 10.0.0.2<45311> failed : No route to host"],
    "ddp-unused-parameters": ["RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.",
                              "Parameter indices which did not receive grad for rank 1: 2 3"],
    "python-exception-on-rank": ["KeyError: Caught KeyError in DataLoader worker process 0."],
}


@pytest.mark.parametrize("cause,line", [(c, l) for c, lines in MOVED_TO_THE_CATALOGUE.items() for l in lines])
def test_a_wording_moved_from_a_cause_to_the_catalogue_still_counts_for_it(cause, line):
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    found = {c.id: c for c in diagnose(DiagnoseRequest(log=line, max_causes=50)).causes}
    assert cause in found and found[cause].evidence["lines"], (cause, line, list(found)[:5])


def test_catalogue_captures_feed_what_the_reading_reasons_with(kb):
    """The store's clients-joined message is read by its catalogue entry alone (its own probe in
    advisor/facts.py is gone), and the world size it captures is there when the reading reasons
    about ranks: the ranks the world holds that reported nothing are the silent ones."""
    from advisor.diagnose import read_log
    from advisor.facts import FACT_PROBES

    assert "clients-joined" not in {p.id for p in FACT_PROBES}
    log = ("[rank1]:[E217 14:55:02.441 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600033 milliseconds before timing out.\n"
           "torch.distributed.DistStoreError: Timed out after 30 seconds waiting for clients. 2/4 clients joined.\n")
    values = read_log(kb, log).facts.values
    assert values["clients_joined"].value == 2 and values["world_size"].value == 4 and values["store_timeout_s"].value == 30
    assert values["silent_ranks"].value == [0, 2, 3]


def test_an_nccl_message_that_points_to_a_cause_is_found_without_its_prefix_on_both_paths(kb, monkeypatch):
    """Users paste NCCL's text without the `host:pid [dev] file.cc:N NCCL WARN` prefix: a message
    that points to a cause is found either way, and a big log (the block path) finds what a small
    paste (the line-by-line path) finds, whatever the process scanned before."""
    from advisor.scan import _hits_small

    owned = [p.payload[0] for p in kb.probe_table.probes if p.id.startswith("msg:") and p.payload[1]
             and kb.message_files[p.payload[0].id.split(".", 1)[0]]["software"] == "nccl"]
    assert len(owned) > 100
    missed = []
    for message in owned:
        bare = message.sample if message.sample is not None else render(message.text)
        if "NCCL WARN" in bare or "NCCL INFO" in bare:
            continue
        small = {h.probe.id[4:] for h in _hits_small((bare + "\n").encode(), 1, kb.probe_table) if h.probe.id.startswith("msg:")}
        if message.id in small and message.id not in block_path_finds(kb, bare, monkeypatch):
            missed.append(message.id)
    assert not missed, f"{len(missed)} bare NCCL messages found by a small paste but not in a big log, e.g. {missed[:10]}"


# --- CUDA errors NCCL quotes (kb/messages/cuda-runtime.yaml, tools/mine/cuda_runtime.py) ------------


def _cuda_string(message) -> str:
    return message.text[len("Cuda failure '"):-1]


def test_a_cuda_error_means_the_same_whether_torch_or_nccl_reports_it(kb):
    """The CUDA error string, not its wrapper, says what failed: an entry for NCCL's `Cuda failure
    '...'` points to the same causes, with the same weights, as torch's `CUDA error: ...` entry."""
    nccl = [m for m in kb.messages.values() if m.id.startswith("cuda-runtime.")]
    torch = {m.text[len("CUDA error: "):]: m for m in kb.messages.values()
             if m.id.startswith("c10-cuda.") and m.text.startswith("CUDA error: ") and m.points_to}
    assert len(nccl) >= len(torch) >= 15
    assert set(torch) <= {_cuda_string(m) for m in nccl}  # every CUDA error torch's entries map
    for m in nccl:
        twin = torch.get(_cuda_string(m))
        if twin is not None:
            assert [(p.cause, p.weight) for p in m.points_to] == [(p.cause, p.weight) for p in twin.points_to], m.id
            assert m.event == twin.event, m.id


def test_each_cuda_error_is_found_in_both_of_nccls_wrappers_and_never_in_an_ignored_one(kb):
    from advisor.regex import compile_pattern

    for m in (m for m in kb.messages.values() if m.id.startswith("cuda-runtime.")):
        text, regex = _cuda_string(m), compile_pattern(m.pattern, not m.case_sensitive)
        assert regex.search(f"gpu-a:1:2 [3] enqueue.cc:58 NCCL WARN Cuda failure '{text}'"), m.id  # runtime call
        assert regex.search(f"gpu-a:1:2 [3] misc/cudawrap.cc:9 NCCL WARN Cuda failure 2 '{text}'"), m.id  # driver call, 2.19.1+
        assert regex.search(f"ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure '{text}'"), m.id
        assert not regex.search(f"gpu-a:1:2 [3] NCCL INFO transport/p2p.cc:7 Cuda failure '{text}'"), m.id  # NCCL went on


@pytest.mark.parametrize("line, cause", [
    ("node1:1933:1933 [0] enqueue.cc:58 NCCL WARN Cuda failure 'no kernel image is available for execution on the device'",
     "nccl-cuda-version-mismatch"),
    ("gpu-a:11:12 [1] init.cc:7 NCCL WARN Cuda failure 'invalid device ordinal'", "world-size-mismatch"),
    ("gpu-a:11:12 [1] init.cc:7 NCCL WARN Cuda failure 'uncorrectable ECC error encountered'", "gpu-xid-ecc"),
])
def test_a_cuda_error_in_an_nccl_warning_names_its_cause(kb, line, cause):
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    d = diagnose(DiagnoseRequest(log=line), kb)
    assert d.causes[0].id == cause and d.status == "diagnosed"


def test_refines_lets_a_format_and_its_instance_share_lines_and_nothing_else():
    from advisor.catalogue import collisions

    general = _message("c.cuda-failure", "Cuda failure '%s'", r"NCCL WARN Cuda failure '", role="context")
    general = general.model_copy(update={"sample": "h:1:1 [0] x.cc:7 NCCL WARN Cuda failure 'out of memory'"})
    oom = _message("c.cuda-oom", "Cuda failure 'out of memory'", r"NCCL WARN Cuda failure 'out of memory",
                   cause="cuda-oom").model_copy(update={"sample": "h:1:1 [0] x.cc:7 NCCL WARN Cuda failure 'out of memory'"})
    assert {p[0] for p in collisions([general, oom])} == {"c.cuda-failure", "c.cuda-oom"}  # undeclared: reported both ways
    declared = oom.model_copy(update={"refines": ["c.cuda-failure"]})
    assert collisions([general, declared]) == []
    other = _message("c.other", "Some other failure", r"NCCL WARN Cuda failure 'out", cause="cuda-oom")
    assert collisions([general, declared, other.model_copy(update={"sample": "NCCL WARN Cuda failure 'out of memory'"})])


def test_a_refines_that_names_no_message_or_an_unrelated_one_is_a_kb_error(kb):
    import copy

    from advisor.knowledge import cross_check

    broken = copy.copy(kb)
    broken.messages = dict(kb.messages)
    oom = kb.messages["cuda-runtime.error-out-of-memory"]
    broken.messages[oom.id] = oom.model_copy(update={"refines": ["nccl-misc.no-such-format", "nccl-ib.call-ibv-poll-cq-returned"]})
    problems = [e.message for e in cross_check(broken) if "refines" in e.field]
    assert any("unknown message id 'nccl-misc.no-such-format'" in p for p in problems)
    assert any("nccl-ib.call-ibv-poll-cq-returned and this message share no line" in p for p in problems)
    assert not [e for e in cross_check(kb) if "refines" in e.field]


@pytest.mark.parametrize("line", [
    "ValueError: You need to use at least 2 processes to use `--multi_gpu`.",
    "ValueError: Less than two GPU ids were configured and tried to run on multiple GPUs. Please ensure at least two are "
    "specified for `--gpu_ids`, or use `--gpu_ids='all'`.",
    "lightning.fabric.utilities.exceptions.MisconfigurationException: `Trainer(devices=4)` value is not a valid input "
    "using cuda accelerator.",
    "ValueError: LOCAL_RANK must be set before selecting a local device.",
])
def test_a_launcher_refusing_its_process_or_device_count_is_a_world_size_misconfiguration(kb, line):
    """accelerate launch, Lightning's accelerator connector and torchtitan stop before any process
    group exists when the processes, GPUs or nodes asked for do not fit: the world-size cause leads."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    d = diagnose(DiagnoseRequest(log=line), kb)
    assert d.causes[0].id == "world-size-mismatch" and d.causes[0].code == "rank-world-size-misconfig"


def test_accelerates_rtx_4000_notice_is_harmless(kb):
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    d = diagnose(DiagnoseRequest(log="Using RTX 4000 series which doesn't support faster communication speedups. "
                                     "Ensuring P2P and IB communications are disabled."), kb)
    assert d.causes[0].benign and d.status != "diagnosed"


# --- the process runtime (kb/messages/cxx-runtime.yaml, python-runtime.yaml, shell.yaml, dynamic-loader.yaml;
# tools/mine/runtime_strings.py) ---


PLUGIN_MISSING = ("gpu-a:4100:4100 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: "
                  "No such file or directory No plugin found (libnccl-net.so), using internal implementation\n")
PLUGIN_BROKEN = ("gpu-a:4100:4100 [0] NCCL INFO NET/Plugin : dlerror=/opt/amazon/efa/lib/libfabric.so.1: version `FABRIC_1.7' "
                 "not found (required by /opt/conda/lib/libnccl-net.so) No plugin found (libnccl-net.so), using internal "
                 "implementation\n")


def test_a_plugin_that_is_there_but_cannot_load_is_not_harmless(kb):
    """NCCL's "No plugin found" is harmless when there is no plugin; when the loader says the plugin is
    there but needs a newer library (a symbol version), the line refines the harmless format: NCCL fell
    back to sockets on a broken install, a version mismatch."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    missing = diagnose(DiagnoseRequest(log=PLUGIN_MISSING), kb)
    assert missing.causes[0].code == "benign-warning" and missing.notices
    broken = diagnose(DiagnoseRequest(log=PLUGIN_BROKEN), kb)
    assert broken.causes[0].code == "version-mismatch"
    assert not [n for n in broken.notices if n.kind == "harmless"]  # the line is not listed as harmless any more
    assert "dynamic-loader.version-not-found" in {m.id for m in broken.messages}


def _runtime_miner():
    import importlib.util

    from helpers import REPO

    spec = importlib.util.spec_from_file_location("runtime_strings_miner", REPO / "tools/mine/runtime_strings.py")
    miner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(miner)
    return miner


@pytest.mark.parametrize("component", ["cxx-runtime", "python-runtime", "shell", "dynamic-loader"])
def test_the_runtime_texts_are_the_librarys_strings(component):
    """Each fixed piece of libstdc++'s terminate texts, CPython's fatal-error and faulthandler texts
    and bash's job reports (with libc's signal names) is a string of the library that prints it (where this machine has it: libstdc++.so.6 at
    the Debian/Ubuntu path, the running interpreter's libpython); a made-up text is not."""
    miner = _runtime_miner()
    lib = miner.default_lib(component)
    if not lib.is_file():
        pytest.skip(f"no {lib} here")
    strings = miner.component_strings(component, lib)
    assert miner.missing(miner.load(component), strings) == []
    made_up = {"messages": [{"id": "x", "text": "terminate called after catching %s"},
                            {"id": "y", "text": "Fatal Python error: Out of coffee"}]}
    assert [mid for mid, _ in miner.missing(made_up, strings)] == ["x", "y"]


def test_an_uncaught_cxx_exception_is_read_by_its_type(kb):
    """`std::bad_alloc` escaping is the host out of memory; the watchdog's `c10::DistBackendError`
    escaping is the abort that follows a timeout, which names nothing by itself."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    bad_alloc = ("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n"
                 "E1127 10:00:00.000000 7 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) "
                 "local_rank: 0 (pid: 12) of binary: /usr/bin/python3\n")
    assert diagnose(DiagnoseRequest(log=bad_alloc), kb).causes[0].code == "host-oom-or-killed"
    timeout = ("[rank1]:[E1127 10:00:00.000 ProcessGroupNCCL.cpp:1700] [PG ID 0 PG GUID 0(default_pg) Rank 1] Watchdog caught "
               "collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
               "ran for 600011 milliseconds before timing out.\n")
    cascade = timeout + "[rank1]:terminate called after throwing an instance of 'c10::DistBackendError'\n"
    alone, with_abort = diagnose(DiagnoseRequest(log=timeout), kb), diagnose(DiagnoseRequest(log=cascade), kb)
    assert [c.code for c in with_abort.causes[:3]] == [c.code for c in alone.causes[:3]]
    assert "cxx-runtime.terminate-after-throwing" in {m.id for m in with_abort.messages}


def test_a_refinement_found_on_a_line_replaces_its_general_message(kb):
    """faulthandler's `Fatal Python error: Aborted` is explained as the abort it is, not as the
    general `Fatal Python error: %s`; a general line of its own stays (the real fixture, plus an
    interpreter error of another kind)."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest
    from helpers import FIXTURES

    text = (FIXTURES / "stackdumps" / "faulthandler-save.txt").read_text()
    ids = {m.id for m in diagnose(DiagnoseRequest(log=text), kb).messages}
    assert "python-runtime.fatal-aborted" in ids and "python-runtime.fatal-error" not in ids
    assert "python-runtime.thread-stack-header" in ids
    other = "Fatal Python error: _PyMem_DebugMalloc: Python memory allocator called without holding the GIL\n" + text
    ids = {m.id for m in diagnose(DiagnoseRequest(log=other), kb).messages}
    assert {"python-runtime.fatal-aborted", "python-runtime.fatal-error"} <= ids


def test_the_shells_report_of_a_signal_is_read_in_each_form(kb):
    """bash 5.2's reports, as printed here by a script whose commands died of each signal (and an
    interactive shell's forms): SIGKILL is a killed rank; a fatal signal in a script's job report is
    a crash with its signal; a near miss that merely says "Killed" is neither."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    def read(line: str):
        d = diagnose(DiagnoseRequest(log=line + "\n"), kb)
        return d.facts.get("signal"), d.facts.get("failure_kinds"), d.causes[0].code if d.causes else None

    killed = '/tmp/k.sh: line 1: 30377 Killed                  python3 -c "import os,signal; os.kill(os.getpid(), signal.SIGKILL)"'
    for line in (killed, "Killed", "[1]+  Killed                  python train.py"):
        assert read(line) == ("SIGKILL", ["killed"], "host-oom-or-killed"), line
    segv = '/tmp/k.sh: line 2: 30418 Segmentation fault      python3 -c "import os,signal; os.kill(os.getpid(), signal.SIGSEGV)"'
    assert read(segv)[:2] == ("SIGSEGV", ["killed"])
    assert read("/tmp/k.sh: line 3: 30459 Bus error               python3 train.py")[:2] == ("SIGBUS", ["killed"])
    assert read("Terminated")[:2] == ("SIGTERM", None)  # a launcher's or scheduler's stop, not a failure of its own
    assert read("Process 1234 Killed by the user")[0] is None
