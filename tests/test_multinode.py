"""`advisor preflight --env node0.json --env node1.json`: what must agree between the nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.envfile import EnvSnapshot, load_snapshot
from advisor.preflight import run_preflight
from test_preflight import iface, snap

ENV = Path(__file__).parent / "fixtures" / "preflight" / "env"


def node(i: int, **fields) -> EnvSnapshot:
    base = snap().model_dump()
    base.update({"host": f"n{i}", "label": f"n{i}.json", "time_unix": 1_795_000_000.0, "env": {"NCCL_SOCKET_IFNAME": "eth0"}})
    base.update(fields)
    return EnvSnapshot.model_validate(base)


def compare(kb, *nodes):
    report, _ = run_preflight(kb, list(nodes))
    return report.findings


def by_id(findings, check_id):
    return [f for f in findings if f.id == check_id]


def test_identical_nodes_agree(kb):
    assert compare(kb, node(0), node(1), node(2)) == []


@pytest.mark.parametrize("fields, label, severity", [
    ({"torch": {"version": "2.5.1+cu124", "cuda": "12.4"}}, "torch", "error"),
    ({"nccl": {"version": "2.26.2"}}, "NCCL", "error"),
    ({"torch": {"version": "2.6.0+cu118", "cuda": "11.8"}}, "CUDA (torch build)", "error"),
    ({"nccl": None}, "NCCL", "error"),
    ({"frameworks": {"transformers": "4.48.0"}}, "transformers", "warning"),
    ({"python": {"version": "3.10.14"}}, "Python", "info"),
])
def test_versions_differ(kb, fields, label, severity):
    base = {"frameworks": {"transformers": "4.48.3"}, "python": {"version": "3.11.9"}}
    findings = by_id(compare(kb, node(0, **base), node(1, **{**base, **fields})), "versions-differ")
    assert [(f.title, f.severity, f.code) for f in findings] == [(f"{label} differs between the nodes", severity, "version-mismatch")]
    assert "n0.json" in findings[0].evidence and "n1.json" in findings[0].evidence


def test_the_same_release_with_another_local_tag_is_not_a_difference(kb):
    a = node(0, torch={"version": "2.6.0+cu124", "cuda": "12.4"})
    b = node(1, torch={"version": "2.6.0+cu124.post1", "cuda": "12.4"})
    assert by_id(compare(kb, a, b), "versions-differ") == []


@pytest.mark.parametrize("name, code, severity", [
    ("MASTER_ADDR", "rendezvous-unreachable", "error"), ("MASTER_PORT", "rendezvous-unreachable", "error"),
    ("WORLD_SIZE", "rank-world-size-misconfig", "error"), ("NCCL_IB_HCA", "infiniband-rdma-issue", "warning"),
    ("NCCL_ALGO", "collective-mismatch", "warning"), ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "collective-mismatch", "warning"),
])
def test_distributed_variables_differ(kb, name, code, severity):
    env = {"NCCL_SOCKET_IFNAME": "eth0", "TORCHELASTIC_RUN_ID": "x"}
    a = node(0, env={**env, name: "a"})
    b = node(1, env={**env, name: "b"})
    (f,) = by_id(compare(kb, a, b), "variables-differ")
    assert (f.title, f.code, f.severity) == (f"{name} differs between the nodes", code, severity)
    assert f.evidence == "a on n0.json; b on n1.json"


def test_per_process_variables_may_differ_but_node_ranks_must_be_unique(kb):
    env = {"NCCL_SOCKET_IFNAME": "eth0", "TORCHELASTIC_RUN_ID": "x", "WORLD_SIZE": "16"}
    a = node(0, env={**env, "RANK": "0", "LOCAL_RANK": "0", "NODE_RANK": "0", "CUDA_VISIBLE_DEVICES": "0,1"})
    b = node(1, env={**env, "RANK": "8", "LOCAL_RANK": "0", "NODE_RANK": "0", "CUDA_VISIBLE_DEVICES": "2,3"})
    findings = compare(kb, a, b)
    assert [f.id for f in findings] == ["node-rank-duplicate"]
    assert findings[0].evidence == "NODE_RANK=0 on n0.json, n1.json" and findings[0].severity == "error"


def test_interface_names_differ_without_socket_ifname(kb):
    a = node(0, env={}, default_route="ens5", interfaces=[iface("ens5"), iface("virbr0", "bridge", running=False)])
    b = node(1, env={}, default_route="ens6", interfaces=[iface("ens6")])
    (f,) = by_id(compare(kb, a, b), "interface-names-differ")
    assert f.code == "wrong-network-interface" and f.evidence == "ens5 on n0.json; ens6 on n1.json"
    assert f.fix.settings == {"NCCL_SOCKET_IFNAME": "ens"}  # a prefix both share; gloo needs exact names, so not set
    c = node(1, env={}, default_route="eth1", interfaces=[iface("eth1")])
    (f,) = by_id(compare(kb, a, c), "interface-names-differ")
    assert f.fix.settings == {"NCCL_SOCKET_IFNAME": "^docker,lo,virbr"}


def test_socket_ifname_missing_on_one_node(kb):
    a = node(0)
    b = node(1, interfaces=[iface("ens5")])
    findings = compare(kb, a, b)
    assert [(f.id, f.evidence.split(" (")[0]) for f in findings if f.id == "socket-ifname-no-match"] == \
        [("socket-ifname-no-match", "NCCL_SOCKET_IFNAME=eth0")]
    assert "n1.json" in by_id(findings, "socket-ifname-no-match")[0].evidence


def test_mtu_differs(kb):
    a = node(0, interfaces=[iface("eth0", mtu=9000)])
    b = node(1, interfaces=[iface("eth0", mtu=1500)])
    (f,) = by_id(compare(kb, a, b), "mtu-differs")
    assert f.evidence == "MTU 9000 on n0.json; MTU 1500 on n1.json" and f.code == "wrong-network-interface"
    ib_a = node(0, env={"NCCL_SOCKET_IFNAME": "ib"}, interfaces=[iface("ib0", "infiniband", mtu=4092)])
    ib_b = node(1, env={"NCCL_SOCKET_IFNAME": "ib"}, interfaces=[iface("ib0", "infiniband", mtu=2044)])
    assert by_id(compare(kb, ib_a, ib_b), "mtu-differs")[0].code == "infiniband-rdma-issue"


def test_clocks_apart(kb):
    assert by_id(compare(kb, node(0), node(1, time_unix=1_795_000_004.0)), "clocks-apart") == []
    (f,) = by_id(compare(kb, node(0), node(1, time_unix=1_795_000_042.0)), "clocks-apart")
    assert "42 s apart" in f.title and f.severity == "warning"


def test_gpu_counts_differ(kb):
    (f,) = by_id(compare(kb, node(0), node(1, gpus={"count": 8, "visible": 4})), "gpu-counts-differ")
    assert f.evidence == "8 GPUs on n0.json; 4 GPUs on n1.json"


def test_the_two_fixture_nodes(kb):
    nodes = [load_snapshot(str(ENV / "node0.json")), load_snapshot(str(ENV / "node1.json"))]
    report, _ = run_preflight(kb, nodes)
    found = {f.id for f in report.findings}
    assert {"versions-differ", "variables-differ", "interface-names-differ", "mtu-differs", "clocks-apart"} <= found
    nccl = [f for f in report.findings if f.title == "NCCL differs between the nodes"][0]
    assert nccl.evidence == "2.21.5 on node0.json; 2.26.2 on node1.json"
