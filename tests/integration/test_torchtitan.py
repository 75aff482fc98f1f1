"""torchtitan snippets through torchtitan's own config loader. TOML is read by releases up to
0.2.2; from 0.3.0 configs are Python (`config.<section>.<key> = ...`) with `--section.key` flags.
Each runs in the environment with the matching release installed."""

from __future__ import annotations

import shlex

import pytest

from corpus import of_format, require, misspell


def titan_version():
    from importlib.metadata import version

    require("torchtitan.config")
    return tuple(int(x) for x in version("torchtitan").split(".")[:2])


def attr(config, dotted: str):
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


@pytest.mark.parametrize("case", of_format("torchtitan-toml"))
def test_torchtitan_toml(case, tmp_path):
    if titan_version() >= (0, 3):
        pytest.skip("torchtitan >= 0.3 does not read TOML (the snippet says so); tested in the 0.2.2 environment")
    config_manager = require("torchtitan.config").ConfigManager
    path = tmp_path / "train.toml"
    path.write_text(case.content)
    config = config_manager().parse_args(["--job.config_file", str(path)])
    for key, value in case.expected().items():
        assert attr(config, key) == value, key
    path.write_text(misspell(case.content, next(iter(case.expected())).rsplit(".", 1)[1], " ="))
    with pytest.raises((ValueError, SystemExit)):
        config_manager().parse_args(["--job.config_file", str(path)])


@pytest.mark.parametrize("case", of_format("torchtitan-python"))
def test_torchtitan_python_config(case):
    if titan_version() < (0, 3):
        pytest.skip("the Python config form is torchtitan >= 0.3; tested in the 0.3 environment")
    config_manager = require("torchtitan.config").ConfigManager
    base = ["--module", "llama3", "--config", "llama3_debugmodel"]
    flags = shlex.split(case.content.split("# or on the command line:", 1)[1].strip().splitlines()[0])
    config = config_manager().parse_args(base + flags)
    for key, value in case.expected().items():
        assert attr(config, key) == value, key
    # the Python lines assign existing fields of the config that the flags just set
    fresh = config_manager().parse_args(base)
    for line in case.content.splitlines():
        if line.startswith("config."):
            target = line.split("=", 1)[0].strip()[len("config."):]
            attr(fresh, target)  # raises AttributeError if the field does not exist
            exec(line, {"config": fresh})  # noqa: S102
    for key, value in case.expected().items():
        assert attr(fresh, key) == value, key
    with pytest.raises(SystemExit):
        config_manager().parse_args(base + [misspell(" ".join(flags), "--" + next(iter(case.expected())))])


# --- preflight: the example configs, read by torchtitan and by the advisor, agree -------------------

import sys  # noqa: E402

from corpus import PREFLIGHT, preflight_configs, preflight_reading  # noqa: E402

TITAN_KEYS = ("comm.train_timeout_seconds", "comm.init_timeout_seconds", "metrics.log_freq", "metrics.enable_tensorboard",
              "metrics.save_tb_folder", "checkpoint.enable", "checkpoint.folder", "checkpoint.interval")


def _compare_titan(config, parsed, dump_key: str, flavor) -> None:
    ours = preflight_reading(config)
    for key in (*TITAN_KEYS, dump_key):
        if key in ours:
            assert ours[key] == attr(parsed, key), key
    assert ours["comm.train_timeout_seconds"] == parsed.comm.train_timeout_seconds  # the default the advisor assumes
    assert ours.get("model.flavor") == flavor


@pytest.mark.parametrize("config", preflight_configs("torchtitan-toml"))
def test_preflight_toml_reads_like_torchtitan(config):
    if titan_version() >= (0, 3):
        pytest.skip("TOML is read by torchtitan <= 0.2.2; tested in the 0.2.2 environment")
    config_manager = require("torchtitan.config").ConfigManager
    parsed = config_manager().parse_args(["--job.config_file", config.path])
    _compare_titan(config, parsed, "job.dump_folder", parsed.model.flavor)


@pytest.mark.parametrize("config", preflight_configs("torchtitan-python"))
def test_preflight_python_config_reads_like_torchtitan(config, monkeypatch):
    if titan_version() < (0, 3):
        pytest.skip("Python configs are torchtitan >= 0.3; tested in the 0.3 environment")
    config_manager = require("torchtitan.config").ConfigManager
    monkeypatch.syspath_prepend(str(PREFLIGHT / "configs"))
    sys.modules.pop("titan_preflight_configs", None)
    parsed = config_manager().parse_args(["--module", "titan_preflight_configs", "--config", config.function])
    _compare_titan(config, parsed, "dump_folder", parsed.model_spec.flavor)
