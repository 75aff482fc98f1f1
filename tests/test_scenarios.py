"""The five founding scenarios (tests/fixtures/scenarios), end to end through the CLI, with the
scenario's answers.

Each asserts the root cause and the substance of the fix the product was founded to give.
"""

from __future__ import annotations

from helpers import run_cli, scenario

ANSWER_FIELDS = ("framework", "framework_version", "torch_version", "nodes", "gpus_per_node", "model_size_b", "phase")


def advise(case_id: str, *extra: str) -> dict:
    case = scenario(case_id)
    argv = ["suggest", "--error", case["log"], "--json"]
    for field in ANSWER_FIELDS:
        argv += ["--answer", f"{field}={'unknown' if case.get(field) is None else case[field]}"]
    result = run_cli(*argv, *extra)
    assert result.code in (0, 1), result.err
    return result.json


def settings(data: dict) -> dict:
    out: dict = {}
    for action in data["fix"]["actions"]:
        out.update(action["settings"])
    return out


def snippet(data: dict, fmt: str, needle: str) -> str:
    for s in data["fix"]["snippets"]:
        if s["format"] == fmt and needle in s["content"]:
            return s["content"]
    raise AssertionError(f"no {fmt} snippet containing {needle!r}: {[s['format'] for s in data['fix']['snippets']]}")


def test_llamafactory_heartbeat_monitor():
    data = advise("llamafactory-heartbeat")
    assert data["causes"][0]["code"] == "heartbeat-monitor-kill"
    assert "does not change" in data["causes"][0]["summary"]  # raising ddp_timeout is not the fix
    assert settings(data)["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] == 1200
    kinds = [a["kind"] for a in data["fix"]["actions"]]
    assert kinds[0] == "infra"  # align node start-up comes first
    off = next(a for a in data["fix"]["actions"] if "TORCH_NCCL_ENABLE_MONITORING" in a["settings"])
    assert off["mitigation"] and "hangs" in off["caveat"]
    assert data["fix"]["actions"].index(off) > kinds.index("infra")
    assert "export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=1200" in snippet(data, "shell", "HEARTBEAT")


def test_openr1_allgather_during_save():
    data = advise("openr1-save-allgather")
    assert data["causes"][0]["code"] == "checkpoint-save-straggler"
    content = snippet(data, "openr1-yaml", "ddp_timeout")
    assert "ddp_timeout: 3600" in content  # 1.5 B model: 1800-3600 s, and above the 1800 s that expired
    assert "--ddp_timeout 3600" in snippet(data, "hf-cli", "ddp_timeout")
    derivation = next(a for a in data["fix"]["actions"] if "collective_timeout" in a["settings"])["derivations"][0]
    assert "1.5 B params" in derivation and "1800 s that already expired" in derivation
    assert any(a["kind"] == "infra" for a in data["fix"]["actions"])  # faster storage


def test_torchtitan_tensorboard_logging_straggler():
    data = advise("torchtitan-tb-logging")
    assert data["causes"][0]["code"] == "logging-io-straggler"
    assert data["facts"]["slowdown"] is True and data["facts"]["timeout_ms"] == 100000
    titles = " ".join(a["title"] for a in data["fix"]["actions"])
    assert "local storage" in titles and "Log less often" in titles and "Profile" in titles
    stopgap = next(a for a in data["fix"]["actions"] if "collective_timeout" in a["settings"])
    assert stopgap["mitigation"] and stopgap["settings"]["collective_timeout"] == 300
    toml = snippet(data, "torchtitan-toml", "train_timeout_seconds")
    assert "[comm]" in toml and "train_timeout_seconds = 300" in toml
    assert "log_freq = 100" in snippet(data, "torchtitan-toml", "log_freq")


def test_lightning_invalid_rank_with_harmless_plugin_line():
    data = advise("lightning-invalid-rank")
    assert data["causes"][0]["code"] == "rank-world-size-misconfig"
    assert [n["cause_id"] for n in data["notices"]] == ["nccl-plugin-noise"]
    assert "Trainer(num_nodes=2, devices=4)" in snippet(data, "lightning-python", "num_nodes")
    assert "class_path: lightning.pytorch.strategies.DDPStrategy" in snippet(data, "lightningcli-yaml", "timeout")
    assert "NCCL_SOCKET_IFNAME" in settings(data)
    assert any("ClusterEnvironment" in a["steps"] for a in data["fix"]["actions"])


def test_trl_packing_false_hang_is_the_0_15_0_bug():
    data = advise("trl-packing-false")
    top = data["causes"][0]
    assert top["code"] == "framework-version-bug" and top["id"] == "trl-sft-token-accuracy-gather"
    upgrade = data["fix"]["actions"][0]
    assert upgrade["kind"] == "upgrade" and "0.15.1" in upgrade["title"]
    assert any("pull/2890" in ref for ref in upgrade["references"])
    assert any(a["settings"].get("packing") is True for a in data["fix"]["actions"])
    assert "packing: true" in snippet(data, "trl-yaml", "packing")


def test_trl_bug_not_blamed_on_a_fixed_release():
    case = scenario("trl-packing-false")
    data = run_cli("suggest", "--error", case["log"], "--json", "--answer", "framework=trl", "--answer", "framework_version=0.16.0").json
    assert data["causes"][0]["id"] != "trl-sft-token-accuracy-gather"


def test_fixture_logs_are_the_projects_own():
    """The founding scenarios ship with the project; none of their lines is taken from the shared
    development set (checked when it is beside the checkout)."""
    from helpers import case_paths, scenario_paths

    import yaml

    ours = {line.strip() for p in scenario_paths() for line in scenario(p.stem)["log"].splitlines() if len(line.strip()) > 30}
    assert len(scenario_paths()) == 5 and ours
    for path in case_paths():
        theirs = {line.strip() for line in yaml.safe_load(path.read_text(encoding="utf-8"))["log"].splitlines()}
        assert not ours & theirs, path.name
