"""`advisor preflight`'s checks: each trap found with its cause code, severity, evidence and fix in
the framework's format, and not found where it is absent (so each check can fail both ways)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.configs import read_config
from advisor.envfile import EnvSnapshot, load_snapshot
from advisor.preflight import Finding, ifname_matches, run_preflight

FIX = Path(__file__).parent / "fixtures" / "preflight"
CONFIGS = FIX / "configs"
ENV = FIX / "env"
CODES = None


def snap(**fields) -> EnvSnapshot:
    base = {"host": "n0", "label": "n0.json", "torch": {"version": "2.6.0+cu124", "cuda": "12.4"},
            "nccl": {"version": "2.21.5", "source": "nvidia-nccl-cu12 package"}, "packages": {"torch": "2.6.0+cu124"},
            "interfaces": [{"name": "lo", "running": True, "kind": "loopback", "mtu": 65536, "addresses": ["127.0.0.1/8"]},
                           {"name": "eth0", "running": True, "kind": "physical", "mtu": 1500, "addresses": ["10.0.0.5/24"]}],
            "default_route": "eth0", "shm": {"size_bytes": 32 << 30}, "container": {"kind": "none"},
            "gpus": {"count": 8, "visible": 8}, "mounts": [{"path": "/", "fstype": "ext4"}, {"path": "/mnt/nfs", "fstype": "nfs4"},
                                                            {"path": "/scratch", "fstype": "xfs"}]}
    base.update(fields)
    return EnvSnapshot.model_validate(base)


def iface(name, kind="physical", running=True, addr="10.1.0.5/24", mtu=1500):
    return {"name": name, "kind": kind, "running": running, "mtu": mtu, "addresses": [addr] if addr else []}


def check(kb, nodes=(), config=None, answers=None) -> list[Finding]:
    report, _ = run_preflight(kb, list(nodes), config, answers or {})
    return report.findings


def ids(findings) -> list[str]:
    return [f.id for f in findings]


def only(findings, check_id) -> Finding:
    found = [f for f in findings if f.id == check_id]
    assert len(found) == 1, ids(findings)
    return found[0]


def test_every_finding_names_a_canonical_cause_code(kb):
    nodes = [load_snapshot(str(ENV / "node0.json")), load_snapshot(str(ENV / "node1.json"))]
    findings = check(kb, nodes, read_config(str(CONFIGS / "trl_sft_qwen.yaml")))
    assert len(findings) >= 10
    for f in findings:
        assert f.code in kb.codes, f.code
        assert f.severity in ("error", "warning", "info") and f.title and f.evidence and f.fix is not None


def test_json_shape(kb):
    report, _ = run_preflight(kb, [load_snapshot(str(ENV / "node0.json"))], None, {})
    data = json.loads(report.model_dump_json())
    assert list(data) == ["findings"]
    first = data["findings"][0]
    assert {"code", "severity", "title", "evidence", "fix"} <= set(first)
    assert {"framework", "format", "language", "title", "content"} == set(first["fix"]["snippets"][0])
    severities = [f["severity"] for f in data["findings"]]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)


def test_a_clean_node_has_no_findings(kb):
    assert check(kb, [load_snapshot(str(ENV / "clean.json"))]) == []


# --- interfaces --------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, name, hit", [
    ("eth", "eth0", True), ("eth", "ens5", False), ("^docker,lo", "docker0", False), ("^docker,lo", "eth0", True),
    ("=eth0", "eth0", True), ("=eth0", "eth01", False), ("eth0:1234", "eth0", True), ("ib,eth", "ib0", True)])
def test_ifname_matching_is_ncclss(spec, name, hit):
    assert ifname_matches(spec, name) is hit


def test_several_interfaces_without_socket_ifname(kb):
    node = snap(interfaces=[iface("lo", "loopback", addr="127.0.0.1/8"), iface("eth0", addr="10.0.0.5/24"),
                            iface("ens6", addr="172.31.0.4/20")])
    f = only(check(kb, [node]), "socket-ifname-unset")
    assert (f.code, f.severity) == ("wrong-network-interface", "warning")
    assert "eth0 (10.0.0.5/24)" in f.evidence and "ens6" in f.evidence
    assert f.fix.settings == {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}  # the default route's
    assert "export NCCL_SOCKET_IFNAME=eth0" in f.fix.snippets[0].content
    # named: nothing to say; a one-node job: nothing to say either
    named = snap(interfaces=node.model_dump()["interfaces"], env={"NCCL_SOCKET_IFNAME": "eth0"})
    assert check(kb, [named]) == []
    assert check(kb, [node], answers={"nodes": 1}) == []


def test_socket_ifname_from_nccl_conf_counts(kb):
    node = snap(interfaces=[iface("eth0", addr="10.0.0.5/24"), iface("ens6", addr="172.31.0.4/20")],
                nccl_conf={"files": ["/etc/nccl.conf"], "values": {"NCCL_SOCKET_IFNAME": "ens"}})
    assert check(kb, [node]) == []


def test_socket_ifname_matching_nothing_is_an_error(kb):
    node = snap(env={"NCCL_SOCKET_IFNAME": "eth9"})
    f = only(check(kb, [node]), "socket-ifname-no-match")
    assert f.severity == "error" and "NCCL_SOCKET_IFNAME=eth9" in f.evidence and "eth0 (10.0.0.5/24)" in f.evidence


@pytest.mark.parametrize("nccl, found", [("2.21.5", True), ("2.27.7", True), ("2.28.3", False), ("2.30.7", False), (None, True)])
def test_virbr_is_a_candidate_before_nccl_2_28_3(kb, nccl, found):
    node = snap(nccl={"version": nccl} if nccl else None,
                interfaces=[iface("eth0", addr="10.0.0.5/24"), iface("virbr0", "bridge", addr="192.168.122.1/24")])
    result = check(kb, [node])
    assert ("virtual-bridge-interface" in ids(result)) is found
    if found:
        assert "virbr0 (192.168.122.1/24)" in only(result, "virtual-bridge-interface").evidence


def test_docker_user_bridges_are_candidates_in_every_release(kb):
    node = snap(nccl={"version": "2.30.7"}, interfaces=[iface("eth0"), iface("br-3f2a1b", "bridge", addr="172.18.0.1/16"),
                                                        iface("docker0", "bridge", addr="172.17.0.1/16")])
    f = only(check(kb, [node]), "virtual-bridge-interface")
    assert "br-3f2a1b" in f.evidence and "docker0" not in f.evidence  # NCCL skips docker* itself


def test_ib_interfaces_come_first(kb):
    node = snap(interfaces=[iface("ib0", "infiniband", addr="192.168.10.5/24"), iface("eth0"), iface("ens6", addr="172.31.0.4/20")])
    assert "socket-ifname-unset" not in ids(check(kb, [node]))


def test_only_docker_left(kb):
    node = snap(interfaces=[iface("lo", "loopback", addr="127.0.0.1/8"), iface("docker0", "bridge", addr="172.17.0.1/16")])
    f = only(check(kb, [node]), "only-docker-interface")
    assert f.fix.id == "host-network"


# --- /dev/shm, memlock -------------------------------------------------------------------------


@pytest.mark.parametrize("container, size, severity", [("docker", 64 << 20, "error"), ("none", 64 << 20, "warning"),
                                                       ("kubernetes", 512 << 20, "error"), ("docker", 1 << 30, None)])
def test_small_dev_shm(kb, container, size, severity):
    node = snap(shm={"size_bytes": size}, container={"kind": container, "evidence": ["/.dockerenv exists"]})
    findings = [f for f in check(kb, [node]) if f.id == "dev-shm-small"]
    assert [f.severity for f in findings] == ([severity] if severity else [])
    if severity:
        f = findings[0]
        assert f.code == "shm-exhausted" and f.fix.id == "bigger-shm"
        assert "export NCCL_SHM_DISABLE=1" in f.fix.snippets[0].content  # the mitigation, with its caveat
        assert f.fix.caveat and "MiB" in f.title


def test_memlock_with_rdma(kb):
    rdma = [{"name": "mlx5_0", "ports": [{"port": 1, "state": "4: ACTIVE", "link_layer": "InfiniBand"}]}]
    small = snap(infiniband=rdma, ulimits={"memlock": {"soft": 65536, "hard": 65536}})
    assert only(check(kb, [small]), "memlock-small").code == "infiniband-rdma-issue"
    assert check(kb, [snap(infiniband=rdma, ulimits={"memlock": {"soft": "unlimited", "hard": "unlimited"}})]) == []
    assert check(kb, [snap(ulimits={"memlock": {"soft": 65536, "hard": 65536}})]) == []


# --- variables -----------------------------------------------------------------------------------


def test_stray_rank_variables(kb):
    f = only(check(kb, [snap(env={"RANK": "0", "WORLD_SIZE": "8"})]), "stray-rank-variables")
    assert (f.severity, f.code) == ("warning", "rank-world-size-misconfig")
    assert f.evidence == "RANK=0 (n0.json); WORLD_SIZE=8 (n0.json)" and "unset RANK WORLD_SIZE" in f.fix.snippets[0].content
    assert only(check(kb, [snap(env={"RANK": "8", "WORLD_SIZE": "8"})]), "stray-rank-variables").severity == "error"
    # inside torchrun (or srun) they are the launcher's, not stray
    assert check(kb, [snap(env={"RANK": "0", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "job1"})]) == []


def test_deprecated_names(kb):
    findings = check(kb, [snap(env={"NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_DESYNC_DEBUG": "1"})])
    teardown, desync = [f for f in findings if f.id == "deprecated-nccl-name"]
    assert teardown.severity == "warning" and "NCCL_ASYNC_ERROR_HANDLING=1" in teardown.title
    assert teardown.fix.snippets[0].content.splitlines()[1:] == ["unset NCCL_ASYNC_ERROR_HANDLING"]
    assert desync.severity == "info" and desync.code == "benign-warning"
    assert desync.fix.snippets[0].content.splitlines()[1:] == ["export TORCH_NCCL_DESYNC_DEBUG=1", "unset NCCL_DESYNC_DEBUG"]


def test_old_torch_reads_the_old_names(kb):
    old = {"version": "2.1.2+cu121"}
    assert check(kb, [snap(torch=old, env={"NCCL_ASYNC_ERROR_HANDLING": "1"})]) == []
    f = only(check(kb, [snap(torch=old, env={"TORCH_NCCL_BLOCKING_WAIT": "1"})]), "torch-nccl-name-too-new")
    assert f.code == "version-mismatch" and "export NCCL_BLOCKING_WAIT=1" in f.fix.snippets[0].content


@pytest.mark.parametrize("name, value, severity, code", [
    ("NCCL_P2P_DISABLE", "1", "warning", "legit-long-collective"),
    ("NCCL_SHM_DISABLE", "1", "warning", "legit-long-collective"),
    ("TORCH_NCCL_BLOCKING_WAIT", "1", "warning", "legit-long-collective"),
    ("CUDA_LAUNCH_BLOCKING", "1", "warning", "legit-long-collective"),
    ("TORCH_DISTRIBUTED_DEBUG", "DETAIL", "warning", "legit-long-collective"),
    ("NCCL_DEBUG", "INFO", "info", "logging-io-straggler"),
    ("NCCL_DEBUG", "WARN", None, None),
    ("TORCH_DISTRIBUTED_DEBUG", "INFO", None, None),
    ("NCCL_P2P_DISABLE", "0", None, None),
])
def test_debugging_switches(kb, name, value, severity, code):
    findings = [f for f in check(kb, [snap(env={name: value})]) if f.id == "debug-switch-on"]
    assert [(f.severity, f.code) for f in findings] == ([(severity, code)] if severity else [])
    if severity:
        assert findings[0].fix.snippets[0].content.endswith(f"unset {name}\n")


def test_ib_disable_matters_only_with_rdma(kb):
    assert check(kb, [snap(env={"NCCL_IB_DISABLE": "1"})]) == []
    rdma = [{"name": "mlx5_0", "ports": [{"port": 1, "state": "4: ACTIVE"}]}]
    node = snap(env={"NCCL_IB_DISABLE": "1"}, infiniband=rdma, ulimits={"memlock": {"soft": "unlimited"}})
    assert ids(check(kb, [node])) == ["debug-switch-on"]


def test_a_trl_recipes_env_section_is_checked_with_file_lines(kb):
    findings = check(kb, [snap()], read_config(str(CONFIGS / "trl_sft_qwen.yaml")))
    p2p = [f for f in findings if f.title.startswith("NCCL_P2P_DISABLE")][0]
    assert p2p.evidence.endswith("trl_sft_qwen.yaml:12 env.NCCL_P2P_DISABLE: 1")


# --- checkpoint save timeout ---------------------------------------------------------------------------------


def test_save_timeout_llamafactory_70b_on_nfs(kb):
    f = only(check(kb, [snap()], read_config(str(CONFIGS / "llamafactory_llama2_70b_full_sft.yaml"))), "save-timeout-too-short")
    assert (f.code, f.severity) == ("checkpoint-save-straggler", "error")
    assert "ddp_timeout not set (default 1800 s" in f.evidence and "Llama-2-70b-hf (70 B parameters" in f.evidence
    assert "/mnt/nfs (nfs4, n0.json)" in f.evidence
    (snippet,) = [s for s in f.fix.snippets if s.format == "llamafactory-yaml"]
    assert snippet.content.rstrip().endswith("ddp_timeout: 7680")


def test_save_timeout_is_the_diagnosis_number(kb):
    """The same facts give the same number, derivation and snippet as `advisor suggest` after the failure."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    f = only(check(kb, [snap()], read_config(str(CONFIGS / "llamafactory_llama2_70b_full_sft.yaml"))), "save-timeout-too-short")
    log = ("[rank1]:[E217 14:55:02.441 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=38, OpType=_ALLGATHER_BASE, NumelIn=9510912, NumelOut=38043648, Timeout(ms)=1000) "
           "ran for 1033 milliseconds before timing out.")
    d = diagnose(DiagnoseRequest(log=log, framework="llama-factory", answers={
        "phase": "save", "model_size_b": "70", "storage": "network-fs", "saves_optimizer": "yes"}), kb)
    step = next(a for a in d.fix.actions if a.id == "timeout-for-save")
    assert step.settings == f.fix.settings == {"collective_timeout": 7680}
    assert step.derivations == f.fix.derivations
    assert [s.content for s in d.fix.snippets if s.format == "llamafactory-yaml" and "7680" in s.content] == \
        [s.content for s in f.fix.snippets if s.format == "llamafactory-yaml"]


def test_save_timeout_answers_and_margins(kb):
    config = read_config(str(CONFIGS / "llamafactory_llama2_70b_full_sft.yaml"))
    local = only(check(kb, [snap()], config, {"storage": "local-nvme"}), "save-timeout-too-short")
    assert local.severity == "warning" and "needs 3600 s" in local.title  # 653 s of writing: it fits, barely
    assert "save-timeout-too-short" not in ids(check(kb, [snap()], config, {"storage": "local-nvme", "model_size_b": 1}))


def test_save_timeout_skips_lora_and_unknown_sizes(kb, tmp_path):
    report, notes = run_preflight(kb, [snap()], read_config(str(CONFIGS / "llamafactory_qwen_lora_sft.yaml")), {})
    assert report.findings == [] and any("LoRA" in n for n in notes)
    path = tmp_path / "train.json"
    path.write_text('{"output_dir": "/mnt/nfs/out", "ddp_timeout": 600}')
    report, notes = run_preflight(kb, [snap()], read_config(str(path)), {})
    assert report.findings == [] and any("model size" in n for n in notes)
    f = only(check(kb, [snap()], read_config(str(path)), {"model_size_b": 7}), "save-timeout-too-short")
    assert [s.format for s in f.fix.snippets] == ["hf-json"] and json.loads(f.fix.snippets[0].content) == {"ddp_timeout": 1800}


def test_save_timeout_without_env_assumes_network_storage(kb):
    f = only(check(kb, [], read_config(str(CONFIGS / "hf_training_args_13b.json"))), "save-timeout-too-short")
    assert f.severity == "warning" and "assumed to be a network file system" in f.why
    assert "network-fs, assumed" in f.fix.derivations[0]


@pytest.mark.parametrize("name, severity, key", [
    ("torchtitan_llama3_70b.toml", "error", "comm.train_timeout_seconds"),
    ("titan_preflight_configs.py:llama3_70b_nfs", "error", "comm.train_timeout_seconds"),
    ("lightningcli_llama70b.yaml", "error", "trainer.strategy.init_args.timeout"),
    ("recipes/Qwen2.5-32B-Instruct/grpo/config_demo.yaml", "warning", "ddp_timeout"),
])
def test_save_timeout_in_each_format(kb, name, severity, key):
    config = read_config(str(CONFIGS / name))
    f = only(check(kb, [snap()], config), "save-timeout-too-short")
    assert f.severity == severity and f.title.startswith(key)
    assert {s.format for s in f.fix.snippets} == {config.format}


def test_torchtitan_sharded_async_and_disabled_checkpoints(kb, tmp_path):
    base = (CONFIGS / "torchtitan_llama3_70b.toml").read_text()
    path = tmp_path / "t.toml"
    path.write_text(base.replace('interval = 500', 'interval = 500\nasync_mode = "async"'))
    assert "save-timeout-too-short" not in ids(check(kb, [snap()], read_config(str(path))))
    path.write_text(base.replace("enable = true", "enable = false"))
    assert "save-timeout-too-short" not in ids(check(kb, [snap()], read_config(str(path))))
    # sharded: 8 nodes write in parallel
    f = only(check(kb, [snap()], read_config(str(CONFIGS / "torchtitan_llama3_70b.toml")), {"nodes": 8}), "save-timeout-too-short")
    assert "x 8 writers" in f.fix.derivations[0]


def test_lightningcli_timeout_must_be_a_string(kb, tmp_path):
    from advisor.inputs import InputError

    path = tmp_path / "cli.yaml"
    path.write_text((CONFIGS / "lightningcli_llama70b.yaml").read_text().replace('"0:30:00"', "1:00:00"))  # YAML 1.1 reads 1:00:00 as 3600
    with pytest.raises(InputError, match='quoted "h:mm:ss"'):
        check(kb, [snap()], read_config(str(path)))


# --- data preparation, TRL, torchtitan metrics, accelerate ------------------------------------------------------------


def test_llamafactory_preprocessing_on_the_main_rank(kb, tmp_path):
    config = read_config(str(CONFIGS / "llamafactory_llama2_70b_full_sft.yaml"))
    f = only(check(kb, [snap()], config), "data-prep-outlasts-timeout")
    assert (f.code, f.severity) == ("data-preprocessing-straggler", "warning")
    assert "tokenized_path not set" in f.evidence and "preprocessing_num_workers not set" in f.evidence
    content = "".join(s.content for s in f.fix.snippets)
    assert "tokenized_path:" in content and "ddp_timeout: 3600" in content
    for extra in ("streaming: true\n", "ddp_timeout: 180000000\n"):
        path = tmp_path / "lf.yaml"
        path.write_text((CONFIGS / "llamafactory_llama2_70b_full_sft.yaml").read_text() + extra)
        assert "data-prep-outlasts-timeout" not in ids(check(kb, [snap()], read_config(str(path))))
    done = tmp_path / "tokenized"
    done.mkdir()
    (done / "dataset_dict.json").write_text("{}")
    for where, expected in ((done, None), (tmp_path / "not-yet", "info")):
        path = tmp_path / "lf.yaml"
        path.write_text((CONFIGS / "llamafactory_llama2_70b_full_sft.yaml").read_text() + f"tokenized_path: {where}\n")
        found = [f.severity for f in check(kb, [snap()], read_config(str(path))) if f.id == "data-prep-outlasts-timeout"]
        assert found == ([expected] if expected else [])


def test_trl_0_15_0_without_packing(kb, tmp_path):
    trl = snap(packages={"torch": "2.6.0", "trl": "0.15.0"}, frameworks={"trl": "0.15.0"})
    config = read_config(str(CONFIGS / "trl_sft_qwen.yaml"))
    f = only(check(kb, [trl], config), "trl-0.15.0-sft-gather")
    assert (f.code, f.severity) == ("framework-version-bug", "error")
    assert "trl_sft_qwen.yaml:5 packing: false" in f.evidence
    assert f.fix.id == "upgrade-trl" and any(s.content.rstrip().endswith("packing: true") for s in f.fix.snippets)
    assert "trl-0.15.0-sft-gather" not in ids(check(kb, [snap(packages={"trl": "0.15.1"})], config))
    assert "trl-0.15.0-sft-gather" not in ids(check(kb, [snap(packages={"trl": "0.15.0"}, gpus={"count": 1})], config))
    path = tmp_path / "recipe.yaml"
    path.write_text("packing: true\n")
    assert "trl-0.15.0-sft-gather" not in ids(check(kb, [trl], read_config(str(path))))
    path.write_text("num_generations: 8\n")  # GRPO: no SFTTrainer
    assert "trl-0.15.0-sft-gather" not in ids(check(kb, [trl], read_config(str(path))))
    assert only(check(kb, [trl]), "trl-0.15.0-sft-gather").severity == "warning"  # no config: packing unknown


def test_torchtitan_metrics_every_step(kb, tmp_path):
    config = read_config(str(CONFIGS / "torchtitan_llama3_70b.toml"))
    f = only(check(kb, [snap()], config), "titan-metrics-every-step")
    assert (f.code, f.severity) == ("logging-io-straggler", "warning") and "/mnt/nfs (nfs4" in f.evidence
    assert f.fix.snippets[0].content.endswith("[metrics]\nlog_freq = 100\n")
    assert only(check(kb, [], config), "titan-metrics-every-step").severity == "info"  # storage unknown
    assert only(check(kb, [], config, {"storage": "network-fs"}), "titan-metrics-every-step").severity == "warning"
    assert "titan-metrics-every-step" not in ids(check(kb, [snap()], config, {"storage": "local-nvme"}))
    path = tmp_path / "t.toml"
    path.write_text((CONFIGS / "torchtitan_llama3_70b.toml").read_text().replace("/mnt/nfs/", "/scratch/"))
    assert "titan-metrics-every-step" not in ids(check(kb, [snap()], read_config(str(path))))
    path.write_text((CONFIGS / "torchtitan_llama3_70b.toml").read_text().replace("log_freq = 1", "log_freq = 10"))
    assert "titan-metrics-every-step" not in ids(check(kb, [snap()], read_config(str(path))))


def test_accelerate_debug_mode(kb):
    f = only(check(kb, [snap()], read_config(str(CONFIGS / "accelerate_debug.yaml"))), "debug-switch-on")
    assert f.severity == "info" and f.fix.snippets[0].format == "accelerate-yaml"
    assert f.fix.snippets[0].content.rstrip().endswith("debug: false")


def test_the_same_trap_on_several_nodes_is_one_finding(kb):
    a = snap(env={"NCCL_P2P_DISABLE": "1"})
    b = snap(host="n1", label="n1.json", env={"NCCL_P2P_DISABLE": "1"})
    f = only(check(kb, [a, b]), "debug-switch-on")
    assert f.evidence == "NCCL_P2P_DISABLE=1 (n0.json); NCCL_P2P_DISABLE=1 (n1.json)"
