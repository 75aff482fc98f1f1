"""Mine the frameworks' part of the message catalogue from their released Python sources.

    python tools/mine/frameworks.py fetch [PACKAGE[==VERSION] ...]   # download + unpack (fw_releases.py)
    python tools/mine/frameworks.py candidates COMPONENT [--all]     # distributed-relevant messages no entry claims
    python tools/mine/frameworks.py draft COMPONENT                  # the same, as YAML entries to edit by hand
    python tools/mine/frameworks.py mine [COMPONENT ...]             # update kb/messages/<component>.yaml
    python tools/mine/frameworks.py drift COMPONENT                  # older wordings no pattern reaches

Every message of a component's files (raise / logger.<level> / warnings.warn / print / rank_zero_*
and the frameworks' own logging helpers) is read from each cached release with tools/mine/pysource.py
plus the framework helpers below. A catalogue entry is identified by its hand-written `pattern`: in
each release, the messages of the component's files that the pattern matches (rendered with `7` for
each placeholder, as advisor.catalogue does) are its wordings. The newest wording becomes `text`,
older ones `wording`, each with the releases that hold it; `source` and `level` follow the newest
release. Hand-written fields (pattern, meaning, role, points_to, captures, event, examples, ...) are
kept. `drift` lists, per entry, messages of older releases in the same file and function that look
like the entry's text but that its pattern misses: a wording change the pattern must be widened for.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import catalogue_io  # noqa: E402
import fw_releases  # noqa: E402
import pysource  # noqa: E402

# component -> (software, PyPI package, title, files inside the release the messages come from)
COMPONENTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "deepspeed-comm": (
        "deepspeed", "deepspeed", "DeepSpeed: deepspeed.comm (init_distributed, backends, MPI/env discovery)",
        ("deepspeed/comm/*.py", "deepspeed/utils/distributed.py", "deepspeed/__init__.py", "deepspeed/accelerator/*.py"),
    ),
    "deepspeed-launcher": (
        "deepspeed", "deepspeed", "DeepSpeed: the deepspeed launcher (runner, launch, multinode runners, hostfile)",
        ("deepspeed/launcher/*.py", "deepspeed/elasticity/*.py"),
    ),
    "deepspeed-engine": (
        "deepspeed", "deepspeed", "DeepSpeed: the engine (initialize, checkpoint save/load, pipeline engine, checkpoint engines)",
        ("deepspeed/runtime/engine.py", "deepspeed/runtime/checkpoint_engine/*.py", "deepspeed/runtime/pipe/engine.py",
         "deepspeed/runtime/pipe/module.py", "deepspeed/checkpoint/*.py", "deepspeed/runtime/utils.py",
         "deepspeed/runtime/state_dict_factory.py", "deepspeed/utils/zero_to_fp32.py"),
    ),
    "deepspeed-zero": (
        "deepspeed", "deepspeed", "DeepSpeed: ZeRO stages 1-3 (partitioning, offload, gathering parameters)",
        ("deepspeed/runtime/zero/*.py", "deepspeed/runtime/swap_tensor/*.py", "deepspeed/runtime/bf16_optimizer.py"),
    ),
    "accelerate": (
        "accelerate", "accelerate",
        "accelerate: process-group state, the Accelerator, data loaders, checkpointing, operation checks (debug mode)",
        ("accelerate/state.py", "accelerate/accelerator.py", "accelerate/data_loader.py", "accelerate/checkpointing.py",
         "accelerate/utils/operations.py", "accelerate/utils/other.py", "accelerate/utils/fsdp_utils.py",
         "accelerate/utils/deepspeed.py", "accelerate/utils/imports.py", "accelerate/utils/memory.py",
         "accelerate/utils/random.py"),
    ),
    "accelerate-launch": (
        "accelerate", "accelerate", "accelerate launch: arguments, environment, multi-node and launcher errors",
        ("accelerate/commands/launch.py", "accelerate/utils/launch.py", "accelerate/utils/environment.py",
         "accelerate/launchers.py", "accelerate/commands/config/config_args.py"),
    ),
    "transformers-trainer": (
        "transformers", "transformers",
        "transformers: Trainer and TrainingArguments distributed paths, DeepSpeed/FSDP integration",
        ("transformers/trainer.py", "transformers/training_args.py", "transformers/trainer_pt_utils.py",
         "transformers/trainer_utils.py", "transformers/trainer_callback.py", "transformers/integrations/deepspeed.py",
         "transformers/integrations/fsdp.py", "transformers/integrations/tpu.py", "transformers/distributed/*.py"),
    ),
    "lightning": (
        "lightning", "lightning",
        "Lightning (lightning.pytorch): strategies, trainer connectors, checkpointing, rank-zero helpers",
        ("lightning/pytorch/strategies/**/*.py", "lightning/pytorch/trainer/connectors/*.py",
         "lightning/pytorch/trainer/trainer.py", "lightning/pytorch/trainer/call.py", "lightning/pytorch/overrides/*.py",
         "lightning/pytorch/callbacks/model_checkpoint.py", "lightning/pytorch/utilities/*.py",
         "lightning/pytorch/loops/*.py", "lightning/pytorch/loops/**/*.py", "lightning/pytorch/core/module.py",
         "lightning/pytorch/trainer/setup.py", "lightning/pytorch/accelerators/*.py",
         "lightning/pytorch/trainer/connectors/logger_connector/*.py"),
    ),
    "lightning-fabric": (
        "lightning", "lightning",
        "Lightning Fabric (lightning.fabric): strategies, launchers, cluster environments, distributed utilities",
        ("lightning/fabric/strategies/**/*.py", "lightning/fabric/plugins/environments/*.py",
         "lightning/fabric/utilities/*.py", "lightning/fabric/connector.py", "lightning/fabric/fabric.py",
         "lightning/fabric/cli.py", "lightning/fabric/accelerators/*.py"),
    ),
    "trl": (
        "trl", "trl", "TRL: vLLM client and server (weight sync), GRPO/online trainers, SFT, distributed utilities",
        ("trl/extras/vllm_client.py", "trl/generation/*.py", "trl/scripts/vllm_serve.py", "trl/cli.py",
         "trl/trainer/grpo_trainer.py", "trl/trainer/sft_trainer.py", "trl/trainer/utils.py",
         "trl/trainer/online_dpo_trainer.py", "trl/trainer/rloo_trainer.py", "trl/trainer/dpo_trainer.py",
         "trl/models/utils.py", "trl/import_utils.py", "trl/trainer/grpo_config.py", "trl/extras/*.py",
         "trl/experimental/**/*.py"),
    ),
    "vllm-distributed": (
        "vllm", "vllm",
        "vLLM: distributed (pynccl and its library wrapper, parallel_state, StatelessProcessGroup, communicators)",
        ("vllm/distributed/*.py", "vllm/distributed/device_communicators/*.py"),
    ),
    "vllm-engine": (
        "vllm", "vllm",
        "vLLM: the engine core and its executors (multiprocess and Ray workers, RPC to workers, engine death)",
        ("vllm/v1/executor/*.py", "vllm/v1/engine/core.py", "vllm/v1/engine/core_client.py", "vllm/v1/engine/exceptions.py",
         "vllm/v1/engine/utils.py", "vllm/v1/engine/async_llm.py", "vllm/v1/engine/llm_engine.py",
         "vllm/executor/*.py", "vllm/engine/multiprocessing/*.py", "vllm/utils/jit_monitor.py"),
    ),
    "sglang": (
        "sglang", "sglang",
        "SGLang: the engine's processes (scheduler, TP workers, tokenizer and detokenizer managers) and their deaths",
        ("sglang/srt/managers/scheduler.py", "sglang/srt/managers/tp_worker*.py", "sglang/srt/managers/tokenizer_manager.py",
         "sglang/srt/managers/detokenizer_manager.py", "sglang/srt/managers/data_parallel_controller.py",
         "sglang/srt/entrypoints/engine.py", "sglang/srt/server.py"),
    ),
    "torchtitan": (
        "torchtitan", "torchtitan",
        "torchtitan: distributed setup, parallel dims, checkpointing, the train loop and its tools",
        ("torchtitan/distributed/*.py", "torchtitan/parallelisms/*.py", "torchtitan/components/*.py",
         "torchtitan/components/checkpoint/*.py", "torchtitan/components/checkpointer/*.py",
         "torchtitan/train.py", "torchtitan/trainer.py", "torchtitan/utils.py", "torchtitan/checkpoint.py",
         "torchtitan/tools/*.py", "torchtitan/config/*.py", "torchtitan/config_manager.py", "torchtitan/parallel_dims.py"),
    ),
    "llama-factory": (
        "llama-factory", "llamafactory",
        "LLaMA-Factory: the launcher (llamafactory-cli train under torchrun), data loading, argument checks",
        ("llamafactory/launcher.py", "llamafactory/cli.py", "llamafactory/data/loader.py", "llamafactory/data/*.py",
         "llamafactory/hparams/parser.py", "llamafactory/extras/misc.py", "llamafactory/train/tuner.py",
         "llamafactory/train/callbacks.py", "llamafactory/train/trainer_utils.py", "llamafactory/model/loader.py"),
    ),
}

# calls the frameworks print with that pysource does not know: function name -> level
HELPERS = {
    "rank_zero_warn": "warn", "rank_zero_info": "info", "rank_zero_debug": "info", "rank_zero_deprecation": "warn",
    "log_dist": "info", "logger_warning_once": "warn", "warning_once": "warn", "warning_advice": "warn",
    "info_once": "info", "print_rank_0": "info", "_print_rank_0": "info", "print_rank0": "info",
    "print_json_dist": "info", "log_rank_0": "info", "warn_once": "warn", "print_once": "info",
    "logger_info_once": "info", "info_rank0": "info", "warning_rank0": "warn", "warning_rank0_once": "warn",
    "warning_once_rank0": "warn",
}
WRAPPERS = {"rank_prefixed_message"}
KEYWORD_MESSAGES = {"_augment_message": "new_message"}
LOGGERS = re.compile(r"(?:^|\.)(?:_?log(?:ger)?|_?LOG(?:GER)?|logging|log|_logger|\w+_logger|self\.logger|dist_logger)$")

RELEVANT = re.compile(
    r"rank|process.?group|distributed|\bnccl|\bgloo|\bhccl|\bmpi\b|world|barrier|time.?out|timed out|launch|node|master"
    r"|\bport\b|address|hostfile|\bssh|pdsh|slurm|\bdevice|\bgpu|cuda|checkpoint|\bsave|\bload|shard|\bzero|gather"
    r"|broadcast|reduce|collective|signal|kill|exit|return code|\boom\b|out of memory|memory|server|vllm|connect"
    r"|socket|environment variable|local_rank|deepspeed|fsdp|\bddp\b|torchrun|worker|dataloader|hang|deadlock"
    r"|mismatch|version|unused param|sigterm|sigkill|\bsync|communicat|\bstore\b|backend|spawn|fork|process",
    re.I,
)


class _Helpers(ast.NodeVisitor):
    """rank_zero_warn / log_dist / logger.warning_once / self.log.info ...: the frameworks' own printing helpers."""

    def __init__(self, rel: str, assigned_of):
        self.rel = rel
        self.out: list[pysource.Candidate] = []
        self.assigned_of = assigned_of

    def scan(self, tree: ast.Module) -> list[pysource.Candidate]:
        parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        scopes = [(tree, "<module>", {})] + [
            (n, n.name, pysource._assignments(n)) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        for scope, name, assigned in scopes:
            texts = pysource._Texts(assigned, parents)
            for node in pysource._own_nodes(scope):
                if isinstance(node, ast.Return) and name == "__repr__" and node.value is not None:
                    texts.at = node  # a state's printed summary (accelerate's `Distributed environment: ...`)
                    for text in texts.of(node.value):
                        if pysource._wordy(text):
                            self.out.append(pysource.Candidate(self.rel, node.lineno, "repr", "info", text.strip("\n"), name))
                    continue
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in KEYWORD_MESSAGES:
                    texts.at = node  # a message that replaces an exception's text (Lightning's _augment_message)
                    for kw in node.keywords:
                        if kw.arg == KEYWORD_MESSAGES[node.func.id]:
                            for text in texts.of(kw.value):
                                self.out.append(pysource.Candidate(self.rel, node.lineno, "augment", "error", text, name))
                    continue
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                arg = node.args[0]
                wrapped = isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in WRAPPERS and bool(arg.args)
                level = self._level(node.func, wrapped)
                if wrapped:
                    arg = arg.args[0]  # log.info(rank_prefixed_message("Received SIGTERM: ...", rank))
                if level is None:
                    continue
                texts.at = node
                for text in texts.of(arg):
                    text = text.strip("\n")
                    if pysource._wordy(text):
                        self.out.append(pysource.Candidate(self.rel, node.lineno, "helper", level, text, name))
        return self.out

    @staticmethod
    def _level(func: ast.AST, wrapped: bool = False) -> str | None:
        if isinstance(func, ast.Name) and func.id in HELPERS:
            return HELPERS[func.id]
        if isinstance(func, ast.Attribute):
            if func.attr in HELPERS:
                return HELPERS[func.attr]
            try:
                receiver = ast.unparse(func.value)
            except Exception:  # pragma: no cover
                return None
            if func.attr in pysource.LOG_LEVELS and LOGGERS.search(receiver) and not pysource.LOGGER_NAMES.match(receiver):
                return pysource.LOG_LEVELS[func.attr]
            if func.attr in ("warn", "info", "deprecation") and receiver.endswith(("warning_cache", "WarningCache()")):
                return "info" if func.attr == "info" else "warn"  # Lightning's WarningCache (warns once per text)
            if func.attr in pysource.LOG_LEVELS and wrapped and (LOGGERS.search(receiver) or pysource.LOGGER_NAMES.match(receiver)):
                return pysource.LOG_LEVELS[func.attr]  # pysource cannot read a wrapped first argument
            if func.attr == "debug" and (LOGGERS.search(receiver) or pysource.LOGGER_NAMES.match(receiver)):
                return "info"  # debug lines: printed when the user turns logging up (main_process_first's waits)
        return None


def file_messages(path: Path, rel: str) -> list[pysource.Candidate]:
    """pysource's messages of one file plus the framework helpers' (deduplicated by line and text)."""
    found = pysource.messages(path, rel)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return found
    seen = {(c.line, c.text) for c in found}
    for c in _Helpers(rel, None).scan(tree):
        if (c.line, c.text) not in seen:
            seen.add((c.line, c.text))
            found.append(c)
    found.sort(key=lambda c: c.line)
    return found


def release_messages(component: str, version: str, cache: Path) -> list[pysource.Candidate]:
    package = COMPONENTS[component][1]
    root = cache / package / version / "src"
    files: set[Path] = set()
    for pattern in COMPONENTS[component][3]:
        files.update(p for p in root.glob(pattern) if p.suffix == ".py")
    out: list[pysource.Candidate] = []
    for path in sorted(files):
        out.extend(file_messages(path, path.relative_to(root).as_posix()))
    return out


def _regex(pattern: str, case_sensitive: bool):
    from advisor.regex import compile_pattern

    return compile_pattern(pattern, not case_sensitive)


def _render(text: str) -> str:
    from advisor.catalogue import render

    return render(text)


def _claimers(doc: dict | None) -> list:
    return [(_regex(e["pattern"], bool(e.get("case_sensitive"))), e) for e in (doc or {}).get("messages", []) if e.get("pattern")]


def candidates(cache: Path, component: str, version: str | None, show_all: bool) -> list[pysource.Candidate]:
    package = COMPONENTS[component][1]
    versions = fw_releases.mined_versions(package, cache)
    version = version or versions[-1]
    regexes = _claimers(catalogue_io.load(component))
    out = []
    seen: set[str] = set()
    for c in release_messages(component, version, cache):
        if c.text in seen:
            continue
        seen.add(c.text)
        r = _render(c.text)
        claimed = any(rx.search(r) for rx, _ in regexes)
        if claimed and not show_all:
            continue
        if not show_all and not RELEVANT.search(c.text):
            continue
        out.append(c)
        flat = c.text.replace("\n", "\\n")
        print(f"{'*' if claimed else ' '} {c.file}:{c.line} [{c.kind}/{c.level}] {c.function}: {flat[:400]}")
    return out


_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\])")
_PIECES = re.compile(r"\{[^{}]*\}|%\(\w+\)[sdrf]|%[-+ #0]*\d*(?:\.\d+)?[sdrfixg]")


def auto_pattern(text: str) -> str:
    """A literal-led pattern from the longest placeholder-free stretch of a message (at most ~90 chars)."""
    pieces = [p.strip() for p in _PIECES.split(text.split("\n")[0] if len(text.split("\n")[0]) > 20 else text)]
    best = max(pieces, key=len) if pieces else text
    best = re.sub(r"\s+", " ", best)
    if len(best) > 90:
        cut = best[:90].rsplit(" ", 1)[0]
        best = cut or best[:90]
    return _SPECIAL.sub(r"\\\1", best)


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", _PIECES.sub(" ", text).lower())
    stop = {"the", "a", "an", "to", "of", "is", "in", "and", "or", "be", "for", "not", "are", "with", "you", "your", "please", "this", "that", "on"}
    keep = [w for w in words if w not in stop][:5]
    return "-".join(keep) or "message"


def draft(cache: Path, component: str) -> None:
    """Unclaimed relevant messages of the newest release as YAML entries to finish by hand."""
    import yaml

    entries = []
    used: set[str] = set()
    for c in candidates(cache, component, None, False):
        slug = _slug(c.text)
        while slug in used:
            slug += "-x"
        used.add(slug)
        entries.append({
            "id": f"{component}.{slug}", "level": c.level, "text": c.text, "source": f"{c.file}:{c.line} {c.function}",
            "pattern": auto_pattern(c.text), "meaning": "TODO", "role": "context",
        })
    print(yaml.dump(entries, sort_keys=False, allow_unicode=True, width=110), file=sys.stderr)


def _instance_of(sample: str, text: str) -> bool:
    """Whether a printed `sample` is an instance of the format `text` (each placeholder any run of text):
    how an entry whose pattern needs real values (a return code of -9) finds its message."""
    parts = _PIECES.split(text)
    if len(parts) < 2:
        return False
    source = ".*".join(re.escape(p) for p in parts)
    return re.search(source, sample, re.S) is not None


def mine(cache: Path, components: list[str]) -> int:
    problems = 0
    for component in components:
        software, package, title, globs = COMPONENTS[component]
        versions = fw_releases.mined_versions(package, cache)
        if not versions:
            raise SystemExit(f"no {package} releases in {cache}: run `fetch` first")
        doc = catalogue_io.load(component)
        if doc is None:
            print(f"{component}: no kb/messages/{component}.yaml yet (write entries with id, pattern and the hand fields first)")
            continue
        rendered = {v: [(c, _render(c.text)) for c in release_messages(component, v, cache)] for v in versions}
        entries = []
        for entry in doc["messages"]:
            regex = _regex(entry["pattern"], bool(entry.get("case_sensitive")))
            texts: dict[str, list[str]] = defaultdict(list)
            where: dict[str, pysource.Candidate] = {}
            sample = entry.get("sample")
            for v in versions:
                hits = {c.text: c for c, r in rendered[v] if regex.search(r) or sample and _instance_of(sample, c.text)}
                for text, cand in hits.items():
                    texts[text].append(v)
                    where.setdefault(text, cand)
                    if v == versions[-1] or fw_releases.version_key(v) > fw_releases.version_key(texts[text][0]):
                        where[text] = cand
            if not texts:
                print(f"  ! {entry['id']}: the pattern matches no message in {versions[0]}..{versions[-1]}")
                problems += 1
                entries.append(entry)
                continue
            newest = max(texts, key=lambda t: (fw_releases.version_key(texts[t][-1]), t == entry.get("text"), len(texts[t])))
            same_release = [t for t in texts if t != newest and texts[t][-1] == texts[newest][-1]]
            if same_release:
                print(f"  ? {entry['id']}: {len(same_release) + 1} messages match in {texts[newest][-1]}: "
                      + " | ".join(repr(t[:70]) for t in [newest, *same_release]))
            entry = dict(entry)
            cand = where[newest]
            entry["text"] = newest
            entry["source"] = cand.file
            entry["level"] = cand.level
            entry["versions"] = specifier(texts[newest], versions)
            entry["wording"] = [
                {"versions": specifier(vs, versions), "text": t}
                for t, vs in sorted(texts.items(), key=lambda kv: fw_releases.version_key(kv[1][0]))
                if t != newest and specifier(vs, versions)
            ]
            entries.append(entry)
        files = ", ".join(g for g in globs[:3]) + (" ..." if len(globs) > 3 else "")
        mined_from = [{
            "artifact": f"{package}=={v} {fw_releases.archive_name(package, v, cache)}: {files} (Python source, AST)",
            "url": fw_releases.pypi_url(package, v),
        } for v in versions]
        catalogue_io.save(component, software, doc.get("title") or title, mined_from, entries)
        print(f"{component}: {len(entries)} messages over {len(versions)} releases ({versions[0]}..{versions[-1]})")
    return problems


def specifier(present: list[str], mined: list[str]) -> str:
    """The PEP 440 range over the mined releases holding a wording: from the first release that holds
    it to the first later one that does not (exact releases, not minors as catalogue_io.specifier:
    framework patch releases change wordings too); '' when every mined release holds it."""
    have = [v in present for v in mined]
    if all(have):
        return ""
    first = have.index(True)
    last = len(have) - 1 - have[::-1].index(True)
    clauses = []
    if first > 0:
        clauses.append(f">={mined[first]}")
    if last < len(mined) - 1:
        clauses.append(f"<{mined[last + 1]}")
    for i in range(first, last + 1):
        if not have[i]:
            clauses.append(f"!={mined[i]}")
    return ",".join(clauses)


def drift(cache: Path, component: str) -> None:
    """Older wordings an entry's pattern misses: same file and function, similar text."""
    package = COMPONENTS[component][1]
    versions = fw_releases.mined_versions(package, cache)
    doc = catalogue_io.load(component) or {"messages": []}
    claim = _claimers(doc)
    per_version = {v: release_messages(component, v, cache) for v in versions}
    for rx, entry in claim:
        newest = entry.get("text") or ""
        for v in versions:
            for c in per_version[v]:
                r = _render(c.text)
                if rx.search(r) or any(o.search(r) for o, _ in claim):
                    continue
                if difflib.SequenceMatcher(None, c.text[:200], newest[:200]).ratio() > 0.75:
                    print(f"{entry['id']} @ {v} {c.file}:{c.line}: {c.text[:160]!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=fw_releases.DEFAULT_CACHE)
    sub = parser.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("packages", nargs="*")
    m = sub.add_parser("mine")
    m.add_argument("components", nargs="*")
    c = sub.add_parser("candidates")
    c.add_argument("component", choices=sorted(COMPONENTS))
    c.add_argument("--version")
    c.add_argument("--all", action="store_true", help="every message, also claimed (*) or not distributed-relevant ones")
    d = sub.add_parser("draft")
    d.add_argument("component", choices=sorted(COMPONENTS))
    r = sub.add_parser("drift")
    r.add_argument("component", choices=sorted(COMPONENTS))
    args = parser.parse_args(argv)
    if args.cmd == "fetch":
        for spec in args.packages or list(fw_releases.PACKAGES):
            name, _, ver = spec.partition("==")
            for v in [ver] if ver else fw_releases.PACKAGES[name][1]:
                print(fw_releases.fetch(name, v, args.cache), fw_releases.release_date(name, v, args.cache))
        return 0
    if args.cmd == "candidates":
        candidates(args.cache, args.component, args.version, args.all)
        return 0
    if args.cmd == "draft":
        draft(args.cache, args.component)
        return 0
    if args.cmd == "drift":
        drift(args.cache, args.component)
        return 0
    return 1 if mine(args.cache, args.components or sorted(COMPONENTS)) else 0


if __name__ == "__main__":
    raise SystemExit(main())
