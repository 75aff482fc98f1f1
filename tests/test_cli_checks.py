"""The `advisor env` and `advisor preflight` commands: output, JSON, files and exit codes
(0 clean, 1 findings, 2 usage, 3 input error), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.envfile import snapshot_from_data

FIX = Path(__file__).parent / "fixtures" / "preflight"
CONFIGS = FIX / "configs"
ENV = FIX / "env"


def test_env_json_is_a_valid_snapshot(cli):
    result = cli("env", "--json")
    assert result.code == 0 and result.err == ""
    snapshot_from_data(result.json, "stdout")


def test_env_text(cli):
    result = cli("env")
    assert result.code == 0
    for label in ("Python", "torch", "NCCL", "interfaces", "distributed variables"):
        assert label in result.out


def test_env_output_file_and_mask_hosts(cli, tmp_path):
    path = tmp_path / "node.json"
    result = cli("env", "-o", str(path), "--mask-hosts")
    assert result.code == 0 and result.out == "" and f"wrote {path}" in result.err
    data = json.loads(path.read_text())
    assert data["host"] == "[HOST]" and data["masked"] is True
    result = cli("env", "-o", str(tmp_path / "no" / "such" / "dir.json"))
    assert result.code == 3 and "cannot write" in result.err


def test_preflight_findings_exit_1_and_json_shape(cli):
    result = cli("preflight", "--env", str(ENV / "node0.json"), "--config", str(CONFIGS / "trl_sft_qwen.yaml"), "--json")
    assert result.code == 1
    data = result.json
    assert list(data) == ["findings"]
    ids = [f["id"] for f in data["findings"]]
    assert "trl-0.15.0-sft-gather" in ids and "dev-shm-small" in ids
    for f in data["findings"]:
        assert f["severity"] in ("error", "warning", "info") and isinstance(f["evidence"], str)
        assert {"code", "severity", "title", "evidence", "fix"} <= set(f)


def test_preflight_clean_exit_0(cli):
    result = cli("preflight", "--env", str(ENV / "clean.json"), "--config", str(CONFIGS / "llamafactory_qwen_lora_sft.yaml"))
    assert result.code == 0 and "No known trap found." in result.out and "LoRA" in result.out


def test_preflight_text_output(cli):
    result = cli("preflight", "--env", str(ENV / "clean.json"), "--config", str(CONFIGS / "llamafactory_llama2_70b_full_sft.yaml"),
                 "--color", "never")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0].startswith("checked clean.json and ") and lines[1] == "2 findings: 1 error, 1 warning"
    assert any(line.startswith("ERROR ddp_timeout = 1800 s") for line in lines)
    assert "        | ddp_timeout: 7680" in lines
    assert "\x1b[" not in result.out


def test_preflight_multi_node(cli):
    result = cli("preflight", "--env", str(ENV / "node0.json"), "--env", str(ENV / "node1.json"), "--json")
    titles = [f["title"] for f in result.json["findings"]]
    assert result.code == 1 and "NCCL differs between the nodes" in titles and "The MTU of ens6 differs between the nodes" in titles


def test_preflight_answers(cli, tmp_path):
    path = tmp_path / "args.json"
    path.write_text('{"output_dir": "/scratch/out", "ddp_timeout": 600}')
    base = ("preflight", "--no-local-env", "--config", str(path), "--json")
    assert cli(*base).code == 0
    result = cli(*base, "--answer", "model_size_b=70", "--answer", "storage=network-fs")
    assert result.code == 1 and result.json["findings"][0]["severity"] == "error"


@pytest.mark.parametrize("args, says", [
    (("--answer", "model_size_b"), "expects ID=VALUE"),
    (("--answer", "nonsense=1"), "expects ID=VALUE"),
    (("--answer", "storage=floppy"), "choose one of"),
    (("--framework", "nosuch"), "unknown framework"),
    (("--framework", "torchtitan", "--config", str(CONFIGS / "trl_sft_qwen.yaml")), "does not read"),
    (("--bogus",), "unrecognized arguments"),
])
def test_preflight_usage_errors_exit_2(cli, args, says):
    result = cli("preflight", "--no-local-env", *args)
    assert result.code == 2 and says in result.err and "Traceback" not in result.err


@pytest.mark.parametrize("args, says", [
    (("--config", "/no/such/train.yaml"), "no such file"),
    (("--env", "/no/such/node.json"), "no such file"),
    (("--config", str(CONFIGS)), "is a directory"),
    (("--env", str(CONFIGS / "trl_sft_qwen.yaml")), "not valid JSON"),
    (("--config", str(CONFIGS / "README-does-not-exist.txt")), "no such file"),
])
def test_preflight_input_errors_exit_3(cli, args, says):
    result = cli("preflight", "--no-local-env", *args)
    assert result.code == 3 and says in result.err and "Traceback" not in result.err


def test_preflight_wrong_type_in_config_is_an_input_error(cli, tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("model_name_or_path: meta-llama/Llama-2-70b-hf\nstage: sft\nfinetuning_type: full\nddp_timeout: soon\n")
    result = cli("preflight", "--no-local-env", "--config", str(path))
    assert result.code == 3 and "train.yaml:4: ddp_timeout must be a number, not soon" in result.err


def test_preflight_on_this_machine(cli):
    result = cli("preflight", "--json")
    assert result.code in (0, 1) and "findings" in result.json


def test_console_script_help_lists_the_new_commands():
    done = subprocess.run([sys.executable, "-m", "advisor", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "preflight" in done.stdout and "env" in done.stdout


def test_the_readme_preflight_example_is_real(cli, tmp_path, monkeypatch):
    """The README shows this run's output: it must stay what the command prints."""
    import shutil

    from helpers import REPO

    shutil.copy(ENV / "clean.json", tmp_path)
    shutil.copy(CONFIGS / "llamafactory_llama2_70b_full_sft.yaml", tmp_path)
    monkeypatch.chdir(tmp_path)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ advisor preflight --env clean.json --config llamafactory_llama2_70b_full_sft.yaml\n", 1)[1]
    shown = block.split("      ...\n", 1)[0].splitlines()
    result = cli("preflight", "--env", "clean.json", "--config", "llamafactory_llama2_70b_full_sft.yaml", "--color", "never")
    assert result.out.splitlines()[:len(shown)] == shown
