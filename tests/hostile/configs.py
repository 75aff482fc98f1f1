"""Hostile training configs and env snapshots for `advisor preflight` (and `suggest --env`).

Each case says what it attacks and what must happen: an input error (exit 3) whose one-line
message says what is wrong, or, for odd but valid files, a normal run (exit 0 or 1). Never a
traceback, never a hang, never code from the file executed. Generated at test time, like the log
corpus (corpus.py); the listing in CONFIGS.md is generated from this registry:

    python tests/hostile/configs.py --write
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

INPUT_ERROR = frozenset({3})
RUNS = frozenset({0, 1})
MiB = 1 << 20
LF_70B = "model_name_or_path: meta-llama/Llama-2-70b-hf\nstage: sft\nfinetuning_type: full\noutput_dir: /mnt/nfs/out\n"


@dataclass(frozen=True)
class ConfigCase:
    id: str
    attacks: str
    make: Callable[[Path], str]
    """writes the file under the folder; returns the argument to give."""
    exit: frozenset[int]
    says: tuple[str, ...] = ()
    env: bool = False
    """given as --env (a snapshot) instead of --config."""

    @property
    def expectation(self) -> str:
        codes = "/".join(str(c) for c in sorted(self.exit))
        return f"exit {codes}" + (f"; message says {', '.join(repr(s) for s in self.says)}" if self.says else "")


def write(name: str, content: str | bytes) -> Callable[[Path], str]:
    def make(folder: Path) -> str:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return str(path)
    return make


def _random(seed: str, n: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _fifo(folder: Path) -> str:
    path = folder / "train.yaml"
    os.mkfifo(path)
    return str(path)


def _symlink_loop(folder: Path) -> str:
    a, b = folder / "a.yaml", folder / "b.yaml"
    a.symlink_to(b)
    b.symlink_to(a)
    return str(a)


def _directory(folder: Path) -> str:
    (folder / "configs.yaml").mkdir()
    return str(folder / "configs.yaml")


def _side_effects(folder: Path) -> str:
    marker = folder / "PWNED"
    text = (f"import os\nos.system('touch {marker}')\n"
            "def llama3_70b_pwn() -> Trainer.Config:\n"
            f"    open('{marker}', 'w').write('x')\n"
            "    return Trainer.Config(model_spec=model_registry('70B'), checkpoint=CheckpointManager.Config(enable=True),\n"
            f"                          dump_folder=__import__('os').system('touch {marker}'))\n")
    return write("registry.py", text)(folder)


def _bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    return "stage: sft\n" + "\n".join(lines) + "\n"


CASES: list[ConfigCase] = [
    ConfigCase("huge-yaml", "a 2 MiB YAML file (a log or dump saved as .yaml)", write("train.yaml", "# pad\n" * (2 * MiB // 6)),
               INPUT_ERROR, ("too big",)),
    ConfigCase("png-as-yaml", "an image named .yaml", write("train.yaml", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + _random("png", 4096)),
               INPUT_ERROR, ("binary",)),
    ConfigCase("random-bytes", "random bytes without NULs named .json",
               write("args.json", bytes(b or 1 for b in _random("rnd", 65536))), INPUT_ERROR, ("not UTF-8",)),
    ConfigCase("utf16-yaml", "a UTF-16 config (saved by a Windows editor)", write("train.yaml", "\ufeffstage: sft\n".encode("utf-16")),
               INPUT_ERROR, ("UTF-16", "iconv")),
    ConfigCase("empty", "an empty file", write("train.yaml", ""), INPUT_ERROR, ("empty",)),
    ConfigCase("whitespace", "only blank lines and comments' whitespace", write("train.yaml", "\n  \n\t\n"), INPUT_ERROR, ("empty",)),
    ConfigCase("comments-only", "a YAML file with only comments", write("train.yaml", "# nothing here\n"), INPUT_ERROR, ("empty",)),
    ConfigCase("yaml-bomb", "a billion-laughs alias bomb (10^9 values from 1 KB)", write("train.yaml", _bomb()), INPUT_ERROR,
               ("YAML bomb",)),
    ConfigCase("yaml-recursive-alias", "an alias inside its own anchor (a recursive structure)", write("train.yaml", "a: &a [*a]\n"),
               INPUT_ERROR, ("refers to itself",)),
    ConfigCase("yaml-deep-nesting", "100,000 nested flow sequences", write("train.yaml", "a: " + "[" * 100000 + "]" * 100000 + "\n"),
               INPUT_ERROR, ("nested too deeply",)),
    ConfigCase("yaml-syntax", "broken indentation", write("train.yaml", "stage: sft\n  ddp_timeout: 1\n bad: [\n"), INPUT_ERROR,
               ("not valid YAML", "train.yaml:")),
    ConfigCase("yaml-list", "a YAML list instead of a mapping", write("train.yaml", "- stage: sft\n- ddp_timeout: 1\n"), INPUT_ERROR,
               ("expected a mapping",)),
    ConfigCase("yaml-python-tag", "a !!python/object/apply tag that would run a command under an unsafe loader",
               write("train.yaml", "stage: sft\nx: !!python/object/apply:os.system ['touch PWNED']\n"), INPUT_ERROR, ("cannot build",)),
    ConfigCase("yaml-huge-int", "a 5000-digit ddp_timeout", write("train.yaml", LF_70B + "ddp_timeout: " + "9" * 5000 + "\n"),
               INPUT_ERROR, ("cannot build",)),
    ConfigCase("yaml-wrong-type", "ddp_timeout as a list", write("train.yaml", LF_70B + "ddp_timeout: [1, 2]\n"), INPUT_ERROR,
               ("train.yaml:5: ddp_timeout must be a non-negative number",)),
    ConfigCase("yaml-infinite", "ddp_timeout: .inf", write("train.yaml", LF_70B + "ddp_timeout: .inf\n"), INPUT_ERROR,
               ("ddp_timeout must be a non-negative number",)),
    ConfigCase("yaml-env-not-mapping", "a TRL recipe whose env: is a string", write("recipe.yaml", "packing: false\nenv: NCCL_DEBUG=INFO\n"),
               INPUT_ERROR, ("env must be a mapping",)),
    ConfigCase("yaml-merge-keys", "YAML anchors and merge keys (valid: read as the framework's loader reads them)",
               write("train.yaml", "base: &b {finetuning_type: full, stage: sft}\n<<: *b\nmodel_name_or_path: meta-llama/Llama-2-70b-hf\n"),
               RUNS),
    ConfigCase("lightning-timeout-number", "a LightningCLI timeout YAML turns into a number (1:00:00 unquoted)",
               write("cli.yaml", "trainer:\n  strategy:\n    class_path: lightning.pytorch.strategies.DDPStrategy\n"
                                 "    init_args:\n      timeout: 1:00:00\nmodel:\n  name: meta-llama/Llama-2-70b-hf\n"),
               INPUT_ERROR, ('quoted "h:mm:ss"',)),
    ConfigCase("json-deep-nesting", "100,000 nested JSON arrays", write("args.json", "[" * 100000 + "]" * 100000), INPUT_ERROR,
               ("nested too deeply",)),
    ConfigCase("json-nan", "NaN in JSON (Python's json accepts it)", write("args.json", '{"ddp_timeout": NaN}'), INPUT_ERROR,
               ("not valid JSON",)),
    ConfigCase("json-array", "a JSON array instead of an object", write("args.json", "[1, 2, 3]"), INPUT_ERROR, ("expected a JSON object",)),
    ConfigCase("json-syntax", "a truncated JSON file", write("args.json", '{"ddp_timeout": 1800,\n "output_dir": '), INPUT_ERROR,
               ("not valid JSON", "args.json:2")),
    ConfigCase("deepspeed-json", "a DeepSpeed config given instead of the training config",
               write("ds_z3.json", '{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}'),
               INPUT_ERROR, ("DeepSpeed config",)),
    ConfigCase("toml-syntax", "broken TOML", write("train.toml", "[comm\ntrain_timeout_seconds = \n"), INPUT_ERROR, ("not valid TOML",)),
    ConfigCase("toml-deep", "100,000 nested TOML arrays", write("train.toml", "a = " + "[" * 100000 + "]" * 100000 + "\n"),
               INPUT_ERROR, ("not valid TOML",)),
    ConfigCase("toml-wrong-type", "a string timeout in torchtitan TOML",
               write("train.toml", '[model]\nflavor = "70B"\n[checkpoint]\nenable = true\n[comm]\ntrain_timeout_seconds = "soon"\n'),
               INPUT_ERROR, ("train.toml:6: comm.train_timeout_seconds must be a number",)),
    ConfigCase("python-syntax", "a Python config that does not parse", write("registry.py", "def f(:\n"), INPUT_ERROR,
               ("not valid Python",)),
    ConfigCase("python-deep-nesting", "1,000 nested parentheses", write("registry.py", "x = " + "(" * 1000 + ")" * 1000 + "\n"),
               INPUT_ERROR, ("Python",)),
    ConfigCase("python-no-config-function", "a Python file without a Trainer.Config function", write("registry.py", "def f():\n    return 1\n"),
               INPUT_ERROR, ("name the config function",)),
    ConfigCase("python-side-effects", "a config module that runs commands when imported or called (the advisor never runs it)",
               _side_effects, RUNS),
    ConfigCase("unknown-extension", "a config with an extension no framework reads", write("train.txt", "stage: sft\n"), INPUT_ERROR,
               ("unknown config type",)),
    ConfigCase("directory", "a directory", _directory, INPUT_ERROR, ("is a directory",)),
    ConfigCase("fifo", "a named pipe (would block a naive reader)", _fifo, INPUT_ERROR, ("not a regular file",)),
    ConfigCase("dev-zero", "/dev/zero as the config", lambda folder: "/dev/zero", INPUT_ERROR, ("not a regular file",)),
    ConfigCase("symlink-loop", "two symbolic links pointing at each other", _symlink_loop, INPUT_ERROR, ("check the path",)),
    ConfigCase("missing", "a path that does not exist", lambda folder: str(folder / "nope.yaml"), INPUT_ERROR, ("no such file",)),
    ConfigCase("control-chars-in-name", "a file name with a terminal escape and a newline",
               lambda folder: str(folder / "bad\x1b[31m\nname.yaml"), INPUT_ERROR, ("no such file", "\\x1b")),
    # env snapshots
    ConfigCase("env-huge", "a 5 MiB env snapshot", write("node.json", '{"notes": ["' + "x" * (5 * MiB) + '"]}'), INPUT_ERROR,
               ("too big",), env=True),
    ConfigCase("env-too-many-interfaces", "an env snapshot with 100,000 interfaces",
               write("node.json", '{"interfaces": [' + ",".join(['{"name": "eth0"}'] * 100000) + "]}"), INPUT_ERROR,
               ("field interfaces",), env=True),
    ConfigCase("env-wrong-types", "an env snapshot whose MTU is text", write("node.json", '{"interfaces": [{"name": "eth0", "mtu": "big"}]}'),
               INPUT_ERROR, ("field interfaces.0.mtu",), env=True),
    ConfigCase("env-not-a-snapshot", "a JSON file that is something else", write("node.json", '{"kind": "k8s-pod"}'), INPUT_ERROR,
               ("not an env snapshot",), env=True),
    ConfigCase("env-escapes", "terminal escapes in a snapshot's host and variables (echoed back escaped)",
               write("node.json", '{"host": "\\u001b]0;pwned\\u0007n0", "env": {"NCCL_P2P_DISABLE": "1\\u001b[2J"}}'), RUNS, env=True),
]

BY_ID = {case.id: case for case in CASES}
assert len(BY_ID) == len(CASES), "duplicate case ids"

LISTING = Path(__file__).with_name("CONFIGS.md")
HEADER = """# Hostile configs and env snapshots

What `advisor preflight --config FILE` and `--env FILE` (and `advisor suggest --env FILE`) are
tested against, by tests/test_hostile_configs.py: each case through the CLI in-process under a
hang guard, a sample through the console script in a subprocess. Never a traceback, never a hang,
nothing from a file executed; an input error is one line saying what is wrong (exit 3).

<!-- generated from configs.py: python tests/hostile/configs.py --write -->

"""


def listing() -> str:
    rows = ["| case | attacks | expected |", "| --- | --- | --- |"]
    for case in CASES:
        kind = " (--env)" if case.env else ""
        rows.append(f"| `{case.id}`{kind} | {case.attacks.replace('|', '/')} | {case.expectation.replace('|', '/')} |")
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        LISTING.write_text(listing(), encoding="utf-8")
    else:
        sys.stdout.write(listing())
