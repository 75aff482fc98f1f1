"""Fix settings rendered in each framework's own config format.

A KB fix names abstract knobs (`collective_timeout`, `log_every_steps`, ...) and environment
variables. A framework file (kb/frameworks/*.yaml) says how that framework spells each knob and in
which formats its users write config. This module turns both into paste-ready text: LLaMA-Factory
YAML, TRL/HF YAML and CLI flags, torchtitan TOML or Python, Lightning Python and LightningCLI YAML,
accelerate's InitProcessGroupKwargs, DeepSpeed's DEEPSPEED_TIMEOUT (minutes), plain
`init_process_group`, and shell exports with names chosen by torch version.

Every snippet is checked by the framework's own parser in tests/integration.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from advisor.models import Snippet, fact_text
from advisor.versions import version_matches

KNOBS: dict[str, str] = {
    "collective_timeout": "collective timeout after start-up, in seconds",
    "init_timeout": "timeout for process-group creation and the first step, in seconds",
    "log_every_steps": "how often training metrics are logged, in steps",
    "tensorboard": "TensorBoard logging on (true) or off (false)",
    "tensorboard_dir": "folder the TensorBoard/metrics writer uses",
    "profiling": "the framework's profiler on (true) or off",
    "save_only_model": "save weights only, without optimizer/scheduler state",
    "save_on_each_node": "write checkpoints on every node rather than only the main one",
    "packing": "sequence packing on (true) or off",
    "num_nodes": "number of nodes the framework expects",
    "devices": "GPUs per node the framework expects",
    "dataloader_num_workers": "DataLoader worker processes per rank",
    "preprocessing_workers": "processes used to tokenize the dataset",
    "tokenized_path": "where a tokenized copy of the dataset is saved and reloaded",
    "ignore_data_skip": "on resume, do not fast-forward the data loader through the seen batches",
    "find_unused_parameters": "DDP looks for parameters without gradients each step",
    "vllm_server_timeout": "seconds to wait for the vLLM server to come up",
    "distributed_debug": "the framework's own checks that every rank runs the same distributed operations",
}

# Environment variables PyTorch renamed in 2.2 (the TORCH_ name first, old name still read with a
# deprecation warning). Source: torch 2.2.0 ProcessGroupNCCL.hpp, shared/reference/facts.md §1.2.
OLD_ENV_NAMES = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_BLOCKING_WAIT": "NCCL_BLOCKING_WAIT",
    "TORCH_NCCL_DESYNC_DEBUG": "NCCL_DESYNC_DEBUG",
    "TORCH_NCCL_ENABLE_TIMING": "NCCL_ENABLE_TIMING",
}
# Variables that do not exist before 2.2 (heartbeat monitor, Flight Recorder).
NEW_IN_22 = {
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
}
# Flight Recorder aliases added in 2.8 ([W 2.8.0]); the old names are still read.
FR_ALIASES_28 = {
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "TORCH_FR_DUMP_TEMP_FILE",
}

LANGUAGE = {
    "llamafactory-yaml": "yaml", "trl-yaml": "yaml", "openr1-yaml": "yaml", "lightningcli-yaml": "yaml", "accelerate-yaml": "yaml",
    "hf-cli": "bash", "shell": "bash", "deepspeed-env": "bash", "torchtitan-toml": "toml",
    "torchtitan-python": "python", "lightning-python": "python", "accelerate-python": "python",
    "torch-python": "python", "hf-python": "python", "hf-json": "json",
}


@dataclass
class Resolved:
    """One knob with its value, as a framework spells it."""

    knob: str
    key: str
    unit: str
    value: Any
    comment: str | None = None


def env_name(name: str, torch_version: str | None) -> tuple[str | None, str | None]:
    """The variable to export for this torch version, and a note when the name differs."""
    if torch_version and version_matches(torch_version, "<2.2"):
        if name in OLD_ENV_NAMES:
            return OLD_ENV_NAMES[name], f"torch {fact_text(torch_version)} reads the pre-2.2 name {OLD_ENV_NAMES[name]}"
        if name in NEW_IN_22:
            return None, f"{name} does not exist before torch 2.2 (you have {fact_text(torch_version)}); upgrade torch to use it"
    if torch_version and version_matches(torch_version, ">=2.8") and name in FR_ALIASES_28:
        return FR_ALIASES_28[name], f"torch >= 2.8 also reads {FR_ALIASES_28[name]}, the newer name of {name}"
    return name, None


def convert(value: Any, unit: str) -> Any:
    """Seconds into the unit a framework key wants."""
    if unit == "min" and isinstance(value, (int, float)):
        return int(math.ceil(value / 60))
    if unit == "ms" and isinstance(value, (int, float)):
        return int(value * 1000)
    return value


def _hms(seconds: int) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    hms = f"{h}:{m:02d}:{s:02d}"
    return f"{days} day{'s' if days > 1 else ''}, {hms}" if days else hms


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value))  # a JSON string is a valid YAML scalar


def _toml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value))


def _py(value: Any, unit: str) -> str:
    if unit == "timedelta":
        return f"timedelta(seconds={int(value)})"
    return repr(value)


def _comment_lines(items: list[Resolved], prefix: str = "# ") -> list[str]:
    """Each item's comment (a derivation, a placeholder note) wrapped above the settings."""
    import textwrap

    out: list[str] = []
    for r in items:
        if r.comment:
            out.extend(textwrap.wrap(f"{r.key}: {r.comment}", width=96, initial_indent=prefix,
                                     subsequent_indent=prefix + "  ", break_on_hyphens=False))
    return out


# --- renderers, one per format -----------------------------------------------------------------


def _flat_yaml(items: list[Resolved], header: str) -> str:
    lines = [f"# {header}", *_comment_lines(items)]
    lines.extend(f"{r.key}: {_yaml_scalar(convert(r.value, r.unit))}" for r in items)
    return "\n".join(lines) + "\n"


def _hf_cli(items: list[Resolved], header: str) -> str:
    flags = " ".join(f"--{r.key} {_cli_value(convert(r.value, r.unit))}" for r in items)
    return "\n".join([f"# {header}", *_comment_lines(items), flags]) + "\n"


def _cli_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return text if text and all(c.isalnum() or c in "._-/:" for c in text) else json.dumps(text)


def _toml(items: list[Resolved], header: str) -> str:
    sections: dict[str, list[str]] = {}
    for r in items:
        section, _, key = r.key.rpartition(".")
        sections.setdefault(section, []).append(f"{key} = {_toml_scalar(convert(r.value, r.unit))}")
    out = [f"# {header}", *_comment_lines(items)]
    for section, lines in sections.items():
        out.append(f"[{section}]")
        out.extend(lines)
    return "\n".join(out) + "\n"


def _titan_python(items: list[Resolved], header: str) -> str:
    lines = [f"# {header}", *_comment_lines(items), "# in the function that builds your Trainer.Config (torchtitan >= 0.3):"]
    for r in items:
        lines.append(f"config.{r.key} = {_py(convert(r.value, r.unit), r.unit)}")
    flags = " ".join(_tyro_flag(r.key, convert(r.value, r.unit)) for r in items)
    lines.append(f"# or on the command line: {flags}")
    return "\n".join(lines) + "\n"


def _tyro_flag(key: str, value: Any) -> str:
    """torchtitan parses its command line with tyro: booleans are bare flags (`--metrics.no_x` for false)."""
    if isinstance(value, bool):
        section, _, name = key.rpartition(".")
        return f"--{key}" if value else f"--{section + '.' if section else ''}no_{name}"
    return f"--{key} {_cli_value(value)}"


def _lightning_python(items: list[Resolved], header: str, facts: dict[str, Any]) -> str:
    strategy_cls = "FSDPStrategy" if facts.get("strategy") == "fsdp" else "DDPStrategy"
    strat = [r for r in items if r.key.startswith("strategy.")]
    trainer = [r for r in items if r.key.startswith("trainer.")]
    lines = [f"# {header}"]
    if any(r.unit == "timedelta" for r in items):
        lines.append("from datetime import timedelta")
    lines.append("from lightning.pytorch import Trainer")
    if strat:
        lines.append(f"from lightning.pytorch.strategies import {strategy_cls}")
    lines.append("")
    lines.extend(_comment_lines(items))
    args = [f"{r.key.split('.', 1)[1]}={_py(convert(r.value, r.unit), r.unit)}" for r in trainer]
    if strat:
        sargs = ", ".join(f"{r.key.split('.', 1)[1]}={_py(convert(r.value, r.unit), r.unit)}" for r in strat)
        args.append(f"strategy={strategy_cls}({sargs})")
    lines.append(f"trainer = Trainer({', '.join(args)})")
    return "\n".join(lines) + "\n"


def _lightningcli_yaml(items: list[Resolved], header: str, facts: dict[str, Any]) -> str:
    strategy_cls = "FSDPStrategy" if facts.get("strategy") == "fsdp" else "DDPStrategy"
    strat = [r for r in items if r.key.startswith("strategy.")]
    trainer = [r for r in items if r.key.startswith("trainer.")]
    lines = [f"# {header}"] + _comment_lines(items) + ["trainer:"]
    for r in trainer:
        lines.append(f"  {r.key.split('.', 1)[1]}: {_yaml_scalar(convert(r.value, r.unit))}")
    if strat:
        lines.append("  strategy:")
        lines.append(f"    class_path: lightning.pytorch.strategies.{strategy_cls}")
        lines.append("    init_args:")
        for r in strat:
            value = convert(r.value, r.unit)
            # jsonargparse reads a timedelta only from a quoted "h:mm:ss" string
            shown = json.dumps(_hms(value)) if r.unit == "timedelta" else _yaml_scalar(value)
            lines.append(f"      {r.key.split('.', 1)[1]}: {shown}")
    return "\n".join(lines) + "\n"


def _accelerate(items: list[Resolved], header: str) -> str:
    kwargs = ", ".join(f"{r.key}={_py(convert(r.value, r.unit), r.unit)}" for r in items)
    return "\n".join([
        f"# {header}",
        *_comment_lines(items),
        "from datetime import timedelta",
        "from accelerate import Accelerator, InitProcessGroupKwargs",
        "",
        f"accelerator = Accelerator(kwargs_handlers=[InitProcessGroupKwargs({kwargs})])",
    ]) + "\n"


def _torch_python(items: list[Resolved], header: str, facts: dict[str, Any]) -> str:
    backend = facts.get("backend") or "nccl"
    kwargs = ", ".join(f"{r.key}={_py(convert(r.value, r.unit), r.unit)}" for r in items)
    return "\n".join([
        f"# {header}", *_comment_lines(items),
        "from datetime import timedelta",
        "import torch.distributed as dist",
        "",
        f'dist.init_process_group(backend="{backend}", {kwargs})',
    ]) + "\n"


def _hf_python(items: list[Resolved], header: str) -> str:
    kwargs = ", ".join(f"{r.key}={_py(convert(r.value, r.unit), r.unit)}" for r in items)
    return "\n".join([f"# {header}", *_comment_lines(items), "from transformers import TrainingArguments", "",
                      f"args = TrainingArguments(output_dir=\"out\", {kwargs})"]) + "\n"


def _hf_json(items: list[Resolved]) -> str:
    """Keys to merge into a TrainingArguments JSON file (`HfArgumentParser.parse_json_file`); JSON
    has no comments, so the header and derivations live in the snippet's title and the fix."""
    return json.dumps({r.key: convert(r.value, r.unit) for r in items}, indent=2) + "\n"


def _exports(items: list[Resolved], header: str) -> str:
    import textwrap

    lines = [f"# {header}"]
    for r in items:
        value = convert(r.value, r.unit)
        text = str(int(value)) if isinstance(value, bool) else str(value)
        if r.comment:
            lines.extend(textwrap.wrap(r.comment, width=96, initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False))
        lines.append(f"export {r.key}={_shell_quote(text)}")
    return "\n".join(lines) + "\n"


def _shell_quote(text: str) -> str:
    if text and all(c.isalnum() or c in "._-/:,=+" for c in text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def render(fmt: str, items: list[Resolved], framework: str, header: str, facts: dict[str, Any]) -> Snippet:
    if fmt in ("llamafactory-yaml", "trl-yaml", "openr1-yaml", "accelerate-yaml"):
        content = _flat_yaml(items, header)
    elif fmt == "hf-cli":
        content = _hf_cli(items, header)
    elif fmt == "torchtitan-toml":
        content = _toml(items, header)
    elif fmt == "torchtitan-python":
        content = _titan_python(items, header)
    elif fmt == "lightning-python":
        content = _lightning_python(items, header, facts)
    elif fmt == "lightningcli-yaml":
        content = _lightningcli_yaml(items, header, facts)
    elif fmt == "accelerate-python":
        content = _accelerate(items, header)
    elif fmt == "torch-python":
        content = _torch_python(items, header, facts)
    elif fmt == "hf-python":
        content = _hf_python(items, header)
    elif fmt == "hf-json":
        content = _hf_json(items)
    elif fmt in ("shell", "deepspeed-env"):
        content = _exports(items, header)
    else:  # pragma: no cover - the KB schema limits formats
        raise ValueError(f"unknown snippet format {fmt!r}")
    return Snippet(framework=framework, format=fmt, language=LANGUAGE[fmt], title=header, content=content)
