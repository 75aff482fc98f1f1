"""The `advisor env` and `advisor preflight` commands: argument parsing and printing only.

Exit codes of preflight: 0 nothing found, 1 findings, 2 usage error, 3 input error (a config or
env snapshot that cannot be read). `advisor env` exits 0, or 3 when it cannot write -o FILE.
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INPUT = 0, 1, 2, 3

ENV_EXAMPLES = """\
examples:
  advisor env                       # what this machine tells about a distributed job
  advisor env -o env.$(hostname).json --mask-hosts
  srun --ntasks-per-node=1 advisor env -o env.%h.json    # every node at the same moment
  advisor env --deep --json         # also ask torch which NCCL and CUDA it was built with
"""

PREFLIGHT_EXAMPLES = """\
examples:
  advisor preflight                                   # check this machine
  advisor preflight --config train.yaml               # this machine and a LLaMA-Factory/TRL/Lightning config
  advisor preflight --env node0.json --env node1.json --config recipe.yaml --json
  advisor preflight --config llama3_registry.py:llama3_70b --answer storage=local-nvme
  advisor preflight --config titan.toml --no-local-env --answer model_size_b=70

exit codes:
  0 nothing found  1 findings  2 usage error  3 a config or env file cannot be read
"""


def add_parsers(sub) -> None:
    env = sub.add_parser(
        "env", help="collect this machine's environment (versions, variables, network, GPUs) for suggest and preflight",
        description="Collect what this machine can tell about a distributed job: Python, torch/CUDA/NCCL versions, "
                    "installed frameworks, distributed environment variables (secrets redacted), network interfaces, "
                    "/dev/shm, ulimits, containers, GPUs and InfiniBand. Local only, no network, no torch import "
                    "unless --deep.",
        epilog=ENV_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    env.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    env.add_argument("-o", "--output", metavar="FILE", help="write the JSON snapshot to FILE (for --env)")
    env.add_argument("--mask-hosts", action="store_true", help="mask the host name and IP addresses")
    env.add_argument("--deep", action="store_true", help="also import torch (in a child process) for the NCCL/CUDA it was built with")

    pre = sub.add_parser(
        "preflight", help="check the environment and a training config for known traps before launching",
        description="Check env snapshots (or this machine) and a training config for the traps that end distributed "
                    "jobs: network interfaces, /dev/shm, stray rank variables, deprecated or debugging variables, "
                    "timeouts too short for the model's save, preprocessing on the main rank, known framework bugs. "
                    "With several --env files, also compare the nodes.",
        epilog=PREFLIGHT_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    pre.add_argument("--env", action="append", default=[], metavar="FILE",
                     help="an env snapshot (`advisor env -o FILE`); repeat for each node (default: this machine)")
    pre.add_argument("--no-local-env", action="store_true", help="without --env, do not check this machine")
    pre.add_argument("--config", metavar="FILE", help="a training config: LLaMA-Factory/TRL/Open-R1 YAML, HF TrainingArguments "
                     "JSON, torchtitan TOML or Python (FILE.py:function), LightningCLI YAML, accelerate YAML")
    pre.add_argument("--framework", "-f", metavar="NAME", help="the config's framework, when the file does not say")
    pre.add_argument("--answer", "-a", action="append", default=[], metavar="ID=VALUE",
                     help="what the files cannot tell (repeatable): model_size_b, storage, nodes, saves_optimizer, ...")
    pre.add_argument("--json", action="store_true", help='print {"findings": [...]}')
    pre.add_argument("--verbose", "-v", action="store_true", help="show each fix's steps as well as its snippets")
    pre.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    pre.add_argument("--kb", action="append", default=[], metavar="DIR")


def run(args, out: TextIO, err: TextIO) -> int:
    if args.command == "env":
        return _env(args, out, err)
    return _preflight(args, out, err)


def _style(choice: str, out: TextIO):
    from advisor.cli import _use_color
    from advisor.render import Style

    return Style(color=_use_color(choice, out))


def _env(args, out: TextIO, err: TextIO) -> int:
    from advisor.environment import collect

    data = collect(deep=args.deep, mask_hosts=args.mask_hosts)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            err.write(f"advisor: cannot write {args.output}: {exc.strerror or exc}\n")
            return EXIT_INPUT
        err.write(f"advisor: wrote {args.output}; use it with `advisor preflight --env {args.output}` "
                  f"or `advisor suggest --env {args.output}`\n")
    if args.json:
        out.write(text)
    elif not args.output:
        from advisor.envfile import snapshot_from_data
        from advisor.render_checks import format_env

        out.write(format_env(snapshot_from_data(data, "this machine"), _style("auto", out)))
    return EXIT_OK


def load_snapshots(paths: list[str]):
    from advisor.envfile import load_snapshot

    return [load_snapshot(p) for p in paths]


def _preflight(args, out: TextIO, err: TextIO) -> int:
    from advisor.answers import AnswerError, parse_answer
    from advisor.configs import ConfigUsage, read_config
    from advisor.envfile import snapshot_from_data
    from advisor.inputs import InputError
    from advisor.knowledge import load_kb
    from advisor.preflight import exit_status, run_preflight
    from advisor.render_checks import format_preflight

    kb = load_kb(args.kb)
    answers = {}
    for item in args.answer:
        key, sep, value = item.partition("=")
        question = kb.questions.get(key.strip())
        if not sep or question is None:
            err.write(f"advisor: --answer expects ID=VALUE with a known id ({', '.join(sorted(kb.questions))}), got {item!r}\n")
            return EXIT_USAGE
        try:
            parsed = parse_answer(kb, question, value)
        except AnswerError as exc:
            err.write(f"advisor: {exc}\n")
            return EXIT_USAGE
        if parsed is not None:
            answers[question.fact] = parsed
    framework = None
    if args.framework:
        framework = kb.framework_id(args.framework)
        if framework is None:
            err.write(f"advisor: unknown framework {args.framework!r}; known: {', '.join(sorted(kb.frameworks))}\n")
            return EXIT_USAGE
    try:
        nodes = load_snapshots(args.env)
        config = read_config(args.config, framework) if args.config else None
    except ConfigUsage as exc:
        err.write(f"advisor: {exc}\n")
        return EXIT_USAGE
    except InputError as exc:
        err.write(f"advisor: {exc}\n")
        return EXIT_INPUT
    if not nodes and not args.no_local_env:
        from advisor.environment import collect

        nodes = [snapshot_from_data(collect(), "this machine")]
    if framework and config is None:
        answers.setdefault("framework", framework)
    try:
        report, notes = run_preflight(kb, nodes, config, answers)
    except InputError as exc:  # a config value of the wrong type, found while checking
        err.write(f"advisor: {exc}\n")
        return EXIT_INPUT
    if args.json:
        json.dump(report.model_dump(mode="json"), out, indent=2, ensure_ascii=False)
        out.write("\n")
        for note in notes:
            err.write(f"advisor: note: {note}\n")
    else:
        out.write(format_preflight(report, _checked(nodes, config, args.env), notes, _style(args.color, out), args.verbose))
    return exit_status(report)


def _checked(nodes, config, env_files: list[str]) -> str:
    parts = []
    if nodes:
        names = [n.name for n in nodes]
        parts.append(("this machine" if not env_files else "") + (f" ({names[0]})" if not env_files else ", ".join(names)))
    if config is not None:
        function = f":{config.function}" if config.function else ""
        parts.append(f"{config.name}{function} ({config.framework}, {config.format})")
    return " and ".join(p.strip() for p in parts) or "nothing (give --env or --config)"

