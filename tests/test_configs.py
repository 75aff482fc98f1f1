"""Training configs read in their own formats (advisor/configs.py): format detection, values with
their lines, the model size, and clear errors for values of the wrong type. The example configs in
tests/fixtures/preflight/configs are also parsed by the frameworks themselves (tests/integration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.configs import (ConfigError, ConfigUsage, model_size, read_config, size_from_model_config, size_from_name,
                             split_function)

CONFIGS = Path(__file__).parent / "fixtures" / "preflight" / "configs"
OPENR1 = CONFIGS / "recipes" / "Qwen2.5-32B-Instruct" / "grpo" / "config_demo.yaml"


@pytest.mark.parametrize("name, fmt, framework", [
    ("llamafactory_llama2_70b_full_sft.yaml", "llamafactory-yaml", "llama-factory"),
    ("llamafactory_qwen_lora_sft.yaml", "llamafactory-yaml", "llama-factory"),
    ("trl_sft_qwen.yaml", "trl-yaml", "trl"),
    ("recipes/Qwen2.5-32B-Instruct/grpo/config_demo.yaml", "openr1-yaml", "open-r1"),
    ("hf_training_args_13b.json", "hf-json", "transformers"),
    ("torchtitan_llama3_70b.toml", "torchtitan-toml", "torchtitan"),
    ("titan_preflight_configs.py:llama3_70b_nfs", "torchtitan-python", "torchtitan"),
    ("lightningcli_llama70b.yaml", "lightningcli-yaml", "lightning"),
    ("accelerate_debug.yaml", "accelerate-yaml", "accelerate"),
])
def test_formats_are_detected(name, fmt, framework):
    config = read_config(str(CONFIGS / name))
    assert (config.format, config.framework) == (fmt, framework)


def test_values_keep_their_lines():
    config = read_config(str(CONFIGS / "llamafactory_llama2_70b_full_sft.yaml"))
    assert config.get("finetuning_type") == "full" and config.settings["finetuning_type"].line == 10
    assert config.evidence("model_name_or_path").endswith("llamafactory_llama2_70b_full_sft.yaml:4 model_name_or_path: meta-llama/Llama-2-70b-hf")
    assert config.evidence("ddp_timeout", "default 1800 s").endswith(": ddp_timeout not set (default 1800 s)")


def test_json_lines_and_values():
    config = read_config(str(CONFIGS / "hf_training_args_13b.json"))
    assert config.seconds("ddp_timeout") == 1800 and config.settings["ddp_timeout"].line == 8


def test_toml_lines_follow_tables():
    config = read_config(str(CONFIGS / "torchtitan_llama3_70b.toml"))
    assert config.get("metrics.log_freq") == 1 and config.settings["metrics.log_freq"].line == 12
    assert config.get("checkpoint.enable") is True and config.settings["checkpoint.enable"].line == 22
    assert config.get("model.flavor") == "70B"
    assert not config.has("comm.train_timeout_seconds")


def test_trl_env_section_is_read_with_lines():
    config = read_config(str(CONFIGS / "trl_sft_qwen.yaml"))
    assert {k: (s.value, s.line) for k, s in config.env.items()} == {"NCCL_P2P_DISABLE": ("1", 12), "NCCL_BLOCKING_WAIT": ("1", 13)}
    assert config.flag("packing") is False


def test_lightningcli_nested_keys():
    config = read_config(str(CONFIGS / "lightningcli_llama70b.yaml"))
    assert config.get("trainer.strategy.init_args.timeout") == "0:30:00"
    assert config.settings["trainer.strategy.init_args.timeout"].line == 10
    assert config.get("trainer.num_nodes") == 2


def test_titan_python_reads_the_returned_config_tree_without_running_it():
    config = read_config(str(CONFIGS / "titan_preflight_configs.py") + ":llama3_70b_nfs")
    assert config.function == "llama3_70b_nfs"
    assert config.get("checkpoint.enable") is True and config.get("metrics.log_freq") == 1
    assert config.get("dump_folder") == "/mnt/nfs/titan/llama3_70b" and config.get("model.flavor") == "70B"
    assert config.get("comm.init_timeout_seconds") == 600 and not config.has("comm.train_timeout_seconds")
    assert config.settings["metrics.log_freq"].line == 16


def test_titan_python_follows_a_base_function_and_assignments(tmp_path):
    path = tmp_path / "registry.py"
    path.write_text(
        "from torchtitan.trainer import Trainer\n"
        "def base() -> Trainer.Config:\n"
        "    spec = model_registry('405B')\n"
        "    return Trainer.Config(model_spec=spec, comm=CommConfig(train_timeout_seconds=100, init_timeout_seconds=300),\n"
        "                          checkpoint=CheckpointManager.Config(interval=10))\n"
        "def derived() -> Trainer.Config:\n"
        "    config = base()\n"
        "    config.comm.train_timeout_seconds = 900\n"
        "    config.checkpoint = CheckpointManager.Config(enable=True)\n"
        "    return config\n"
        "def helper(x):\n    return x\n")
    config = read_config(f"{path}:derived")
    assert config.get("comm.train_timeout_seconds") == 900 and config.settings["comm.train_timeout_seconds"].line == 8
    assert config.get("comm.init_timeout_seconds") == 300
    assert config.get("checkpoint.enable") is True and not config.has("checkpoint.interval")  # a fresh sub-config
    assert config.get("model.flavor") == "405B"
    with pytest.raises(ConfigError, match="name the config function.*base, derived"):
        read_config(str(path))
    with pytest.raises(ConfigError, match="no function 'missing'"):
        read_config(f"{path}:missing")


def test_split_function():
    assert split_function("a/registry.py:llama3_8b") == ("a/registry.py", "llama3_8b")
    assert split_function("a/train.yaml") == ("a/train.yaml", None)
    assert split_function("C:x") == ("C", "x")


@pytest.mark.parametrize("framework, fmt", [("trl", "trl-yaml"), ("open-r1", "openr1-yaml"), ("llama-factory", "llamafactory-yaml"),
                                            ("transformers", "trl-yaml")])
def test_framework_overrides_detection_of_flat_yaml(framework, fmt):
    config = read_config(str(CONFIGS / "trl_sft_qwen.yaml"), framework)
    assert (config.framework, config.format) == (framework, fmt)


@pytest.mark.parametrize("name, framework", [("torchtitan_llama3_70b.toml", "trl"), ("lightningcli_llama70b.yaml", "torchtitan"),
                                             ("trl_sft_qwen.yaml", "deepspeed")])
def test_a_framework_that_cannot_read_the_file_is_a_usage_error(name, framework):
    with pytest.raises(ConfigUsage):
        read_config(str(CONFIGS / name), framework)


def test_model_size_from_name_flavor_and_local_config(tmp_path):
    assert model_size(read_config(str(CONFIGS / "llamafactory_llama2_70b_full_sft.yaml"))).billions == 70
    assert model_size(read_config(str(CONFIGS / "torchtitan_llama3_70b.toml"))).how == "flavor"
    assert model_size(read_config(str(CONFIGS / "lightningcli_llama70b.yaml"))).billions == 70
    # a local model folder: its config.json says what the name does not
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "hidden_size": 8192, "num_hidden_layers": 80, "intermediate_size": 28672, "num_attention_heads": 64,
        "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False}))
    cfg = tmp_path / "train.yaml"
    cfg.write_text(f"model_name_or_path: {folder}\nstage: sft\n")
    size = model_size(read_config(str(cfg)))
    assert size.how == "model config" and 68 < size.billions < 70  # Llama-2-70B has 69 B


@pytest.mark.parametrize("name, billions", [
    ("meta-llama/Llama-2-70b-hf", 70), ("Qwen/Qwen2.5-0.5B-Instruct", 0.5), ("HuggingFaceTB/SmolLM2-135M", 0.135),
    ("mistralai/Mixtral-8x7B-v0.1", 56), ("Qwen/Qwen3-30B-A3B", 30), ("gpt2", None), ("deepseek-ai/DeepSeek-V3", None),
    ("llama3_8b", 8), ("microsoft/phi-3-mini-4k-instruct", None), ("facebook/opt-1.3b", 1.3), ("x" * 10000 + "-7b", 7),
])
def test_size_from_name(name, billions):
    assert size_from_name(name) == billions


def test_size_from_model_config_needs_the_core_fields():
    assert size_from_model_config({"hidden_size": 4096}) is None
    assert size_from_model_config({"hidden_size": True, "num_hidden_layers": 32, "vocab_size": 32000}) is None
    llama_7b = {"hidden_size": 4096, "num_hidden_layers": 32, "intermediate_size": 11008, "num_attention_heads": 32,
                "vocab_size": 32000}
    assert 6.5 < size_from_model_config(llama_7b) < 7.0


@pytest.mark.parametrize("text, key, says", [
    ("stage: sft\nddp_timeout: abc\n", "ddp_timeout", "train.yaml:2: ddp_timeout must be a number, not abc"),
    ("stage: sft\nddp_timeout: [1, 2]\n", "ddp_timeout", "must be a non-negative number"),
    ("stage: sft\nddp_timeout: true\n", "ddp_timeout", "must be a non-negative number"),
    ("stage: sft\nddp_timeout: -5\n", "ddp_timeout", "must be a non-negative number"),
    ("stage: sft\nddp_timeout: .inf\n", "ddp_timeout", "must be a non-negative number"),
])
def test_wrong_types_name_the_file_line_and_key(tmp_path, text, key, says):
    path = tmp_path / "train.yaml"
    path.write_text(text)
    config = read_config(str(path))
    with pytest.raises(ConfigError) as exc:
        config.seconds(key)
    assert says in str(exc.value)


def test_numeric_strings_are_what_argparse_would_convert(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text('ddp_timeout: "3600"\npacking: "true"\n')
    config = read_config(str(path))
    assert config.seconds("ddp_timeout") == 3600 and config.flag("packing") is True


def test_trl_env_must_be_a_mapping(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text("packing: false\nenv: [NCCL_DEBUG]\n")
    with pytest.raises(ConfigError, match="env must be a mapping"):
        read_config(str(path))
