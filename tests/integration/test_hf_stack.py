"""Snippets for HF Trainer, TRL, Open-R1, Lightning, accelerate, DeepSpeed, plain torch and shell,
fed to each framework's own parser (environment: torch CPU + transformers, trl, accelerate,
lightning, jsonargparse, deepspeed). Each test checks that every value arrives where the framework
reads it, and that a misspelled key is rejected (or, where a framework silently accepts unknown
names, that the value then does not arrive), so these tests can fail.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from corpus import of_format, require, misspell


def config_class(framework: str, keys):
    """The dataclass the framework parses its training arguments into."""
    if framework in ("trl", "open-r1"):
        trl = require("trl")
        return trl.GRPOConfig if "vllm_server_timeout" in keys else trl.SFTConfig
    return require("transformers").TrainingArguments


# CPU-only test machine: TRL configs default to bf16, which transformers refuses without use_cpu.
# (With use_cpu, transformers never builds a process group, so the tests assert on parsed arguments.)
CPU = ["--use_cpu", "true"]


def flags_of(content: str) -> str:
    return [line for line in content.splitlines() if line.startswith("--")][-1]


@pytest.mark.parametrize("case", of_format("hf-cli"))
def test_hf_cli_flags(case, tmp_path):
    transformers = require("transformers")
    expected = case.expected()
    parser = transformers.HfArgumentParser((config_class(case.framework, expected),))
    flags = flags_of(case.content)
    (args,) = parser.parse_args_into_dataclasses(args=shlex.split(flags) + ["--output_dir", str(tmp_path), *CPU])
    for key, value in expected.items():
        assert getattr(args, key) == value, key
    bad = misspell(flags, "--" + next(iter(expected)))
    with pytest.raises((ValueError, SystemExit)):
        parser.parse_args_into_dataclasses(args=shlex.split(bad) + ["--output_dir", str(tmp_path), *CPU])


@pytest.mark.parametrize("case", of_format("hf-python"))
def test_hf_python(case, tmp_path, monkeypatch):
    require("transformers")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(case.content, namespace)  # noqa: S102 - the snippet under test
    for key, value in case.expected().items():
        assert getattr(namespace["args"], key) == value, key
    with pytest.raises(TypeError):
        exec(misspell(case.content, next(iter(case.expected())), "="), {})  # noqa: S102


@pytest.mark.parametrize("case", of_format("trl-yaml", "openr1-yaml"))
def test_trl_and_openr1_yaml_through_trlparser(case, tmp_path):
    trl = require("trl")
    expected = case.expected()
    parser = trl.TrlParser((config_class(case.framework, expected),))
    path = tmp_path / "recipe.yaml"
    path.write_text(case.content)
    (args,) = parser.parse_args_and_config(args=["--config", str(path), "--output_dir", str(tmp_path), *CPU])
    for key, value in expected.items():
        assert getattr(args, key) == value, key
    path.write_text(misspell(case.content, next(iter(expected)), ":"))
    with pytest.raises((ValueError, SystemExit)):
        parser.parse_args_and_config(args=["--config", str(path), "--output_dir", str(tmp_path), *CPU])


def lightning_value(trainer, key: str):
    owner, _, name = key.partition(".")
    if owner == "strategy":
        return trainer.strategy._timeout if name == "timeout" else trainer.strategy._ddp_kwargs.get(name)
    return {"num_nodes": trainer.num_nodes, "devices": trainer.num_devices, "log_every_n_steps": trainer.log_every_n_steps}[name]


@pytest.mark.parametrize("case", of_format("lightning-python"))
def test_lightning_python(case, tmp_path, monkeypatch):
    require("lightning")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(case.content, namespace)  # noqa: S102
    trainer = namespace["trainer"]
    for key, value in case.expected().items():
        assert lightning_value(trainer, key) == value, key
    first = next(iter(case.expected()))
    bad = misspell(case.content, first.split(".", 1)[1], "=")
    try:
        namespace = {}
        exec(bad, namespace)  # noqa: S102
    except TypeError:
        return  # rejected
    # DDPStrategy passes unknown keyword arguments on to DDP: then the value must not have arrived
    assert lightning_value(namespace["trainer"], first) != case.expected()[first]


@pytest.mark.parametrize("case", of_format("lightningcli-yaml"))
def test_lightningcli_yaml(case, tmp_path, monkeypatch):
    require("jsonargparse")
    cli_module = require("lightning.pytorch.cli")
    demos = require("lightning.pytorch.demos.boring_classes")
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "config.yaml"
    path.write_text(case.content)

    def parse(config):
        return cli_module.LightningCLI(demos.BoringModel, demos.BoringDataModule, run=False,
                                       args=["--config", str(config), "--trainer.accelerator=cpu"], save_config_callback=None)

    cli = parse(path)
    for key, value in case.expected().items():
        assert lightning_value(cli.trainer, key) == value, key
    path.write_text(misspell(case.content, next(iter(case.expected())).split(".", 1)[1], ":"))
    with pytest.raises(SystemExit):
        parse(path)


@pytest.mark.parametrize("case", of_format("accelerate-python"))
def test_accelerate_init_process_group_kwargs(case):
    require("accelerate")
    namespace: dict = {}
    exec(case.content, namespace)  # noqa: S102
    handler = namespace["accelerator"].init_handler
    for key, value in case.expected().items():
        assert getattr(handler, key) == value, key
    with pytest.raises(TypeError):
        exec(misspell(case.content, next(iter(case.expected())), "="), {})  # noqa: S102


ACCELERATE_BASE = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "num_machines": 1,
                   "num_processes": 8, "machine_rank": 0, "mixed_precision": "bf16", "use_cpu": False}


@pytest.mark.parametrize("case", of_format("accelerate-yaml"))
def test_accelerate_config_file(case, tmp_path):
    config_args = require("accelerate.commands.config.config_args")
    snippet = yaml.safe_load(case.content)
    path = tmp_path / "accelerate.yaml"
    path.write_text(yaml.safe_dump({**ACCELERATE_BASE, **snippet}))
    config = config_args.load_config_from_file(str(path))
    for key, value in case.expected().items():
        assert getattr(config, key) == value, key
    path.write_text(yaml.safe_dump({**ACCELERATE_BASE, **yaml.safe_load(misspell(case.content, next(iter(snippet)), ":"))}))
    with pytest.raises(ValueError):
        config_args.load_config_from_file(str(path))


def deepspeed_timeout(snippet_path) -> float:
    code = "import deepspeed.constants as c; print(c.default_pg_timeout.total_seconds())"
    env = {k: v for k, v in os.environ.items() if k != "DEEPSPEED_TIMEOUT"}
    done = subprocess.run(["bash", "-c", f"source {shlex.quote(str(snippet_path))} && {shlex.quote(sys.executable)} -c {shlex.quote(code)}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", of_format("deepspeed-env"))
def test_deepspeed_timeout_is_read_in_minutes(case, tmp_path):
    require("deepspeed")
    ((key, minutes),) = case.expected().items()
    path = tmp_path / "env.sh"
    path.write_text(case.content)
    assert deepspeed_timeout(path) == timedelta(minutes=minutes).total_seconds()
    seconds = next(item.value for item in case.items)
    assert minutes * 60 >= seconds  # rounded up to whole minutes, never below the computed seconds
    path.write_text(misspell(case.content, key, "="))
    assert deepspeed_timeout(path) != minutes * 60  # an unknown name is ignored: the value did not arrive


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", of_format("torch-python"))
def test_torch_init_process_group(case, monkeypatch):
    torch = require("torch")
    import torch.distributed as dist

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    exec(case.content.replace('backend="nccl"', 'backend="gloo"'), {})  # noqa: S102 - CPU-only machine
    try:
        pg = dist.distributed_c10d._get_default_group()
        assert pg._get_backend(torch.device("cpu")).options._timeout == case.expected()["timeout"]
    finally:
        dist.destroy_process_group()
    with pytest.raises(TypeError):
        exec(misspell(case.content, "timeout", "="), {})  # noqa: S102


@pytest.mark.parametrize("case", of_format("shell"))
def test_shell_exports(case, tmp_path):
    path = tmp_path / "env.sh"
    path.write_text(case.content)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    for key, value in case.expected().items():
        done = subprocess.run(["bash", "-c", f'set -eu; source {shlex.quote(str(path))}; printf %s "${{{key}}}"'],
                              capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
        shown = str(int(value)) if isinstance(value, bool) else str(value)
        assert done.returncode == 0 and done.stdout == shown, (key, done.stderr)


# --- preflight: the example configs, read by the frameworks and by the advisor, agree ---------------

from dataclasses import dataclass as _dataclass  # noqa: E402

from corpus import preflight_configs, preflight_fix_snippets, preflight_reading  # noqa: E402


def _compare(ours: dict, parsed_objects, keys) -> None:
    for key in keys:
        theirs = next(getattr(o, key) for o in parsed_objects if hasattr(o, key))
        assert ours.get(key, theirs) == theirs, key


@pytest.mark.parametrize("config", preflight_configs("trl-yaml"))
def test_preflight_trl_recipe_reads_like_trlparser(config, tmp_path, monkeypatch):
    trl = require("trl")
    for name in config.env:
        monkeypatch.delenv(name, raising=False)
    parser = trl.TrlParser((trl.ScriptArguments, trl.SFTConfig, trl.ModelConfig))
    parsed = parser.parse_args_and_config(args=["--config", config.path, *CPU])
    _compare(preflight_reading(config), parsed, ("model_name_or_path", "ddp_timeout", "packing", "save_only_model", "output_dir"))
    import os

    for name, setting in config.env.items():  # TrlParser exported the recipe's env: section
        assert os.environ[name] == str(setting.value), name


@pytest.mark.parametrize("config", preflight_configs("openr1-yaml"))
def test_preflight_openr1_recipe_reads_like_trlparser(config):
    trl = require("trl")
    grpo = require("trl.scripts.grpo")
    parser = trl.TrlParser((grpo.GRPOScriptArguments, trl.GRPOConfig, trl.ModelConfig))
    parsed = parser.parse_args_and_config(args=["--config", config.path, *CPU])
    _compare(preflight_reading(config), parsed, ("model_name_or_path", "ddp_timeout", "reward_funcs", "num_generations",
                                                  "use_vllm", "output_dir"))


@_dataclass
class ModelArguments:
    """The model half of a script's arguments (as in transformers' examples/run_clm.py)."""

    model_name_or_path: str


@pytest.mark.parametrize("config", preflight_configs("hf-json"))
def test_preflight_training_arguments_json_reads_like_hfargumentparser(config, tmp_path):
    transformers = require("transformers")
    parser = transformers.HfArgumentParser((ModelArguments, transformers.TrainingArguments))
    parsed = parser.parse_json_file(config.path)
    _compare(preflight_reading(config), parsed, ("model_name_or_path", "ddp_timeout", "output_dir", "save_strategy", "save_steps"))
    # the fix in the same format, merged into the file, is what TrainingArguments then holds
    fixes = preflight_fix_snippets(config, {"model_size_b": 70})
    assert fixes, "the 13 B example with a 70 B answer must need a longer timeout"
    for finding, snippet in fixes:
        data = {**json.loads(Path(config.path).read_text()), **json.loads(snippet.content)}
        path = tmp_path / "fixed.json"
        path.write_text(json.dumps(data))
        (_, args) = parser.parse_json_file(str(path))
        assert args.ddp_timeout == finding.fix.settings["collective_timeout"]
        path.write_text(json.dumps({**data, "ddp_timeoutx": 1}))
        with pytest.raises(ValueError):
            parser.parse_json_file(str(path))


@pytest.mark.parametrize("config", preflight_configs("lightningcli-yaml"))
def test_preflight_lightningcli_config_reads_like_lightningcli(config, tmp_path, monkeypatch):
    require("jsonargparse")
    cli_module = require("lightning.pytorch.cli")
    demos = require("lightning.pytorch.demos.boring_classes")
    monkeypatch.chdir(tmp_path)

    class NamedModel(demos.BoringModel):
        def __init__(self, model_name: str = "tiny"):
            super().__init__()
            self.model_name = model_name

    def parse(path):
        return cli_module.LightningCLI(NamedModel, demos.BoringDataModule, run=False, save_config_callback=None,
                                       args=["--config", str(path), "--trainer.accelerator=cpu"])

    cli = parse(config.path)
    ours = preflight_reading(config)
    assert cli.trainer.strategy._timeout == timedelta(seconds=ours["trainer.strategy.init_args.timeout"])
    assert cli.model.model_name == ours["model.model_name"] and cli.trainer.num_nodes == ours["trainer.num_nodes"]
    # the fix snippet, merged into the config, is the timeout the strategy gets
    for finding, snippet in preflight_fix_snippets(config):
        data = yaml.safe_load(Path(config.path).read_text())
        data["trainer"]["strategy"] = yaml.safe_load(snippet.content)["trainer"]["strategy"]
        path = tmp_path / "fixed.yaml"
        path.write_text(yaml.safe_dump(data))
        assert parse(path).trainer.strategy._timeout == timedelta(seconds=finding.fix.settings["collective_timeout"])


@pytest.mark.parametrize("config", preflight_configs("accelerate-yaml"))
def test_preflight_accelerate_config_reads_like_accelerate(config):
    config_args = require("accelerate.commands.config.config_args")
    parsed = config_args.load_config_from_file(config.path)
    assert parsed.debug == preflight_reading(config)["debug"] is True
