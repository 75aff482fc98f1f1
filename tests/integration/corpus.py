"""Every snippet the advisor can emit, with the settings it carries, for the integration tests.

For each framework in the KB and each fix of each cause that has settings, the fix is resolved for
a realistic set of facts (a 7 B model, 2 nodes x 4 GPUs, a 30-minute timeout that expired, ...) and
each resulting snippet is kept with its expected key -> value pairs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from advisor.fixes import resolve_fix
from advisor.knowledge import load_kb
from advisor.models import FactValue, Facts
from advisor.snippets import Resolved, convert

BASE_FACTS = {
    "timeout_ms": 1800000, "model_size_b": 7.0, "nodes": 2, "gpus_per_node": 4, "torch_version": "2.6",
    "heartbeat_timeout_s": 600, "storage": "network-fs", "phase": "save",
}


@dataclass
class Case:
    framework: str
    cause: str
    fix: str
    format: str
    content: str
    items: list[Resolved]

    @property
    def id(self) -> str:
        return f"{self.framework}:{self.cause}:{self.fix}:{self.format}"

    def expected(self) -> dict[str, Any]:
        out = {}
        for item in self.items:
            value = convert(item.value, item.unit)
            out[item.key] = timedelta(seconds=int(value)) if item.unit == "timedelta" else value
        return out


def all_cases() -> list[Case]:
    kb = load_kb()
    cases: dict[tuple[str, str], Case] = {}
    for fw in kb.frameworks:
        values = {k: FactValue(value=v) for k, v in BASE_FACTS.items()}
        values["framework"] = FactValue(value=fw)
        facts = Facts(values=values)
        for cause in kb.causes.values():
            for fix in cause.fixes:
                if not fix.settings or (fix.applies.frameworks and fw not in fix.applies.frameworks):
                    continue
                _, pairs = resolve_fix(kb, fix, facts)
                for snippet, items in pairs:
                    key = (snippet.format, snippet.content)
                    cases.setdefault(key, Case(fw, cause.id, fix.id, snippet.format, snippet.content, items))
    return list(cases.values())


CASES = all_cases()


def of_format(*formats: str) -> list:
    return [pytest.param(c, id=c.id) for c in CASES if c.format in formats]


def require(module: str):
    """Import a framework; under ADVISOR_INTEGRATION=1 (CI) a missing one fails instead of skipping."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        if os.environ.get("ADVISOR_INTEGRATION") == "1":
            pytest.fail(f"{module} must be installed for the integration suite: {exc}")
        pytest.skip(f"{module} is not installed (integration environment only)")


def misspell(content: str, key: str, after: str = "") -> str:
    """The same snippet with `key` (followed by `after`, e.g. '=' or ':') misspelled on its first
    line that is not a comment (the derivation comments repeat the key)."""
    lines = content.split("\n")
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("#") and key + after in line:
            lines[i] = line.replace(key + after, key + "x" + after, 1)
            return "\n".join(lines)
    raise AssertionError(f"{key + after!r} not in {content!r}")


# --- preflight: the example configs of tests/fixtures/preflight, as the advisor reads them ----------

PREFLIGHT = Path(__file__).resolve().parents[1] / "fixtures" / "preflight"
PREFLIGHT_CONFIGS = [
    "llamafactory_llama2_70b_full_sft.yaml", "llamafactory_qwen_lora_sft.yaml", "trl_sft_qwen.yaml",
    "recipes/Qwen2.5-32B-Instruct/grpo/config_demo.yaml", "hf_training_args_13b.json", "torchtitan_llama3_70b.toml",
    "titan_preflight_configs.py:llama3_70b_nfs", "titan_preflight_configs.py:llama3_8b_checkpointed",
    "lightningcli_llama70b.yaml", "accelerate_debug.yaml",
]


def preflight_configs(*formats: str) -> list:
    """The example configs in these formats, read by advisor.configs (not by the framework)."""
    from advisor.configs import read_config

    out = []
    for spec in PREFLIGHT_CONFIGS:
        config = read_config(str(PREFLIGHT / "configs" / spec))
        if config.format in formats:
            out.append(pytest.param(config, id=spec))
    return out


def preflight_reading(config) -> dict[str, Any]:
    """What the preflight checks take from a config: the collective timeout in force (the config's
    value, else the framework's default from the KB) and every other key they read."""
    from advisor.knowledge import load_kb
    from advisor.preflight import Context, base_facts, current_timeout

    ctx = Context(kb=load_kb(), nodes=[], config=config)
    ctx.facts = base_facts(ctx)
    seconds, key, _ = current_timeout(ctx)
    values = {key: seconds} if key else {}
    for name, setting in config.settings.items():
        if not isinstance(setting.value, dict):
            values.setdefault(name, setting.value)
    return values


def preflight_fix_snippets(config, answers: dict[str, Any] | None = None):
    """The fix snippets preflight gives for this config (with every node unknown), in its format."""
    from advisor.knowledge import load_kb
    from advisor.preflight import run_preflight

    report, _ = run_preflight(load_kb(), [], config, answers or {})
    return [(f, s) for f in report.findings if f.fix for s in f.fix.snippets if s.format == config.format]
