"""The aws-ofi-nccl part of the message catalogue (kb/messages/aws-ofi-nccl.yaml) and its miner
(tools/mine/ofi_nccl.py): the plugin logs through NCCL's logger with its own `NET/OFI ` prefix, so its
lines look like NCCL's but carry the plugin's texts and the plugin's versions."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "mine"))

import nccl_source  # noqa: E402
import ofi_nccl  # noqa: E402

# the shape of the plugin's sources: its macros, a C++ member function, adjacent literals
SOURCE = r'''
#define NCCL_OFI_WARN(fmt, ...) (*ofi_log_function)(NCCL_LOG_WARN, NCCL_ALL, __PRETTY_FUNCTION__, __LINE__, "NET/OFI " fmt, ##__VA_ARGS__)
int nccl_net_ofi_domain::get_ep(void) {
	NCCL_OFI_WARN("Creating new endpoint for domain %p failed: %s",
		      this, fi_strerror(-ret));
	NCCL_OFI_INFO(NCCL_INIT | NCCL_NET, "Selected provider is %s, fabric is %s "
		      "(found %d nics)", prov, fabric, n);
	NCCL_OFI_INFO(NCCL_NET, "MR cache %d hits %d misses", hits, misses);
	WARN("not the plugin's macro");
	return 0;
}
'''


def test_the_plugin_macros_are_read_with_their_prefix_and_nccl_macros_are_not():
    found, _ = nccl_source.extract({"src/nccl_ofi_rdma.cpp": SOURCE}, ofi_nccl.OFI_MACROS)
    texts = {(f.level, f.text) for f in found}
    assert ("warn", "Creating new endpoint for domain %p failed: %s") in texts
    assert ("info", "Selected provider is %s, fabric is %s (found %d nics)") in texts
    assert not any("not the plugin" in t for _, t in texts)
    # the NCCL default still reads NCCL's own macros only
    nccl_found, _ = nccl_source.extract({"src/x.cc": SOURCE})
    assert {f.text for f in nccl_found} == {"not the plugin's macro"}


def test_warnings_and_the_fact_carrying_info_lines_are_kept():
    assert ofi_nccl.keep("warn", "NET/OFI Creating new endpoint for domain %p failed: %s")
    assert ofi_nccl.keep("info", "NET/OFI Selected provider is %s, fabric is %s (found %d nics)")
    assert not ofi_nccl.keep("info", "NET/OFI MR cache %d hits %d misses")  # statistics: no fact a diagnosis needs
    assert not ofi_nccl.keep("warn", "NET/OFI %s: %d")  # nothing of its own to recognise the line by


def test_one_tag_per_release_prefers_the_aws_build():
    tags = ["v1.4.0", "v1.4.0aws", "v1.4.0-aws", "v1.7.0rc1-aws", "v1.14.0", "v0.9", "v1.22.0"]
    assert ofi_nccl.pick_tags(tags, "1.0.0", "1.21.1") == ["v1.4.0-aws", "v1.14.0"]


# Lines as the plugin prints them through NCCL's logger (function:line, not file:line), from public
# reports: aws/aws-ofi-nccl #889 (1.14, an endpoint that cannot be created) and the wording of
# include/nccl_ofi_platform.h's completion error (1.21).
ENDPOINT = ("ip-10-36-29-253:79:79 [0] nccl_net_ofi_domain_get_ep:969 NCCL WARN NET/OFI Creating new endpoint for "
            "domain 0x7f9befa99380 failed: Invalid argument\n")
CQ_ERROR = ("node-a:2211:2290 [3] log_cq_error:125 NCCL WARN NET/OFI Request 0x7f1c2c0b8e40 (send) completed with error: "
            "err: 113, flags: 0, prov_errno: 4213, strerror: Unreachable remote, len: 0\n")


def _messages(log: str) -> set[str]:
    from advisor.diagnose import read_log
    from advisor.knowledge import load_kb

    return set(read_log(load_kb(), log).signatures.messages)


def test_the_plugin_lines_are_its_messages_not_nccls():
    found = _messages(ENDPOINT + CQ_ERROR)
    assert any(m.startswith("aws-ofi-nccl.") for m in found)
    # strerror's "Invalid argument" is not ncclGetErrorString's lowercase "invalid argument"
    assert "nccl-errors.invalid-argument-run-nccl-debug-warn-details" not in found


def test_a_completion_error_on_the_fabric_is_an_rdma_fault():
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    d = diagnose(DiagnoseRequest(log=CQ_ERROR))
    assert d.causes[0].code == "infiniband-rdma-issue"
    assert "aws-ofi-nccl.request-completed-error-err-flags-prov-errno" in _messages(CQ_ERROR)
    # near miss: the same words outside a plugin line (no `NCCL WARN NET/OFI`) are not the plugin's message
    assert not any(m.startswith("aws-ofi-nccl.") for m in _messages(CQ_ERROR.split("NCCL WARN ", 1)[1].replace("NET/OFI ", "")))


def test_every_plugin_entry_cites_the_release_tags_it_was_read_from():
    import yaml

    data = yaml.safe_load((ROOT / "kb" / "messages" / "aws-ofi-nccl.yaml").read_text())
    assert data["software"] == "aws-ofi-nccl" and len(data["mined_from"]) >= 40
    assert all("github.com/aws/aws-ofi-nccl/tree/v" in m["url"] for m in data["mined_from"])
    assert all(m["text"].startswith("NET/OFI ") and "NEEDS REVIEW" not in m["meaning"] for m in data["messages"])
