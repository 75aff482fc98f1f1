"""libfabric's EFA error texts in the message catalogue (kb/messages/libfabric-efa.yaml) and their miner
(tools/mine/libfabric_efa.py): the texts efa_strerror() gives an EFA completion status or provider error,
printed in libfabric's `<warn>` lines and inside aws-ofi-nccl's, and efa_show_help()'s explanations."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "mine"))

import libfabric_efa  # noqa: E402

# the two shapes of the table: 1.21+ X-macros in efa_errno.h, 1.16-1.20 an enum plus string arrays
ERRNO_H_NEW = r'''
#define EFA_IO_COMP_STATUSES(_)						\
	_(0,	OK,				Success)				\
	_(13,	LOCAL_ERROR_UNRESP_REMOTE,	Unresponsive remote (was previously responsive))	\
	_(15,	LOCAL_ERROR_UNREACH_REMOTE,	Unreachable remote - never received a response)	\

#define EFA_PROV_ERRNOS(_)						\
	_(4096,	OTHER,				Unknown error)				\
	_(4126, UNESTABLISHED_RECV_UNRESP,	Unresponsive receiver (reachable by EFA device but handshake failed))
'''
ERRNO_H_OLD = '''
enum efa_errno {
	FI_EFA_OK                            = 0,    /* Successful completion */
	FI_EFA_REMOTE_ERROR_BAD_DEST_QPN     = 9,    /* Bad dest QP number */
	FI_EFA_ERR_OTHER                     = 4096, /* Unknown/other error */
	FI_EFA_ERR_OOM                       = 4105, /* Out of memory */
};
'''
STRERROR_C_OLD = r'''
#define UNKNOWN_ERR_STR     "Unknown error"
	static const char *status_str[] = {
		[FI_EFA_OK]                            = "Success",
		[FI_EFA_REMOTE_ERROR_BAD_DEST_QPN]     = "Invalid receiver queue pair number (QPN). "
		                                         "This error is typically caused by a crashed peer.",
	};
	static const char *errno_str[] = {
		[FI_EFA_ERR_OTHER - FI_EFA_ERRNO_OFFSET] = UNKNOWN_ERR_STR,
		[FI_EFA_ERR_OOM   - FI_EFA_ERRNO_OFFSET] = "Out of memory",
	};
'''
HELP_C = r'''
	switch (err) {
	case EFA_IO_COMP_STATUS_LOCAL_ERROR_UNREACH_REMOTE:
		help = "This error is detected locally. "
		"The peer is not reachable by the EFA device.";
		break;
	default:
		return;
	}
'''


def test_the_x_macro_table_is_read_by_error_number():
    texts = libfabric_efa.texts_at(ERRNO_H_NEW, "")
    assert texts[15] == ("LOCAL_ERROR_UNREACH_REMOTE", "Unreachable remote - never received a response", libfabric_efa.ERRNO_H)
    assert texts[4126][1] == "Unresponsive receiver (reachable by EFA device but handshake failed)"
    assert texts[13][1] == "Unresponsive remote (was previously responsive)"  # parentheses inside the text survive


def test_the_older_string_arrays_are_read_through_the_enum_values():
    texts = libfabric_efa.texts_at(ERRNO_H_OLD, STRERROR_C_OLD)
    assert texts[9] == ("REMOTE_ERROR_BAD_DEST_QPN",
                        "Invalid receiver queue pair number (QPN). This error is typically caused by a crashed peer.",
                        libfabric_efa.STRERROR_C)  # adjacent literals joined
    assert texts[4096][1] == "Unknown error" and texts[4105][0] == "OOM"


def test_help_texts_are_read_per_error():
    assert libfabric_efa.help_at(HELP_C) == {
        "LOCAL_ERROR_UNREACH_REMOTE": "This error is detected locally. The peer is not reachable by the EFA device."}


def test_final_releases_only():
    tags = ["v1.15.2", "v1.16.0", "v1.21.0rc1", "v2.0.0alpha", "v2.0.0", "v2.6.0", "v2.7.0"]
    assert libfabric_efa.pick_tags(tags, "1.16.0", "2.6.0") == ["v1.16.0", "v2.0.0", "v2.6.0"]


def _catalogue() -> dict:
    return yaml.safe_load((ROOT / "kb" / "messages" / "libfabric-efa.yaml").read_text())


def test_every_entry_is_read_and_cites_the_releases_it_was_read_from():
    data = _catalogue()
    assert data["software"] == "libfabric" and len(data["mined_from"]) >= 20
    assert all("github.com/ofiwg/libfabric/tree/v" in m["url"] for m in data["mined_from"])
    assert all("NEEDS REVIEW" not in m["meaning"] for m in data["messages"])
    texts = {m["text"] for m in data["messages"]}
    # strerror's and CUDA's texts word for word say nothing about EFA: not catalogued
    assert not texts & {"Success", "Unknown error", "Out of memory", "Message too long"}


# Lines in the shapes libfabric and aws-ofi-nccl print them (function():line<warn>, NET/OFI WARN).
UNREACHABLE = ("libfabric:3321:1708520807::efa:cq:efa_rdm_pke_handle_tx_error():541<warn> err: 113, message: "
               "Unreachable remote - never received a response (15)\n")
OLD_QPN = ("libfabric:80:1698000000::efa:cq:rxr_cq_write_tx_error():243<warn> err: 107, message: Invalid receiver queue pair "
           "number (QPN). This error is typically caused by a crashed peer. Please verify the peer application has not "
           "terminated unexpectedly. (9)\n")
PROVIDER = "ip-10-0-1-5:3321:3390 [3] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)\n"


def _read(log: str):
    from advisor.diagnose import read_log
    from advisor.knowledge import load_kb

    return read_log(load_kb(), log)


def test_an_unreachable_peer_on_efa_is_a_fabric_problem():
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    assert "libfabric-efa.local-error-unreach-remote" in _read(UNREACHABLE).signatures.messages
    d = diagnose(DiagnoseRequest(log=PROVIDER + UNREACHABLE))
    assert d.causes[0].code == "infiniband-rdma-issue"
    assert d.facts.get("interconnect") == "efa"  # "Selected provider is efa"


def test_a_vanished_queue_pair_means_the_peer_died():
    read = _read(OLD_QPN)
    assert "libfabric-efa.remote-error-bad-dest-qpn" in read.signatures.messages
    assert read.facts.get("peer_lost") is True


def test_near_misses_are_not_efa_messages():
    # a socket reset is not EFA's "Connection was reset by remote peer"; "Invalid address handle" is not "Invalid address"
    found = _read("RuntimeError: Connection reset by peer\n").signatures.messages
    assert not any(m.startswith("libfabric-efa.") for m in found)
    handle = _read("libfabric:1:2::efa:cq:f():1<warn> err: 22, message: Invalid address handle (4)\n").signatures.messages
    assert "libfabric-efa.local-error-invalid-ah" in handle and "libfabric-efa.remote-error-bad-address" not in handle
    # another provider's name does not set the interconnect
    assert _read(PROVIDER.replace("is efa", "is tcp")).facts.get("interconnect") != "efa"


def test_on_efa_the_fix_is_efas_not_infinibands():
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    efa = [f.id for f in diagnose(DiagnoseRequest(log=PROVIDER + UNREACHABLE)).fix.actions if f.applies]
    assert efa[0] == "efa-reachability"
    assert not {"pick-hca-gid", "longer-ib-timeout", "disable-ib", "check-fabric"} & set(efa)  # IB knobs mean nothing on EFA
    ib = [f.id for f in diagnose(DiagnoseRequest(
        log="NET/IB : Got completion from peer 10.1.0.12<42301> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n",
        answers={"interconnect": "infiniband"})).fix.actions if f.applies]
    assert "efa-reachability" not in ib and ib[0] == "check-fabric"
    # fabric unknown: both kinds of step are shown, each marked with its fabric
    unknown = [f.id for f in diagnose(DiagnoseRequest(log="Unreachable remote - never received a response\n")).fix.actions
               if f.applies]
    assert {"efa-reachability", "check-fabric"} <= set(unknown)


def test_libfabrics_own_line_names_the_provider():
    assert _read(UNREACHABLE).facts.get("interconnect") == "efa"  # libfabric:PID:TS::efa:cq:...<warn>
    verbs = "libfabric:80:1698000000::verbs:core:vrb_get_device_attrs():631<warn> ibv_query_device: Invalid argument\n"
    assert _read(verbs).facts.get("interconnect") is None  # another provider says nothing about EFA


def test_a_fix_for_another_fabric_says_which_it_is_for(kb):
    """A fix limited to some fabrics is left out on another one, in words that name the fabrics."""
    from advisor.fixes import applicability
    from advisor.models import Facts, FactValue

    fix = next(f for f in kb.causes["ib-rdma-fault"].fixes if f.applies.interconnect)
    other = next(v for v in ("efa", "infiniband") if v not in fix.applies.interconnect)
    ok, why = applicability(fix, Facts(values={"interconnect": FactValue(value=other, line=0, text="")}))
    assert not ok and why.startswith("on ")
