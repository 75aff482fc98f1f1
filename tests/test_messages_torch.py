"""The torch part of the message catalogue: what `advisor kb check` does not already test.

kb check renders each message's newest wording (or its sample) and its examples; here every older
wording must match too, real printed lines (torch 2.13 reproductions, the NCCL 2.x log format) must
give their facts, and the miners in tools/mine must read sources and binaries' pieces correctly.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from advisor.catalogue import render
from advisor.diagnose import diagnose
from advisor.models import DiagnoseRequest
from advisor.regex import compile_pattern

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "mine"))

import catalogue_io  # noqa: E402
import pysource  # noqa: E402
import python_sources  # noqa: E402
import torch_binary  # noqa: E402

TORCH_COMPONENTS = (
    "c10-cuda", "c10d-gloo", "c10d-nccl", "c10d-store", "c10d-wrapper", "dataloader", "ddp-python", "ddp-reducer",
    "elastic-agent", "gloo-transport", "mp-spawn", "rendezvous", "torch-distributed", "torchrun",
)


def torch_messages(kb):
    return [m for m in kb.messages.values() if m.id.split(".", 1)[0] in TORCH_COMPONENTS]


def run(kb, log: str):
    return diagnose(DiagnoseRequest(log=textwrap.dedent(log).strip("\n")), kb)


# --- the catalogue files ------------------------------------------------------------------------


def test_every_torch_component_is_catalogued(kb):
    assert set(TORCH_COMPONENTS) <= set(kb.message_files)
    for name in TORCH_COMPONENTS:
        info = kb.message_files[name]
        assert info["software"] == "torch"
        assert all("pypi.org/project/" in a["url"] for a in info["mined_from"]), name


def test_every_older_wording_matches_its_pattern(kb):
    """kb check tests the newest wording; a log from an older torch prints one of these."""
    problems = []
    for m in torch_messages(kb):
        regex = compile_pattern(m.pattern, not m.case_sensitive)
        for w in m.wording:
            if m.sample is not None:
                # value-specific pattern (a signal number): the sample must be an instance of the wording too
                if python_sources.template_regex(w.text).search(m.sample) is None and not regex.search(render(w.text)):
                    problems.append((m.id, w.text[:80]))
            elif regex.search(render(w.text)) is None:
                problems.append((m.id, w.text[:80]))
    assert problems == []


def test_versions_are_minor_ranges_over_the_mined_releases(kb):
    for m in torch_messages(kb):
        for spec in [m.versions] + [w.versions for w in m.wording]:
            for clause in filter(None, spec.split(",")):
                # one minor release of the mined ones (1.13.1, 2.0.1 .. 2.13.0): "<2.4", "!=2.1.*"
                assert re.fullmatch(r"(?:1\.13|2\.\d{1,2})(?:\.\*)?", clause.lstrip("<>=!")), (m.id, spec)


def test_cause_messages_name_known_causes_and_benign_ones_point_to_benign_causes(kb):
    for m in torch_messages(kb):
        for target in m.points_to:
            cause = kb.causes[target.cause]
            assert cause.benign == (m.role == "benign"), (m.id, target.cause)


# --- real printed lines -------------------------------------------------------------------------


def test_store_clients_joined_gives_the_counts(kb):
    d = run(kb, """
        torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined.
    """)
    assert (d.facts["clients_joined"], d.facts["world_size"], d.facts["store_timeout_s"]) == (3, 4, 901)
    assert "c10d-store.clients-joined-timeout" in {m.id for m in d.messages}
    assert d.causes[0].id in ("world-size-mismatch", "node-startup-skew")


def test_store_client_timeout_names_the_rendezvous_host(kb):
    d = run(kb, """
        [E1123 22:27:16.077102503 TCPStore.cpp:328] [c10d] TCP client failed to connect/validate to host 10.1.2.3:29612 - timed out (try=1, timeout=3000ms): The client socket has timed out after 3000ms while trying to connect to (10.1.2.3, 29612).
    """)
    assert d.facts["rendezvous_host"] == "10.1.2.3"
    assert d.causes[0].id == "master-unreachable"


def test_a_message_broken_over_two_lines_is_still_found(kb):
    d = run(kb, """
        torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4
        clients joined.
    """)
    assert d.facts["clients_joined"] == 3


def test_sigkilled_worker_in_the_failure_summary_points_to_a_killed_rank(kb):
    d = run(kb, """
        [rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:36238. This is typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error. GLHF! 🏖️
        W1123 22:26:47.727000 29760 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 29775 closing signal SIGTERM
        Root Cause (first observed failure):
        [0]:
          time      : 2026-11-23_22:26:47
          host      : localhost
          rank      : 1 (local_rank: 1)
          exitcode  : -9 (pid: 29776)  (SIGKILL)
          error_file: <N/A>
          traceback : Signal 9 (SIGKILL) received by PID 29776
    """)
    ids = {m.id for m in d.messages}
    assert {"gloo-transport.connection-closed-by-peer", "elastic-agent.failure-sigkill",
            "elastic-agent.signal-sigkill", "elastic-agent.sending-closing-signal"} <= ids
    assert d.causes[0].id == "rank-killed"
    assert d.facts["exit_code"] == -9


def test_heartbeat_monitor_kill_in_the_printed_format(kb):
    d = run(kb, """
        [rank3]:[E1120 10:00:00.000000000 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 3] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=2
        [rank3]:[F1120 10:00:00.000000000 ProcessGroupNCCL.cpp:1415] [PG ID 0 PG GUID 0(default_pg) Rank 3] [PG ID 0 PG GUID 0(default_pg) Rank 3] Terminating the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.
        [rank3]:[F1120 10:00:00.000000000 ProcessGroupNCCL.cpp:1400] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.
    """)
    assert d.facts["heartbeat_timeout_s"] == 480
    assert d.causes[0].id == "nccl-heartbeat-monitor"


def test_nccl_error_wrapper_gives_the_nccl_version(kb):
    d = run(kb, """
        [rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
        [rank1]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
    """)
    assert str(d.facts["nccl_version"]) == "2.21.5"
    assert {"c10d-nccl.nccl-error-in", "c10d-nccl.detail-system-error"} <= {m.id for m in d.messages}


def test_harmless_launcher_notice_alone_is_harmless(kb):
    d = run(kb, """
        W1123 22:25:55.145000 28900 torch/distributed/run.py:874] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.
    """)
    assert d.causes and d.causes[0].benign


# --- the miners ---------------------------------------------------------------------------------


SOURCE = '''
import logging, warnings
logger = logging.getLogger(__name__)
_MSG_TEMPLATE = """
Failures:
  exitcode  : ${exitcode} (pid: ${pid})
"""

def f(rank, world_size, n):
    if rank >= world_size:
        msg = f"Rank {rank} is out of range (world_size={world_size})"
        raise ValueError(msg)
    else:
        msg = "an unrelated note"
        logger.info(msg)
    logger.warning("port: %s already in use, attempt: [%s/%s]", 1, 2, 3)
    warnings.warn(f"{len(n)} workers " + "is a lot")
    raise RendezvousTimeoutError
'''


def test_pysource_reads_messages_the_way_they_print(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    found = {(c.kind, c.level, c.text) for c in pysource.messages(path, "m.py")}
    assert ("raise:ValueError", "error", "Rank {rank} is out of range (world_size={world_size})") in found
    # the `msg` of the other branch does not reach the raise
    assert not any(k == "raise:ValueError" and t == "an unrelated note" for k, _, t in found)
    assert ("log:info", "info", "an unrelated note") in found
    assert ("log:warning", "warn", "port: %s already in use, attempt: [%s/%s]") in found
    assert ("warn", "warn", "{} workers is a lot") in found  # a call in an f-string becomes `{}`
    assert ("raise-bare", "error", "RendezvousTimeoutError") in found
    assert ("const:_MSG_TEMPLATE", "error", "exitcode  : {exitcode} (pid: {pid})") in found


def test_miner_identity_by_sample_for_value_specific_patterns():
    entry = {"pattern": r"exitcode *: *-9 \(pid", "sample": "  exitcode  : -9 (pid: 12)  (SIGKILL)"}
    regex = compile_pattern(entry["pattern"])
    text = "exitcode  : {exitcode} (pid: {pid}) {signal_name}"
    assert python_sources.claims(regex, entry, text, render(text))
    assert not python_sources.claims(regex, entry, "rank      : {rank}", render("rank      : {rank}"))


def test_binary_pieces_runtime_values_and_external_texts():
    wording = r"[Rank |{rank}|] |Watchdog caught collective operation timeout: |{work}| ran for |{ms}| ms.|a\|b"
    assert torch_binary.joined(wording) == "[Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ms} ms.a|b"
    # pieces shorter than `strings -n 4` keeps ("] ", "a|b") are not looked up
    assert torch_binary.literal_parts(wording) == ["[Rank ", "Watchdog caught collective operation timeout: ", " ran for ", " ms."]
    assert torch_binary.joined("CUDA error: |~device-side assert triggered") == "CUDA error: device-side assert triggered"
    assert "~device-side assert triggered" in torch_binary.literal_parts("CUDA error: |~device-side assert triggered")


@pytest.mark.parametrize("present,expected", [
    (["2.1.2", "2.2.2", "2.3.1"], ""),
    (["2.2.2", "2.3.1"], ">=2.2"),
    (["2.1.2"], "<2.2"),
    (["2.2.2"], ">=2.2,<2.3"),
    (["2.1.2", "2.3.1"], "!=2.2.*"),
])
def test_version_ranges_from_the_releases_that_hold_a_wording(present, expected):
    assert catalogue_io.specifier(present, ["2.1.2", "2.2.2", "2.3.1"]) == expected


# torch 1.x / 2.0 ProcessGroupNCCL with blocking wait (libtorch_cuda_cpp.so of 1.13.1, libtorch_cuda.so
# of 2.0.1): the timeout raised in the waiting thread, and the abort that spreads through the store
BLOCKING_WAIT_1X = """\
RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=143, OpType=BROADCAST, TensorShape=[1], Timeout(ms)=3600000) ran for 3600089 milliseconds before timing out.
"""
ABORT_KEY_1X = """\
[W ProcessGroupNCCL.cpp:1040] [Rank 3] Found key in store: NCCLABORTEDCOMM:a0b1c2d3e4f5a6b7, from rank: 0. This means that rank has aborted its NCCL communicators previously and is not in a healthy state.. Aborting appropriate communicators
"""


def test_torch_1x_blocking_wait_timeout_is_a_collective_timeout(kb):
    d = run(kb, BLOCKING_WAIT_1X)
    assert "c10d-nccl.blocking-wait-timeout" in {m.id for m in d.messages}
    assert d.facts["timeout_ms"] == 3600000 and d.facts["first_failure"] == "timeout"
    # the wording fits the oldest mined releases (1.13.1, 2.0.1) only: older ones may print it too, so no
    # release is claimed, and none of 2.1+ either
    assert "torch_version" not in d.facts


def test_torch_1x_abort_from_another_rank_is_the_cascade(kb):
    d = run(kb, ABORT_KEY_1X)
    assert "c10d-nccl.abort-key-found" in {m.id for m in d.messages}
    assert "first_failure" not in d.facts  # another rank failed first: this line is not the failure
    assert "torch_version" not in d.facts
