"""LLaMA-Factory YAML snippets through LLaMA-Factory's own training-argument parser (its own
environment: llamafactory pins older transformers/trl/accelerate). No model is downloaded: the
parse stops at the argument dataclasses, as `llamafactory-cli train` does before loading anything."""

from __future__ import annotations

import pytest
import yaml

from corpus import of_format, require, misspell

BASE = {
    "model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "stage": "sft", "do_train": True, "finetuning_type": "lora",
    "dataset": "alpaca_en_demo", "template": "qwen", "output_dir": "saves/test",
}


def parse(config: dict):
    parser = require("llamafactory.hparams.parser")
    return parser._parse_train_args(config)  # dataclass parse only (get_train_args adds device checks)


def find(parsed, key: str):
    for group in parsed:
        if hasattr(group, key):
            return getattr(group, key)
    raise AssertionError(f"{key} not in any LLaMA-Factory argument group")


@pytest.mark.parametrize("case", of_format("llamafactory-yaml"))
def test_llamafactory_yaml(case):
    snippet = yaml.safe_load(case.content)
    parsed = parse({**BASE, **snippet})
    for key, value in case.expected().items():
        assert find(parsed, key) == value, key
    bad = yaml.safe_load(misspell(case.content, next(iter(snippet)), ":"))
    with pytest.raises((ValueError, SystemExit)):
        parse({**BASE, **bad})


# --- preflight: the example configs, read by LLaMA-Factory and by the advisor, agree ---------------

from corpus import preflight_configs, preflight_fix_snippets, preflight_reading  # noqa: E402

PREFLIGHT_KEYS = ("model_name_or_path", "finetuning_type", "ddp_timeout", "tokenized_path", "preprocessing_num_workers",
                  "streaming", "output_dir", "save_only_model")


def load_like_llamafactory(path) -> dict:
    """`llamafactory-cli train cfg.yaml` reads the file with OmegaConf (hparams/parser.py read_args)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(path))


@pytest.mark.parametrize("config", preflight_configs("llamafactory-yaml"))
def test_preflight_config_reads_like_llamafactory(config):
    parsed = parse(load_like_llamafactory(config.path))
    ours = preflight_reading(config)
    for key in PREFLIGHT_KEYS:
        theirs = find(parsed, key)
        if key in ours:
            assert ours[key] == theirs, key
        elif key == "finetuning_type":
            assert theirs == "lora"  # what the advisor assumes when it is absent (LoRA: no save check)
        else:
            assert theirs in (None, False, 1800), (key, theirs)  # absent: the defaults preflight relies on


@pytest.mark.parametrize("config", preflight_configs("llamafactory-yaml"))
def test_preflight_fix_merged_into_the_config_is_read(config):
    snippets = preflight_fix_snippets(config)
    for finding, snippet in snippets:
        fixed = {**load_like_llamafactory(config.path), **yaml.safe_load(snippet.content)}
        parsed = parse(fixed)
        for key, value in finding.fix.settings.items():
            native = {"collective_timeout": "ddp_timeout", "tokenized_path": "tokenized_path",
                      "preprocessing_workers": "preprocessing_num_workers"}.get(key, key)
            if native in yaml.safe_load(snippet.content):
                assert find(parsed, native) == value, (finding.id, key)
