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
