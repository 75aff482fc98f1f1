"""Mine the torch catalogue's Python messages from the released wheels' sources.

    python tools/mine/python_sources.py fetch [VERSION ...]     # download + unpack (torch_wheels.py)
    python tools/mine/python_sources.py mine                    # update kb/messages/<component>.yaml
    python tools/mine/python_sources.py candidates COMPONENT    # messages of the newest release no entry claims

Every message of the listed files is read from each cached release with tools/mine/pysource.py
(raise / logger.<level> / warnings.warn / print). A catalogue entry whose `source` is a .py file is
identified by its hand-written `pattern`: in each release, the messages of the component's files
that the pattern matches (rendered with `7` for each placeholder, as advisor.catalogue does) are its
wordings. The newest wording becomes `text`, older ones `wording`, each with the minor releases that
hold it; `source` and `level` follow the newest release. Hand-written fields are kept.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import catalogue_io  # noqa: E402
import pysource  # noqa: E402
import torch_wheels  # noqa: E402

# component -> (title, files inside the wheel the component's Python messages come from)
COMPONENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch-distributed": (
        "torch.distributed in Python: process groups, collectives, rendezvous handlers, device mesh, DTensor, FSDP",
        (
            "torch/distributed/__init__.py", "torch/distributed/distributed_c10d.py", "torch/distributed/rendezvous.py",
            "torch/distributed/utils.py", "torch/distributed/device_mesh.py", "torch/distributed/_tensor/device_mesh.py",
            "torch/distributed/c10d_logger.py", "torch/distributed/collective_utils.py",
            "torch/distributed/fsdp/**/*.py", "torch/distributed/_composable/fsdp/**/*.py",
            "torch/distributed/fsdp/_fully_shard/*.py", "torch/distributed/_composable/*.py",
            "torch/distributed/tensor/*.py", "torch/distributed/tensor/_*.py", "torch/distributed/_tensor/*.py",
            "torch/distributed/tensor/parallel/*.py",
            "torch/distributed/checkpoint/*.py", "torch/distributed/algorithms/join.py",
            "torch/distributed/_functional_collectives.py", "torch/distributed/_state_dict_utils.py",
            "torch/distributed/flight_recorder/**/*.py",
        ),
    ),
    "c10d-store": (
        "c10d stores: TCPStore (client, server, libuv backend), socket.cpp, FileStore, store-based barrier",
        ("torch/distributed/distributed_c10d.py", "torch/distributed/rendezvous.py", "torch/distributed/elastic/utils/store.py"),
    ),
    "elastic-agent": (
        "torch.distributed.elastic: the agent, worker processes, failure summaries (ChildFailedError)",
        (
            "torch/distributed/elastic/agent/**/*.py", "torch/distributed/elastic/multiprocessing/**/*.py",
            "torch/distributed/elastic/utils/*.py", "torch/distributed/launcher/*.py",
            "torch/distributed/elastic/timer/*.py", "torch/distributed/elastic/control_plane.py",
        ),
    ),
    "rendezvous": (
        "torch.distributed.elastic rendezvous: dynamic (c10d, etcd) and static TCP handlers",
        ("torch/distributed/elastic/rendezvous/*.py",),
    ),
    "torchrun": (
        "torchrun / torch.distributed.launch: arguments, environment and launch notices",
        ("torch/distributed/run.py", "torch/distributed/launch.py", "torch/distributed/argparse_util.py"),
    ),
    "ddp-python": (
        "DistributedDataParallel's Python side (torch/nn/parallel/distributed.py)",
        ("torch/nn/parallel/distributed.py", "torch/nn/parallel/data_parallel.py", "torch/nn/parallel/_functions.py"),
    ),
    "dataloader": (
        "torch.utils.data DataLoader: worker processes, their deaths, timeouts and shared memory; DistributedSampler",
        ("torch/utils/data/dataloader.py", "torch/utils/data/_utils/*.py", "torch/_utils.py", "torch/utils/data/distributed.py"),
    ),
    "c10-cuda": (
        "CUDA errors torch raises (c10/cuda and torch.cuda)",
        ("torch/cuda/__init__.py",),
    ),
    "mp-spawn": (
        "torch.multiprocessing.spawn: worker processes started with mp.spawn and their exits",
        ("torch/multiprocessing/spawn.py",),
    ),
}


def _regex(pattern: str, case_sensitive: bool):
    from advisor.regex import compile_pattern

    return compile_pattern(pattern, not case_sensitive)


def _render(text: str) -> str:
    from advisor.catalogue import render

    return render(text)


_FIELD = re.compile(r"%%|%\([a-z_]+\)[sdrf]|%[-+ #0]*\d*(?:\.\d+)?[diouxXeEfgGcsr]|\{[^{}]*\}")


@functools.lru_cache(maxsize=None)
def template_regex(text: str):
    """A regex that matches every printed instance of a format string (placeholders match anything)."""
    parts = _FIELD.split(text)
    if len("".join(parts).strip()) < 10:
        return re.compile(r"(?!x)x")  # too little literal text to tell messages apart
    return re.compile(".*?".join(re.escape(p) for p in parts), re.S)


def claims(regex, entry: dict, text: str, rendered: str) -> bool:
    """An entry claims a message when its pattern matches the message rendered with `7`s, or, for a
    pattern written for particular values (a signal number), when the message's format matches the
    entry's printed `sample`."""
    if regex.search(rendered):
        return True
    sample = entry.get("sample")
    return bool(sample) and template_regex(text).search(sample) is not None and regex.search(sample) is not None


def release_messages(version: str, component: str, cache: Path) -> list[pysource.Candidate]:
    return pysource.tree_messages(cache / version / "src", list(COMPONENTS[component][1]))


def is_python(entry: dict) -> bool:
    return str(entry.get("source", "")).endswith(".py") or entry.get("text") in (None, "", "?")


def mine(cache: Path, components: list[str]) -> int:
    versions = torch_wheels.mined_versions(cache)
    if not versions:
        raise SystemExit(f"no releases in {cache}: run `fetch` first")
    problems = 0
    for component in components:
        doc = catalogue_io.load(component)
        if doc is None:
            print(f"{component}: no kb/messages/{component}.yaml yet (write entries with id, pattern and the hand fields first)")
            continue
        per_version = {v: release_messages(v, component, cache) for v in versions}
        rendered = {v: [(c, _render(c.text)) for c in cands] for v, cands in per_version.items()}
        entries = []
        for entry in doc["messages"]:
            if not is_python(entry):
                entries.append(entry)
                continue
            regex = _regex(entry["pattern"], bool(entry.get("case_sensitive")))
            texts: dict[str, list[str]] = defaultdict(list)  # text -> versions
            where: dict[str, pysource.Candidate] = {}
            for v in versions:
                hits = {c.text: c for c, r in rendered[v] if claims(regex, entry, c.text, r)}
                for text, cand in hits.items():
                    texts[text].append(v)
                    where[text] = cand
            if not texts:
                print(f"  ! {entry['id']}: the pattern matches no message in {versions[0]}..{versions[-1]}")
                problems += 1
                entries.append(entry)
                continue
            newest = max(texts, key=lambda t: (catalogue_io.version_key(texts[t][-1]), t == entry.get("text")))
            same_release = [t for t in texts if t != newest and texts[t][-1] == texts[newest][-1]]
            if same_release:
                print(f"  ? {entry['id']}: {len(same_release) + 1} messages match in {texts[newest][-1]}: "
                      + " | ".join(repr(t[:70]) for t in [newest, *same_release]))
            entry = dict(entry)
            cand = where[newest]
            entry["text"] = newest
            entry["source"] = cand.file
            entry["level"] = cand.level
            entry["versions"] = catalogue_io.specifier(texts[newest], versions)
            # other wordings; a variant printed by every mined release (another call site of the same
            # message) gets the explicit range of the mined releases, as `versions` may not be empty there
            entry["wording"] = [
                {"versions": catalogue_io.specifier(vs, versions) or f">={versions[0].rsplit('.', 1)[0]}", "text": t}
                for t, vs in sorted(texts.items(), key=lambda kv: catalogue_io.version_key(kv[1][0]))
                if t != newest
            ]
            entries.append(entry)
        mined_from = [m for m in doc.get("mined_from", []) if "(Python source" not in m["artifact"] and "placeholder" not in m["artifact"]]
        files = ", ".join(COMPONENTS[component][1][:3]) + (" ..." if len(COMPONENTS[component][1]) > 3 else "")
        for v in versions:
            mined_from.append({
                "artifact": f"torch=={v} {torch_wheels.wheel_name(v, cache)}: {files} (Python source, AST)",
                "url": torch_wheels.pypi_url(v),
            })
        catalogue_io.save(component, doc.get("software", "torch"), doc.get("title") or COMPONENTS[component][0], mined_from, entries)
        print(f"{component}: {sum(is_python(e) for e in entries)} Python messages over {len(versions)} releases")
    return problems


def candidates(cache: Path, component: str, version: str | None, show_all: bool) -> None:
    versions = torch_wheels.mined_versions(cache)
    version = version or versions[-1]
    doc = catalogue_io.load(component) or {"messages": []}
    regexes = [_regex(e["pattern"], bool(e.get("case_sensitive"))) for e in doc["messages"] if e.get("pattern")]
    for c in release_messages(version, component, cache):
        r = _render(c.text)
        claimed = any(rx.search(r) for rx in regexes)
        if claimed and not show_all:
            continue
        flat = c.text.replace("\n", "\\n")
        print(f"{'*' if claimed else ' '} {c.file}:{c.line} [{c.kind}] {c.function}: {flat[:300]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=torch_wheels.DEFAULT_CACHE)
    sub = parser.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("versions", nargs="*")
    m = sub.add_parser("mine")
    m.add_argument("components", nargs="*")
    c = sub.add_parser("candidates")
    c.add_argument("component", choices=sorted(COMPONENTS))
    c.add_argument("--version")
    c.add_argument("--all", action="store_true", help="also list messages an entry already claims (marked *)")
    args = parser.parse_args(argv)
    if args.cmd == "fetch":
        for v in args.versions or torch_wheels.RELEASES:
            print(torch_wheels.fetch(v, args.cache))
        return 0
    if args.cmd == "candidates":
        candidates(args.cache, args.component, args.version, args.all)
        return 0
    return 1 if mine(args.cache, args.components or sorted(COMPONENTS)) else 0


if __name__ == "__main__":
    raise SystemExit(main())
