"""`advisor suggest --env FILE` (and the API's `env`): the snapshot answers the fixed questions it
can, adds facts with origin "env", and a question it answered is not asked; answers and the log
still win."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.diagnose import diagnose
from advisor.envfacts import apply_environment, environment_facts, likely_framework
from advisor.envfile import EnvSnapshot, load_snapshot
from advisor.models import DiagnoseRequest, FactValue, Facts

ENV = Path(__file__).parent / "fixtures" / "preflight" / "env"
TIMEOUT = ("[rank3]:[E217 14:55:02.441920337 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
           "timeout: WorkNCCL(SeqNum=38, OpType=_ALLGATHER_BASE, NumelIn=9510912, NumelOut=38043648, Timeout(ms)=1800000) "
           "ran for 1800033 milliseconds before timing out.")


def env(**fields) -> EnvSnapshot:
    return EnvSnapshot.model_validate({"host": "n0", **fields})


@pytest.mark.parametrize("packages, expected", [
    ({"torch": "2.6.0"}, "pytorch"),
    ({"torch": "2.6.0", "transformers": "4.57.1", "accelerate": "1.11.0"}, "transformers"),
    ({"transformers": "4.57.1", "accelerate": "1.11.0", "trl": "0.24.0", "llamafactory": "0.9.5", "deepspeed": "0.18.0"},
     "llama-factory"),
    ({"transformers": "4.48.3", "trl": "0.15.0", "deepspeed": "0.16.3"}, "trl"),
    ({"torchtitan": "0.2.2"}, "torchtitan"),
    ({"lightning": "2.6.6", "deepspeed": "0.19.5"}, "lightning"),
    ({"pytorch-lightning": "2.6.6", "transformers": "4.57.1"}, None),  # two unrelated frameworks: not a guess
    ({}, None),
])
def test_likely_framework(kb, packages, expected):
    assert likely_framework(kb, env(packages=packages))[0] == expected


def test_facts_from_the_fixture_node(kb):
    facts = environment_facts(kb, [load_snapshot(str(ENV / "node0.json"))])
    values = {k: v.value for k, v in facts.items()}
    assert values == {"framework": "trl", "torch_version": "2.6.0+cu124", "nccl_version": "2.21.5", "cuda_version": "12.4",
                      "transformers_version": "4.48.3", "trl_version": "0.15.0", "accelerate_version": "1.3.0",
                      "deepspeed_version": "0.16.3", "gpus_per_node": 2, "container": "docker", "interconnect": "infiniband"}
    assert all(v.origin == "env" and v.detail.startswith("env snapshot node0.json") for v in facts.values())


def test_two_snapshots_give_the_node_count(kb):
    facts = environment_facts(kb, [load_snapshot(str(ENV / "node0.json")), load_snapshot(str(ENV / "node1.json"))])
    assert facts["nodes"].value == 2


@pytest.mark.parametrize("snapshot, fact, value", [
    ({"container": {"kind": "kubernetes"}}, "container", "kubernetes"),
    ({"container": {"kind": "none", "scheduler": "slurm"}}, "container", "slurm"),
    ({"container": {"kind": "none", "hypervisor": "QEMU"}}, "container", "vm"),
    ({"container": {"kind": "none"}}, "container", "bare-metal"),
    ({"infiniband": [{"name": "mlx5_0", "ports": [{"state": "4: ACTIVE", "link_layer": "Ethernet"}]}]}, "interconnect", "roce"),
    ({"infiniband": [{"name": "efa_0", "ports": [{"state": "4: ACTIVE"}]}]}, "interconnect", "efa"),
    ({"gpus": {"count": 4, "topology": "GPU0\tX\tPIX\nGPU1\tPIX\tX"}}, "interconnect", "pcie"),
    ({"gpus": {"count": 4, "visible": 2}}, "gpus_per_node", 2),
])
def test_more_facts(kb, snapshot, fact, value):
    assert environment_facts(kb, [env(**snapshot)])[fact].value == value


def test_precedence(kb):
    snapshot = env(packages={"torch": "2.6.0", "transformers": "4.57.1", "llamafactory": "0.9.5"})
    facts = Facts(values={
        "framework": FactValue(value="transformers", origin="log"),
        "framework_version": FactValue(value="4.57.1", origin="log"),
        "torch_version": FactValue(value=">=2.5", origin="inferred"),
        "gpus_per_node": FactValue(value=4, origin="answer"),
    })
    apply_environment(kb, facts, [EnvSnapshot.model_validate({**snapshot.model_dump(), "gpus": {"count": 8}})])
    # the more specific framework that builds on what the log showed wins, with its own version
    assert (facts.get("framework"), facts.get("framework_version")) == ("llama-factory", "0.9.5")
    assert facts.values["torch_version"].origin == "env" and facts.get("torch_version") == "2.6.0"  # beats an inference
    assert facts.get("gpus_per_node") == 4  # an answer is never overridden
    other = Facts(values={"framework": FactValue(value="lightning", origin="log")})
    apply_environment(kb, other, [snapshot])
    assert other.get("framework") == "lightning" and not other.known("framework_version")


def test_suggest_does_not_ask_what_the_snapshot_answered(kb):
    without = diagnose(DiagnoseRequest(log=TIMEOUT), kb)
    with_env = diagnose(DiagnoseRequest(log=TIMEOUT, env=[load_snapshot(str(ENV / "node0.json"))]), kb)
    assert "framework" in [q.id for q in without.questions]
    assert "framework" not in [q.id for q in with_env.questions]
    assert with_env.fact_sources["framework"].origin == "env" and with_env.facts["torch_version"] == "2.6.0+cu124"


def test_the_framework_answer_picks_that_frameworks_version(kb):
    snapshot = load_snapshot(str(ENV / "clean.json"))
    d = diagnose(DiagnoseRequest(log=TIMEOUT, framework="trl", env=[snapshot]), kb)
    assert (d.facts["framework"], d.facts["framework_version"]) == ("trl", "0.24.0")
    assert d.fact_sources["framework"].origin == "answer" and d.fact_sources["framework_version"].origin == "env"


def test_cli_suggest_env(cli, tmp_path):
    result = cli("suggest", "--error", TIMEOUT, "--env", str(ENV / "node0.json"), "--json")
    assert result.code in (0, 1)
    assert result.json["fact_sources"]["nccl_version"] == {"value": "2.21.5", "origin": "env", "line": None, "text": None,
                                                           "detail": "env snapshot node0.json: nvidia-nccl-cu12 package", "basis": None}
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    result = cli("suggest", "--error", TIMEOUT, "--env", str(bad))
    assert result.code == 3 and "not valid JSON" in result.err and "Traceback" not in result.err
    result = cli("suggest", "--error", TIMEOUT, "--env", str(tmp_path / "missing.json"))
    assert result.code == 3 and "no such file" in result.err


def test_api_env_object(kb):
    import json

    from fastapi.testclient import TestClient

    from advisor.api import Settings, create_app

    client = TestClient(create_app(kb, Settings()))
    snapshot = json.loads((ENV / "node0.json").read_text())
    reply = client.post("/v1/diagnose", json={"log": TIMEOUT, "env": snapshot})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert "framework" not in [q["id"] for q in body["questions"]] and body["fact_sources"]["framework"]["origin"] == "env"
    minimal = client.post("/v1/diagnose", json={"log": TIMEOUT, "env": {"packages": {"torch": "2.1.2", "trl": "0.15.0"}}})
    assert minimal.status_code == 200 and minimal.json()["facts"]["framework_version"] == "0.15.0"
    bad = client.post("/v1/diagnose", json={"log": TIMEOUT, "env": {"interfaces": [{"name": ""}]}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "env.interfaces.0.name"
    wrong = client.post("/v1/diagnose", json={"log": TIMEOUT, "env": {"kind": "other"}})
    assert wrong.status_code == 422


def test_installed_package_versions_are_not_asked(kb):
    """The TRL the node runs answers trl_version: the version question a TRL bug would ask is not asked."""
    d = diagnose(DiagnoseRequest(log=TIMEOUT, env=[load_snapshot(str(ENV / "node0.json"))]), kb)
    assert d.facts["trl_version"] == "0.15.0"
    assert "trl_version" not in [q.id for q in d.questions]
    bare = diagnose(DiagnoseRequest(log=TIMEOUT, framework="trl"), kb)
    assert "trl_version" in [q.id for q in bare.questions]


def test_an_installed_buggy_trl_is_not_a_verdict_until_the_trainer_is_known(kb):
    """TRL 0.15.0 on the node and a collective timeout: the SFT logits-gather bug is likely, but only
    SFTTrainer has it; the advisor asks which trainer runs before it calls it the diagnosis."""
    snapshot = load_snapshot(str(ENV / "node0.json"))
    unsure = diagnose(DiagnoseRequest(log=TIMEOUT, env=[snapshot]), kb)
    assert unsure.causes[0].id == "trl-sft-token-accuracy-gather" and unsure.status != "diagnosed"
    assert unsure.questions[0].id == "trl_trainer"
    sft = diagnose(DiagnoseRequest(log=TIMEOUT, env=[snapshot], answers={"trl_trainer": "sft"}), kb)
    assert sft.causes[0].id == "trl-sft-token-accuracy-gather" and sft.status == "diagnosed"
    grpo = diagnose(DiagnoseRequest(log=TIMEOUT, env=[snapshot], answers={"trl_trainer": "grpo"}), kb)
    assert grpo.causes[0].id != "trl-sft-token-accuracy-gather"
    framed = diagnose(DiagnoseRequest(log=TIMEOUT + '\n  File "/venv/lib/python3.11/site-packages/trl/trainer/sft_trainer.py", '
                                      'line 540, in compute_loss\n', env=[snapshot]), kb)
    assert framed.facts["trl_trainer"] == "sft" and "trl_trainer" not in [q.id for q in framed.questions]
