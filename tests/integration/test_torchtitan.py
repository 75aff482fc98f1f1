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
