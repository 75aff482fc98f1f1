"""The NCCL part of the message catalogue (kb/messages/nccl-*.yaml) and its miner (tools/mine).

`advisor kb check` already tests every message against its own wording, examples and near misses;
these tests cover what it does not: lines in NCCL's real print format (host:pid:tid [dev] file:line
NCCL WARN ...), the same text re-raised by torch after `Last error:`, facts captured from the
catalogue, messages wrapped across lines, and the miner's extraction, lineage and pattern logic on
small inline sources (no NCCL checkout needed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisor.diagnose import read_log
from advisor.knowledge import load_kb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "mine"))

import nccl as miner  # noqa: E402
import nccl_source  # noqa: E402


@pytest.fixture(scope="module")
def kb():
    return load_kb()


def recognised(kb, text: str) -> dict[str, int]:
    """catalogue message id -> first line, for the NCCL messages a log holds."""
    reading = read_log(kb, text)
    return {mid: hit.line for mid, hit in reading.signatures.messages.items() if mid.startswith("nccl-")}


# A bootstrap failure as NCCL 2.21 prints it with NCCL_DEBUG=INFO, then torch's exception.
SOCKET_FAILURE = """\
node1:81240:81301 [3] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>
node1:81240:81301 [3] NCCL INFO NCCL version 2.21.5+cuda12.4
node1:81240:81301 [3] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 172.17.0.1<39133> failed : Software caused connection abort
node1:81240:81301 [3] NCCL INFO misc/socket.cc:565 -> 2
node1:81240:81301 [3] NCCL INFO bootstrap.cc:274 -> 2
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
Last error:
socketStartConnect: Connect to 172.17.0.1<39133> failed : Software caused connection abort
"""


def test_nccl_print_format_lines_are_recognised_with_their_line(kb):
    found = recognised(kb, SOCKET_FAILURE)
    assert found["nccl-bootstrap.bootstrap-using"] == 1
    assert found["nccl-init.nccl-version-cuda"] == 2
    assert found["nccl-socket.connect-failed"] == 3
    assert found["nccl-misc.error-trail"] == 4
    assert found["nccl-errors.unhandled-system-error-run-nccl-debug-info"] == 6


def test_the_catalogue_captures_the_cuda_version_from_the_version_banner(kb):
    facts = read_log(kb, SOCKET_FAILURE).facts.values
    assert str(facts["nccl_version"].value) == "2.21.5"
    assert str(facts["cuda_version"].value) == "12.4"


@pytest.mark.parametrize("line, fabric", [
    ("gpu-node-17:2048:2101 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.24.8.17<0>", "infiniband"),
    ("h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>", "roce"),
    ("h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/UNSPECIFIED ; OOB eth0:10.0.0.1<0>", None),  # no link layer known
])
def test_the_ib_device_line_tells_the_fabric_by_its_link_layer(kb, line, fabric):
    facts = read_log(kb, line + "\n").facts.values
    assert (facts["interconnect"].value if "interconnect" in facts else None) == fabric


def test_a_mapped_warn_decides_the_diagnosis(kb):
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    result = diagnose(DiagnoseRequest(log=SOCKET_FAILURE), kb)
    assert result.causes[0].id == "wrong-socket-interface"


def test_last_error_text_without_the_nccl_prefix_is_recognised(kb):
    """torch re-raises the last WARN's text on its own line after `Last error:`."""
    text = "Last error:\nCuda failure 'an illegal memory access was encountered'\n"
    assert "nccl-misc.cuda-failure" in recognised(kb, text)


def test_an_ignored_cuda_failure_info_line_is_not_the_warn(kb):
    text = "gpu-a:7:7 [0] NCCL INFO misc/strongstream.cc:120 Cuda failure 'invalid argument'\n"
    found = recognised(kb, text)
    assert "nccl-misc.cuda-failure-2" in found
    assert "nccl-misc.cuda-failure" not in found


def test_a_warn_wrapped_across_lines_is_still_one_message(kb):
    text = (
        "gpu-b:3381:3402 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion\n"
        "from peer 10.1.0.12<42301> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
    )
    assert "nccl-ib.net-ib-got-completion-peer-status-opcode" in recognised(kb, text)


@pytest.mark.parametrize("line, message", [
    ("gpu-c:1:1 [2] init.cc:974 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000",
     "nccl-init.duplicate-gpu-detected-rank-rank-both-cuda"),
    ("gpu-c:1:1 [2] init.cc:966 NCCL WARN Mismatched NCCL version detected : rank 3 version 22105 rank 0 version 21805",
     "nccl-init.mismatched-nccl-version-detected-rank-version-rank"),
    ("node3:2710:2730 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637888 bytes, "
     "error: No space left on device (28)", "nccl-misc.error-failed-extend-bytes-error"),
    ("gpu-a:1:1 [0] transport/net_socket.cc:62 NCCL WARN NET/Socket : no interface found",
     "nccl-socket.net-socket-no-interface-found"),
    # NCCL 2.10/2.11 wordings (torch 1.11/1.12)
    ("node3:2710:2730 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
     "nccl-transport.call-posix-fallocate-failed"),
    ("node1:81240:81301 [3] include/socket.h:409 NCCL WARN Net : Connect to 10.0.0.1<39133> failed : Connection refused",
     "nccl-socket.connect-failed"),
    ("node2:1:1 [1] transport/net_ib.cc:881 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<52121> with error 12, "
     "opcode 0, len 0, vendor err 129", "nccl-ib.net-ib-got-completion-peer-status-opcode"),
    # NCCL 2.4-2.9 wordings (torch 1.x), mined from the release tags' sources
    ("node2:1:1 [1] transport/net_ib.cc:788 NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129",
     "nccl-ib.net-ib-got-completion-peer-status-opcode"),
    ("gpu-a:1:1 [0] init.cc:993 NCCL WARN Mismatched collective detected, please check your collective calls at and around "
     "rank 3. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs",
     "nccl-init.mismatched-collective-detected-please-check-your-collective"),
    ("gpu-a:1:1 [0] transport/p2p.cc:151 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between "
     "these two devices", "nccl-transport.failed-open-cuda-ipc-handle"),
    ("gpu-a:1:1 [0] include/socket.h:403 NCCL WARN Connect to 10.0.0.1<39133> failed : Connection refused",
     "nccl-socket.connect-failed"),
])
def test_lines_that_name_a_cause_point_to_it(kb, line, message):
    assert message in recognised(kb, line + "\n")
    assert kb.messages[message].role == "cause"


def test_every_nccl_message_file_cites_the_releases_and_wheels_it_was_mined_from(kb):
    for name, info in kb.message_files.items():
        if info["software"] != "nccl":
            continue
        artifacts = " ".join(a["artifact"] for a in info["mined_from"])
        assert "v2.4.2-1" in artifacts and "v2.10.3-1" in artifacts and "v2.18.1-1" in artifacts and "v2.29.7-1" in artifacts, name
        assert "nvidia-nccl-cu12==2.21.5 libnccl.so.2" in artifacts, name


def test_nccl_components_are_covered(kb):
    ids = [m for m in kb.messages if m.startswith("nccl-")]
    components = {m.split(".", 1)[0] for m in ids}
    assert {"nccl-errors", "nccl-init", "nccl-bootstrap", "nccl-socket", "nccl-ib", "nccl-proxy",
            "nccl-transport", "nccl-nvls", "nccl-enqueue", "nccl-misc"} <= components
    assert len(ids) >= 400


# --- the miner ---------------------------------------------------------------------------------

SOURCE = r'''
#define SYSCHECKSYNC(call, name, retval) do { \
  retval = call; \
  if (retval == -1 && errno == EINTR) { \
    INFO(NCCL_ALL,"Call to " name " returned %s, retrying", strerror(errno)); \
  } \
} while(0)
#define SYSCHECK(call, name) do { \
  int retval; \
  SYSCHECKSYNC(call, name, retval); \
  if (retval == -1) { WARN("Call to " name " failed : %s", strerror(errno)); return ncclSystemError; } \
} while (0)

ncclResult_t f(int fd) {
  // WARN("not a call: a comment");
  SYSCHECK(fd = open("/dev/shm/x", O_RDWR), "open");
  WARN("NET/IB : req %d size %" PRIu64 " is "
       "too big", 1, (uint64_t)2);
  INFO(NCCL_INIT, "Using network %s", name);
  WARN(msg);
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t code) {
  switch (code) {
    case ncclSuccess        : return "no error";
    case ncclSystemError    : return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    default                 : return "unknown result code";
  }
}
'''


def test_source_extraction_joins_literals_and_expands_helper_macros():
    found, templates = nccl_source.extract({"src/x.cc": SOURCE})
    texts = {(f.level, f.text) for f in found}
    assert ("warn", "Call to open failed : %s") in texts  # SYSCHECK's parameter, at its call site
    assert ("info", "Call to open returned %s, retrying") in texts  # through SYSCHECK -> SYSCHECKSYNC
    assert ("warn", "NET/IB : req %d size %lu is too big") in texts  # adjacent literals and PRIu64
    assert ("info", "Using network %s") in texts
    assert not any("comment" in t for _, t in texts)
    assert "SYSCHECK" in templates
    line = next(f.line for f in found if f.text.startswith("NET/IB"))
    assert SOURCE.splitlines()[line - 1].strip().startswith('WARN("NET/IB')


def test_error_strings_come_from_the_switch():
    codes = dict((code, text) for code, text, _ in nccl_source.error_strings(SOURCE))
    assert codes["ncclSystemError"] == "unhandled system error (run with NCCL_DEBUG=INFO for details)"


def test_version_specifiers_use_the_releases_that_were_read():
    mined = ["2.18.1", "2.19.3", "2.20.5", "2.21.5"]
    assert miner.specifier(set(mined), mined) == ""
    assert miner.specifier({"2.19.3", "2.20.5"}, mined) == ">=2.19.3,<2.21.5"
    assert miner.specifier({"2.18.1", "2.21.5"}, mined) == "!=2.19.3,!=2.20.5"


def test_a_reworded_message_is_one_lineage_and_side_by_side_wordings_are_two():
    tags = ["v2.19.3-1", "v2.20.5-1"]

    def wording(level, text, tags_, path="src/transport/net_ib.cc"):
        w = miner.Wording(level, text)
        for t in tags_:
            w.tags.add(t)
            w.sites[t].append((path, 10))
        return w

    words = [
        wording("warn", "NET/IB : Got completion from peer %s with error %d, opcode %d", tags[:1]),
        wording("warn", "NET/IB : Got completion from peer %s with status=%d opcode=%d", tags[1:]),
        wording("warn", "NET/Plugin: Failed to find ncclNetPlugin_v6 symbol.", tags),
        wording("warn", "NET/Plugin: Failed to find ncclNetPlugin_v7 symbol.", tags),
    ]
    groups = miner.lineages({w.key: w for w in words}, tags)
    sizes = sorted(len(g) for g in groups)
    assert sizes == [1, 1, 2]


def test_generated_patterns_are_literal_led_and_claim_no_other_message():
    from advisor.catalogue import render
    from advisor.regex import compile_pattern

    groups = {
        "a": ["Bootstrap : no socket interface found"],
        "b": ["NET/Socket : no interface found"],
        "c": ["Bootstrap : Using%s", "Bootstrap: Using%s"],
        "d": ["comm %p rank %d nranks %d - Init START"],
        "e": ["comm %p rank %d nranks %d - Init COMPLETE"],
    }
    patterns, unresolved = miner.distinct_patterns(groups, fixed={})
    assert unresolved == []
    for mid, pattern in patterns.items():
        assert not pattern.startswith((".", "[^", "\\S", "\\s")), pattern  # led by literal text, not a wildcard
        rx = compile_pattern(pattern, True)
        assert all(rx.search(render(t)) for t in groups[mid])
        assert not any(rx.search(render(t)) for other, ts in groups.items() if other != mid for t in ts)
    assert patterns["c"] == "Bootstrap ?: Using"  # two wordings that differ by a space: one pattern


def test_plain_words_alone_are_not_distinctive_enough_for_a_pattern():
    # "is not available" is printed by other software too: a short literal needs a technical token
    assert miner.literal_pattern(["Rank %d: is not available"], []) is None


def test_the_writer_keeps_the_layout_people_wrote():
    import yaml

    data = {"component": "nccl-x", "defaults": [{"cause": "ib-rdma-fault", "weight": 2.5}],
            "messages": [{"id": "nccl-x.a", "text": "t", "event": "network", "sets": {"peer_lost": True}}]}
    text = miner.dump(data)
    assert "defaults:" + miner.DEFAULTS_COMMENT + "\n- {cause: ib-rdma-fault, weight: 2.5}\n" in text
    assert "  sets: {peer_lost: true}\n" in text
    assert yaml.safe_load(text) == data


def test_wheels_by_release_cuda_flavour():
    assert miner.wheel_name("2.14.3") == "nvidia-nccl-cu11==2.14.3"  # torch 1.13 / 2.0 pin it
    assert miner.wheel_name("2.18.1") == "nvidia-nccl-cu12==2.18.1"
    assert miner.wheel_name("2.28.9") == "nvidia-nccl-cu13==2.28.9"


def test_a_wording_that_grew_a_tail_is_the_same_message():
    # ncclGetErrorString's texts of NCCL <= 2.17 gained "(run with NCCL_DEBUG=INFO for details)" in 2.18.1
    tags = ["v2.17.1-1", "v2.18.1-1"]

    def wording(text, tags_):
        w = miner.Wording("error", text)
        for t in tags_:
            w.tags.add(t)
            w.sites[t].append(("src/init.cc", 10))
        return w

    words = [wording("unhandled cuda error", tags[:1]),
             wording("unhandled cuda error (run with NCCL_DEBUG=INFO for details)", tags[1:]),
             wording("internal error", tags[:1]),
             wording("internal error - please report this issue to the NCCL developers", tags[1:])]
    groups = miner.lineages({w.key: w for w in words}, tags)
    assert sorted(sorted(w.text for w in g) for g in groups) == [
        ["internal error", "internal error - please report this issue to the NCCL developers"],
        ["unhandled cuda error", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"]]
    # two entries the catalogue already holds stay two
    apart = {words[0].key: "nccl-errors.a", words[1].key: "nccl-errors.b"}
    groups = miner.lineages({w.key: w for w in words}, tags, apart)
    assert len(groups) == 3
