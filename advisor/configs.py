"""Training configs read in their own formats, without importing the frameworks.

One reader per format people launch with:

* LLaMA-Factory YAML or JSON (`llamafactory-cli train cfg.yaml`, OmegaConf over flat keys),
* TRL / Open-R1 recipe YAML (`--config recipe.yaml`, read by TrlParser, with an optional `env:`
  section it exports),
* Hugging Face TrainingArguments JSON (`HfArgumentParser.parse_json_file`),
* torchtitan TOML (releases up to 0.2.2, `--job.config_file`) and torchtitan's Python
  `--module/--config` functions (0.3+), read with `ast`, never executed,
* LightningCLI YAML (`trainer:` / `model:` with `class_path` / `init_args`),
* accelerate's config YAML.

Every value keeps its line, so a finding can point at `train.yaml:14`. Hostile files (huge,
binary, YAML alias bombs, deep nesting, wrong types) get a `ConfigError` that says what is wrong.
The keys come from the KB's framework files where the KB knows them (`kb/frameworks/*.yaml`);
the others are defined here with the release they were read from.
"""

from __future__ import annotations

import ast
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from advisor.inputs import InputError, shown
from advisor.smallfile import read_text_file

MAX_CONFIG_BYTES = 1 << 20
MAX_YAML_NODES = 100_000  # values after expanding aliases: a real config has hundreds
MAX_MODEL_CONFIG_BYTES = 1 << 20

# format -> KB framework id (the default when the user does not say)
FORMAT_FRAMEWORK = {
    "llamafactory-yaml": "llama-factory", "trl-yaml": "trl", "openr1-yaml": "open-r1", "hf-json": "transformers",
    "torchtitan-toml": "torchtitan", "torchtitan-python": "torchtitan", "lightningcli-yaml": "lightning",
    "accelerate-yaml": "accelerate",
}
# framework -> formats it reads (--framework must agree with the file)
FRAMEWORK_FORMATS = {
    "llama-factory": ("llamafactory-yaml",), "trl": ("trl-yaml",), "open-r1": ("openr1-yaml", "trl-yaml"),
    "transformers": ("hf-json", "trl-yaml"), "torchtitan": ("torchtitan-toml", "torchtitan-python"),
    "lightning": ("lightningcli-yaml",), "accelerate": ("accelerate-yaml",),
}

# Keys the KB does not hold, with where they were read (the released packages):
#   LLaMA-Factory 0.9.5 hparams: finetuning_args.py `stage`, `finetuning_type` (default "lora"),
#     data_args.py `template`, `streaming` (False), `preprocessing_num_workers` (None), `tokenized_path` (None)
#   TRL 0.15.0 / 1.16.0: ModelConfig `model_name_or_path`, `use_peft` (False); SFTConfig `packing`
#     (False), `use_liger` (0.15.0); TrlParser exports the YAML's `env:` mapping (scripts/utils.py)
#   transformers 5.23.0 TrainingArguments: `ddp_timeout` (1800), `save_only_model` (False),
#     `save_strategy` ("steps"), `output_dir`
#   torchtitan 0.2.2 config/job_config.py: [job] dump_folder ("./outputs"), [model] name/flavor,
#     [checkpoint] enable (False), folder, interval, async_mode ("disabled"), [metrics] log_freq (10),
#     enable_tensorboard (False), save_tb_folder ("tb"); torchtitan 0.3.0: the same under
#     Trainer.Config (dump_folder at the top, model flavor through model_registry("8B"))
LLAMAFACTORY_KEYS = ("stage", "finetuning_type", "template")
ACCELERATE_KEYS = ("compute_environment", "distributed_type")
OPENR1_HINTS = ("reward_funcs", "system_prompt", "dataset_prompt_column")
GRPO_OR_PREFERENCE_KEYS = ("num_generations", "reward_funcs", "use_vllm", "vllm_mode", "beta", "max_prompt_length",
                           "loss_type", "reward_weights")
DEEPSPEED_JSON_KEYS = ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size")


class ConfigError(InputError):
    """A config that cannot be read or holds a value of the wrong type; the message says which."""


@dataclass
class Setting:
    key: str
    value: Any
    line: int | None = None
    file: str | None = None
    """set when the value comes from another file than the config (a torchtitan base config)."""


@dataclass
class ModelSize:
    billions: float
    evidence: str
    how: str


@dataclass
class TrainingConfig:
    path: str
    format: str
    framework: str
    settings: dict[str, Setting] = field(default_factory=dict)
    env: dict[str, Setting] = field(default_factory=dict)
    function: str | None = None

    @property
    def name(self) -> str:
        return shown(self.path, 120)

    def has(self, key: str) -> bool:
        return key in self.settings

    def get(self, key: str, default: Any = None) -> Any:
        item = self.settings.get(key)
        return default if item is None else item.value

    def where(self, key: str) -> str:
        item = self.settings.get(key)
        name = shown(item.file, 120) if item is not None and item.file else self.name
        if item is None or item.line is None:
            return name
        return f"{name}:{item.line}"

    def evidence(self, key: str, unset: str | None = None) -> str:
        """`train.yaml:14 ddp_timeout: 1800`, or what applies when the key is absent."""
        item = self.settings.get(key)
        if item is None:
            return f"{self.name}: {key} not set" + (f" ({unset})" if unset else "")
        return f"{self.where(key)} {key}: {_short(item.value)}"

    def _bad(self, key: str, expected: str) -> ConfigError:
        return ConfigError(f"{self.where(key)}: {key} must be {expected}, not {_short(self.get(key))}; "
                           f"the framework would refuse it too")

    def seconds(self, key: str) -> float | None:
        """A non-negative number (seconds, steps); numeric strings are what argparse would convert."""
        if key not in self.settings:
            return None
        value = self.get(key)
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise self._bad(key, "a number") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise self._bad(key, "a non-negative number")
        return float(value)

    def flag(self, key: str) -> bool | None:
        if key not in self.settings:
            return None
        value = self.get(key)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.strip().lower() in ("true", "yes", "1")
        raise self._bad(key, "true or false")

    def text(self, key: str) -> str | None:
        if key not in self.settings or self.get(key) is None:
            return None
        value = self.get(key)
        if isinstance(value, (dict, list)) or isinstance(value, bool):
            raise self._bad(key, "a string")
        return str(value)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False) if not isinstance(value, str) else value
    return shown(text, limit)


# --- entry point ------------------------------------------------------------------------------


def split_function(spec: str) -> tuple[str, str | None]:
    """`registry.py:llama3_70b` -> (path, function); a plain path has no function."""
    head, sep, tail = spec.rpartition(":")
    if sep and head and tail.isidentifier() and not os.path.exists(spec):
        return head, tail
    return spec, None


def read_config(spec: str, framework: str | None = None) -> TrainingConfig:
    """Read a training config; `framework` (a KB id) overrides the format detection."""
    path, function = split_function(spec)
    if function and not os.path.exists(path):
        located = _installed_titan_module(path)
        if located:
            path = located
    lower = path.lower()
    text = read_text_file(path, "config", MAX_CONFIG_BYTES)
    name = shown(path, 120)
    if lower.endswith(".py"):
        config = _read_titan_python(text, path, name, function)
    elif lower.endswith(".toml"):
        config = TrainingConfig(path, "torchtitan-toml", "torchtitan", _toml_settings(text, name))
    elif lower.endswith(".json"):
        config = _classify(path, _json_settings(text, name), name, json_file=True)
    elif lower.endswith((".yaml", ".yml")):
        config = _classify(path, _yaml_settings(text, name), name, json_file=False)
    else:
        raise ConfigError(f"{name}: unknown config type; give a .yaml/.yml, .json, .toml or torchtitan .py config")
    if function and config.format != "torchtitan-python":
        raise ConfigError(f"{name}: `:{function}` names a function, which only torchtitan Python configs have")
    if framework:
        config = _with_framework(config, framework)
    if config.format == "trl-yaml" or config.format == "openr1-yaml":
        config.env = _env_section(config)
    return config


def _with_framework(config: TrainingConfig, framework: str) -> TrainingConfig:
    allowed = FRAMEWORK_FORMATS.get(framework)
    if allowed is None:
        raise ConfigUsage(f"--framework {framework}: preflight reads configs of {', '.join(sorted(FRAMEWORK_FORMATS))}")
    if config.format in allowed:
        config.framework = framework
        if framework == "open-r1":
            config.format = "openr1-yaml"
        return config
    flat = config.format in ("trl-yaml", "openr1-yaml", "llamafactory-yaml")
    if flat and "llamafactory-yaml" in allowed:
        config.format, config.framework = "llamafactory-yaml", framework
        return config
    if flat and ("trl-yaml" in allowed or "openr1-yaml" in allowed):
        config.format = "openr1-yaml" if framework == "open-r1" else "trl-yaml"
        config.framework = framework
        return config
    raise ConfigUsage(f"--framework {framework} does not read {config.name} (it looks like a {config.format} config)")


class ConfigUsage(ValueError):
    """--framework names a framework that cannot read this file (a usage error, exit 2)."""


def _classify(path: str, settings: dict[str, Setting], name: str, json_file: bool) -> TrainingConfig:
    top = {key for key in settings if "." not in key}
    if any(k in top for k in DEEPSPEED_JSON_KEYS) and not any(k in top for k in ("ddp_timeout", "output_dir")):
        raise ConfigError(f"{name}: a DeepSpeed config; give the training config that points to it (it holds the timeouts)")
    if any(k in top for k in LLAMAFACTORY_KEYS):
        return TrainingConfig(path, "llamafactory-yaml", "llama-factory", settings)
    if json_file:
        return TrainingConfig(path, "hf-json", "transformers", settings)
    if isinstance(settings.get("trainer", Setting("", None)).value, dict) or any(k.endswith(".class_path") for k in settings):
        return TrainingConfig(path, "lightningcli-yaml", "lightning", settings)
    if any(k in top for k in ACCELERATE_KEYS):
        return TrainingConfig(path, "accelerate-yaml", "accelerate", settings)
    if any(k in top for k in OPENR1_HINTS) or "/recipes/" in "/" + path.replace(os.sep, "/"):
        return TrainingConfig(path, "openr1-yaml", "open-r1", settings)
    return TrainingConfig(path, "trl-yaml", "trl", settings)


def _env_section(config: TrainingConfig) -> dict[str, Setting]:
    """TrlParser exports a recipe's `env:` mapping before training (TRL scripts/utils.py)."""
    section = config.get("env")
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise config._bad("env", "a mapping of environment variables")
    return {str(k): config.settings.get(f"env.{k}", Setting(f"env.{k}", v)) for k, v in section.items()}


# --- YAML --------------------------------------------------------------------------------------


def _yaml_settings(text: str, name: str) -> dict[str, Setting]:
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f":{mark.line + 1}" if mark else ""
            raise ConfigError(f"{name}{where}: not valid YAML ({exc.problem or exc.context}); check the indentation and quotes") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{name}: not valid YAML ({shown(str(exc), 160)})") from None
        except RecursionError:
            raise ConfigError(f"{name}: nested too deeply to be a config") from None
        if node is None:
            raise ConfigError(f"{name}: the config file is empty")
        _check_expansion(node, name)
        try:
            data = loader.construct_document(node)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise ConfigError(f"{name}: a value YAML cannot build ({shown(str(exc), 160)})") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: expected a mapping of settings (key: value), found {type(data).__name__}")
    lines: dict[str, int] = {}
    _yaml_lines(node, "", lines)
    return _flatten(data, lines)


def _check_expansion(root, name: str) -> None:
    """Refuse alias bombs ("billion laughs") and recursive aliases before anything walks the data."""
    from yaml.nodes import MappingNode, SequenceNode

    memo: dict[int, int] = {}
    on_path: set[int] = set()
    # iterative post-order walk: (node, children pending?)
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if expanded:
            on_path.discard(key)
            children = _children(node)
            total = 1 + sum(memo[id(c)] for c in children)
            memo[key] = total
            if total > MAX_YAML_NODES:
                raise ConfigError(f"{name}: its aliases expand to more than {MAX_YAML_NODES:,} values (a YAML bomb?); "
                                  "write the settings out")
            continue
        if key in memo:
            continue
        if key in on_path:
            raise ConfigError(f"{name}: a YAML alias refers to itself (a recursive structure); a config cannot be recursive")
        if not isinstance(node, (MappingNode, SequenceNode)):
            memo[key] = 1
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise ConfigError(f"{name}: a YAML alias refers to itself (a recursive structure); a config cannot be recursive")
            if id(child) not in memo:
                stack.append((child, False))


def _children(node) -> list:
    from yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _yaml_lines(node, prefix: str, lines: dict[str, int], depth: int = 0) -> None:
    from yaml.nodes import MappingNode, ScalarNode

    if not isinstance(node, MappingNode) or depth > 20:
        return
    for key_node, value_node in node.value:
        if not isinstance(key_node, ScalarNode):
            continue
        key = prefix + str(key_node.value)
        lines.setdefault(key, key_node.start_mark.line + 1)
        _yaml_lines(value_node, key + ".", lines, depth + 1)


def _flatten(data: dict, lines: dict[str, int], prefix: str = "", depth: int = 0) -> dict[str, Setting]:
    """Dotted keys for every mapping level (`trainer.strategy.init_args.timeout`), each with its line."""
    out: dict[str, Setting] = {}
    for key, value in data.items():
        dotted = prefix + str(key)
        out[dotted] = Setting(dotted, value, lines.get(dotted))
        if isinstance(value, dict) and depth < 20:
            out.update(_flatten(value, lines, dotted + ".", depth + 1))
    return out


# --- JSON --------------------------------------------------------------------------------------


def _json_settings(text: str, name: str) -> dict[str, Setting]:
    def refuse(token: str):
        raise ValueError(f"{token} is not a number JSON allows")

    try:
        data = json.loads(text, parse_constant=refuse)
    except RecursionError:
        raise ConfigError(f"{name}: nested too deeply to be a config") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:
        raise ConfigError(f"{name}: not valid JSON ({shown(str(exc), 160)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: expected a JSON object of settings, found {type(data).__name__}")
    lines: dict[str, int] = {}
    for key in data:
        index = text.find(json.dumps(str(key)))
        if index >= 0:
            lines[str(key)] = text.count("\n", 0, index) + 1
    return _flatten(data, lines)


# --- TOML --------------------------------------------------------------------------------------

def _toml_settings(text: str, name: str) -> dict[str, Setting]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ConfigError(f"{name}: reading TOML needs Python 3.11 or the `tomli` package (pip install tomli)") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: not valid TOML ({shown(str(exc), 160)})") from None
    except (RecursionError, ValueError) as exc:
        raise ConfigError(f"{name}: not valid TOML ({shown(str(exc), 160)})") from None
    return _flatten(data, _toml_lines(text))


_BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.\"' ")


def _toml_lines(text: str) -> dict[str, int]:
    """The line of each table header and key (`[comm]` then `train_timeout_seconds = 300` gives
    comm.train_timeout_seconds). Values come from tomllib; this only points at lines."""
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split("#", 1)[0].strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            table = _toml_key(stripped.strip("[]"))
            lines.setdefault(table, number)
            continue
        head, sep, _ = stripped.partition("=")
        if sep and head and set(head) <= _BARE_KEY:
            key = _toml_key(head)
            lines.setdefault(f"{table}.{key}" if table else key, number)
    return lines


def _toml_key(text: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in text.split("."))


# --- torchtitan Python configs (0.3+) ------------------------------------------------------------


def _installed_titan_module(module: str) -> str | None:
    """`llama3` -> the installed torchtitan's models/llama3/config_registry.py (found through the
    package metadata: importing torchtitan would import torch)."""
    if not module.replace(".", "_").isidentifier():
        return None
    from importlib import metadata

    try:
        dist = metadata.distribution("torchtitan")
    except Exception:
        return None
    relative = module.replace(".", "/")
    for candidate in (f"torchtitan/models/{relative}/config_registry.py", f"torchtitan/experiments/{relative}/config_registry.py",
                      f"{relative}/config_registry.py", f"{relative}.py"):
        path = str(dist.locate_file(candidate))
        if os.path.isfile(path):
            return path
    return None


def _read_titan_python(text: str, path: str, name: str, function: str | None) -> TrainingConfig:
    reader = _TitanReader()
    functions = reader.module(path, text, name)
    configs = [n for n, f in functions.items() if _returns_trainer_config(f)]
    if function is None:
        if len(configs) != 1:
            listed = ", ".join(configs[:12]) + (" ..." if len(configs) > 12 else "")
            raise ConfigError(f"{name}: name the config function, e.g. --config {name}:{configs[0] if configs else 'my_config'}"
                              + (f" (it defines {listed})" if configs else " (no function returning Trainer.Config found)"))
        function = configs[0]
    if function not in functions:
        raise ConfigError(f"{name}: no function {function!r}; it defines {', '.join(configs[:12]) or 'none returning Trainer.Config'}")
    settings: dict[str, Setting] = {}
    try:
        reader.function(path, function, settings, depth=0)
    except RecursionError:
        raise ConfigError(f"{name}: the config function is nested too deeply to read") from None
    config = TrainingConfig(path, "torchtitan-python", "torchtitan", settings)
    config.function = function
    return config


def _returns_trainer_config(fn: ast.FunctionDef) -> bool:
    returns = ast.unparse(fn.returns) if fn.returns is not None else ""
    return returns.endswith("Config") and ("Trainer" in returns or returns == "Config")


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_call_name(node.value)}.{node.attr}"
    return ""


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


class _TitanReader:
    """Reads torchtitan config functions statically. A function may start from another
    (`config = llama3_70b()`), in the same file or imported from an installed torchtitan module
    (`from torchtitan.models.llama3.config_registry import llama3_70b`), then change fields
    (`config.comm.train_timeout_seconds = 300`) or return a `Trainer.Config(...)` tree."""

    MAX_MODULES = 16

    def __init__(self) -> None:
        self.functions: dict[str, dict[str, ast.FunctionDef]] = {}
        self.imports: dict[str, dict[str, str]] = {}

    def module(self, path: str, text: str, name: str) -> dict[str, ast.FunctionDef]:
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as exc:
            raise ConfigError(f"{name}:{exc.lineno or 0}: not valid Python ({exc.msg})") from None
        except (ValueError, RecursionError, MemoryError) as exc:
            raise ConfigError(f"{name}: not Python a config can be read from ({shown(str(exc), 120)})") from None
        self.functions[path] = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        self.imports[path] = {alias.asname or alias.name: node.module for node in tree.body
                              if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
        return self.functions[path]

    def origin(self, path: str) -> str | None:
        """None for the user's file (the config itself), the path of a base config's file otherwise."""
        return None if path == next(iter(self.functions)) else path

    def _imported(self, path: str, fname: str) -> str | None:
        """The installed file an imported config function lives in (torchtitan's own registries)."""
        module = self.imports.get(path, {}).get(fname)
        if not module or len(self.functions) >= self.MAX_MODULES:
            return None
        located = _installed_module_file(module)
        if located is None:
            return None
        if located not in self.functions:
            try:
                text = read_text_file(located, "config", MAX_CONFIG_BYTES)
                self.module(located, text, shown(located, 120))
            except InputError:
                return None
        return located if fname in self.functions[located] else None

    def function(self, path: str, fname: str, out: dict[str, Setting], depth: int) -> None:
        if depth > 8:
            return
        fn = self.functions[path][fname]
        local: dict[str, ast.AST] = {}
        for stmt in fn.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
                if isinstance(target, ast.Name):
                    base = _call_name(value) if isinstance(value, ast.Call) else ""
                    if base and "." not in base and not value.args and not value.keywords and base != fname:
                        where = path if base in self.functions[path] else self._imported(path, base)
                        if where is not None:
                            self.function(where, base, out, depth + 1)
                    local[target.id] = value
                elif isinstance(target, ast.Attribute):
                    dotted = ast.unparse(target)
                    if "." in dotted:
                        _titan_value(dotted.split(".", 1)[1], value, local, out, self.origin(path))
            elif isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
                _titan_kwargs("", stmt.value, local, out, self.origin(path))
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and _call_name(node).split(".")[-1] == "model_registry" and node.args:
                ok, flavor = _literal(node.args[0])
                if ok and isinstance(flavor, str):
                    out["model.flavor"] = Setting("model.flavor", flavor, node.lineno, self.origin(path))


def _installed_module_file(module: str) -> str | None:
    """An installed module's file, found through package metadata (no import)."""
    if not module.replace(".", "_").isidentifier() or not module.startswith("torchtitan."):
        return None
    from importlib import metadata

    try:
        dist = metadata.distribution("torchtitan")
    except Exception:
        return None
    relative = module.replace(".", "/")
    for candidate in (f"{relative}.py", f"{relative}/__init__.py"):
        path = str(dist.locate_file(candidate))
        if os.path.isfile(path):
            return path
    return None


def _titan_kwargs(prefix: str, call: ast.Call, local: dict[str, ast.AST], out: dict[str, Setting], src: str | None) -> None:
    for kw in call.keywords:
        if kw.arg is None:
            continue
        _titan_value(prefix + kw.arg, kw.value, local, out, src)


def _titan_value(key: str, node: ast.AST, local: dict[str, ast.AST], out: dict[str, Setting], src: str | None,
                 hops: int = 0) -> None:
    if isinstance(node, ast.Name) and node.id in local and hops < 4:
        _titan_value(key, local[node.id], local, out, src, hops + 1)
        return
    if isinstance(node, ast.Call):
        if _call_name(node).split(".")[-1] == "model_registry":
            return  # the flavor is read by the caller
        if _call_name(node).endswith("Config"):
            # a fresh sub-config replaces what a base config set below this key
            for stale in [k for k in out if k.startswith(key + ".")]:
                del out[stale]
            out[key] = Setting(key, {}, node.lineno, src)
            _titan_kwargs(key + ".", node, local, out, src)
        return
    ok, value = _literal(node)
    if ok:
        out[key] = Setting(key, value, getattr(node, "lineno", None), src)


# --- model size ----------------------------------------------------------------------------------

MODEL_NAME_KEYS = ("model_name_or_path", "model.name_or_path", "hf_assets_path", "model.hf_assets_path")


def _size_token(token: str) -> float | None:
    """`70b` -> 70, `0.5B` -> 0.5, `135M` -> 0.135, `8x7B` -> 56; anything else None."""
    text = token.lower()
    if len(text) < 2 or len(text) > 12 or text[-1] not in "bm":
        return None
    body, multiplier = text[:-1], 1
    if "x" in body:
        head, _, body = body.partition("x")
        if not head.isdigit():
            return None
        multiplier = int(head)
    if not body.replace(".", "", 1).isdigit() or body.startswith(".") or body.endswith("."):
        return None
    number = float(body) * multiplier
    return number / 1000 if text[-1] == "m" else number


def size_from_name(name: str) -> float | None:
    """Billions of parameters written in a model name: Llama-2-70b-hf -> 70, Qwen2.5-0.5B -> 0.5,
    SmolLM2-135M -> 0.135, Mixtral-8x7B -> 56 (all experts: what a checkpoint holds, roughly),
    Qwen3-30B-A3B -> 30 (the A3B is the active part)."""
    best: float | None = None
    text = name[-300:]
    for sep in "-_/:":
        text = text.replace(sep, " ")
    for token in text.split():
        billions = _size_token(token)
        if billions is not None and 0 < billions < 100_000 and (best is None or billions > best):
            best = billions
    return best


def size_from_model_config(data: dict) -> float | None:
    """Parameters of a decoder-only transformer from its config.json (llama-style fields):
    embeddings, attention (with grouped KV heads) and gated MLP (times the experts of an MoE)."""
    def num(*keys: str) -> int | None:
        for key in keys:
            value = data.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**9:
                return value
        return None

    hidden, layers, vocab = num("hidden_size", "d_model", "n_embd"), num("num_hidden_layers", "n_layer", "num_layers"), num("vocab_size")
    if not (hidden and layers and vocab):
        return None
    heads = num("num_attention_heads", "n_head") or max(1, hidden // 128)
    kv_heads = num("num_key_value_heads") or heads
    head_dim = num("head_dim") or hidden // heads
    inter = num("intermediate_size", "ffn_dim", "n_inner") or 4 * hidden
    experts = num("num_local_experts", "n_routed_experts", "num_experts") or 1
    expert_inter = num("moe_intermediate_size") or inter
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * (expert_inter * experts if experts > 1 else inter)
    tied = data.get("tie_word_embeddings") is True
    total = layers * (attention + mlp) + vocab * hidden * (1 if tied else 2)
    return round(total / 1e9, 2)


def model_size(config: TrainingConfig) -> ModelSize | None:
    """The model's size from the config: a local model folder's config.json, the model's name, or
    torchtitan's flavor ("70B")."""
    for key in ("model_name_or_path",):
        value = config.get(key)
        if isinstance(value, str):
            local = _local_model_config(value, config.path)
            if local is not None:
                return ModelSize(local[0], f"{config.evidence(key)} ({local[1]}: ~{local[0]:g} B parameters)", "model config")
    flavor = config.get("model.flavor")
    if isinstance(flavor, str):
        size = size_from_name(flavor)
        if size:
            return ModelSize(size, f"{config.evidence('model.flavor')} ({size:g} B parameters)", "flavor")
    candidates = [k for k in MODEL_NAME_KEYS if isinstance(config.get(k), str)]
    if config.format == "lightningcli-yaml":  # the model's own init_args name the checkpoint it loads
        candidates += [k for k, s in config.settings.items() if k.startswith("model.") and isinstance(s.value, str)]
    for key in candidates:
        size = size_from_name(config.get(key))
        if size:
            return ModelSize(size, f"{config.evidence(key)} ({size:g} B parameters, from the name)", "name")
    return None


def _local_model_config(value: str, config_path: str) -> tuple[float, str] | None:
    if "\x00" in value or len(value) > 4096:
        return None
    for base in ("", os.path.dirname(os.path.abspath(config_path))):
        folder = os.path.join(base, value) if base else value
        candidate = os.path.join(folder, "config.json")
        try:
            if not os.path.isfile(candidate) or os.path.getsize(candidate) > MAX_MODEL_CONFIG_BYTES:
                continue
            with open(candidate, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            nested = data.get("text_config")
            size = size_from_model_config(data) or (size_from_model_config(nested) if isinstance(nested, dict) else None)
            if size:
                return size, candidate
    return None
