"""Mine the line spans of the functions in framework files, per release: kb/frames/<package>.json.

A Python traceback frame (`File ".../transformers/trainer.py", line 2555, in _save_checkpoint`)
names a file, a line and a function. Only the releases whose `_save_checkpoint` spans line 2555 of
trainer.py can have printed it, so the frames of a traceback narrow the version of the package that
printed them (advisor/frames.py reads the table). Version-gated causes need exactly that fact.

For every release on PyPI in the range, `pip download --no-deps` fetches the wheel, the listed
files are read from it (never unpacked to disk beyond the cache), `ast` gives each function's
`def` line and last line, and the wheel is deleted. Spans shared by consecutive releases are stored
once with the range of release indices that have them.

    .venv/bin/python tools/mine/frames.py                    # every package in PACKAGES
    .venv/bin/python tools/mine/frames.py --package trl --cache /tmp/frames-cache
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures as cf
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "kb" / "frames"

# package -> (files read, oldest release read). Files are the ones training tracebacks pass through
# and where the KB's version-gated causes live; a file absent from a release is skipped for it.
PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "transformers": (("transformers/trainer.py", "transformers/trainer_pt_utils.py", "transformers/modeling_utils.py"), "4.20.0"),
    "torch": (("torch/distributed/distributed_c10d.py", "torch/distributed/c10d_logger.py", "torch/distributed/rendezvous.py",
               "torch/distributed/run.py", "torch/distributed/launcher/api.py",
               "torch/distributed/elastic/agent/server/api.py", "torch/distributed/elastic/agent/server/local_elastic_agent.py",
               "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py",
               "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py",
               "torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", "torch/distributed/elastic/utils/store.py",
               "torch/distributed/elastic/multiprocessing/api.py", "torch/distributed/elastic/multiprocessing/errors/__init__.py",
               "torch/nn/parallel/distributed.py", "torch/distributed/fsdp/fully_sharded_data_parallel.py",
               "torch/distributed/fsdp/_runtime_utils.py", "torch/multiprocessing/spawn.py", "torch/utils/data/dataloader.py",
               "torch/autograd/__init__.py", "torch/autograd/graph.py", "torch/_tensor.py"), "1.13.0"),
    "accelerate": (("accelerate/accelerator.py", "accelerate/state.py", "accelerate/data_loader.py",
                    "accelerate/utils/operations.py", "accelerate/utils/other.py", "accelerate/commands/launch.py"), "0.20.0"),
    "trl": (("trl/trainer/sft_trainer.py", "trl/trainer/grpo_trainer.py", "trl/trainer/dpo_trainer.py",
             "trl/trainer/orpo_trainer.py", "trl/trainer/cpo_trainer.py", "trl/trainer/utils.py",
             "trl/extras/vllm_client.py"), "0.7.0"),
}

_RELEASE = re.compile(r"^\d+(\.\d+){1,2}$")  # final releases only: rc/dev builds are not what users run


def releases(package: str, oldest: str) -> list[str]:
    """Every final release of `package` on the index from `oldest` on, oldest first."""
    from packaging.version import Version

    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package], capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("Available versions:"))
    found = [v.strip() for v in line.split(":", 1)[1].split(",")]
    return sorted((v for v in found if _RELEASE.match(v) and Version(v) >= Version(oldest)), key=Version)


def spans(source: str) -> dict[str, list[tuple[int, int]]]:
    """function name -> [(def line, last line)]: every function and method, nested ones included."""
    tree = ast.parse(source)
    out: dict[str, list[tuple[int, int]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(node.name, []).append((node.lineno, node.end_lineno or node.lineno))
    return {k: sorted(v) for k, v in out.items()}


def read_release(package: str, version: str, files: tuple[str, ...], cache: Path) -> dict[str, dict[str, list[tuple[int, int]]]] | None:
    """The function spans of `files` in one release (cached as JSON); None when it has no wheel here."""
    cached = cache / package / f"{version}.json"
    if cached.exists():
        return {f: {k: [tuple(s) for s in v] for k, v in d.items()} for f, d in json.loads(cached.read_text()).items()}
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp,
                               f"{package}=={version}"], capture_output=True, text=True)
        if done.returncode != 0:  # no wheel for this interpreter/platform: the release is left out, and said so
            print(f"skipped {package} {version}: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return None
        wheel = next(Path(tmp).glob("*.whl"))
        result: dict[str, dict[str, list[tuple[int, int]]]] = {}
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            for f in files:
                if f in names:
                    result[f] = spans(zf.read(f).decode("utf-8"))
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(result))
    return result


def _ranges(indices: list[int]) -> str:
    """[0,1,2,5] -> '0-2,5'."""
    parts, start, prev = [], indices[0], indices[0]
    for i in indices[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(parts)


def build(package: str, cache: Path, jobs: int = 8) -> dict:
    files, oldest = PACKAGES[package]
    versions = releases(package, oldest)
    with cf.ThreadPoolExecutor(jobs) as pool:
        read = list(pool.map(lambda v: read_release(package, v, files, cache), versions))
    versions = [v for v, r in zip(versions, read) if r is not None]
    per_version = [r for r in read if r is not None]
    table: dict[str, dict[str, dict[str, list[int]]]] = {}
    for index, found in enumerate(per_version):
        for f, funcs in found.items():
            for name, sp in funcs.items():
                for a, b in sp:
                    table.setdefault(f, {}).setdefault(name, {}).setdefault(f"{a}-{b}", []).append(index)
    return {
        "package": package,
        "source": f"the wheels of every final {package} release on PyPI from {oldest} (pip download --no-deps), read with ast",
        "mined_with": "tools/mine/frames.py",
        "versions": versions,
        "files": {
            f: {name: {span: _ranges(idx) for span, idx in sorted(by_span.items(), key=lambda kv: kv[1][0])}
                for name, by_span in sorted(funcs.items())}
            for f, funcs in sorted(table.items())
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", action="append", choices=sorted(PACKAGES), help="default: all")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "frames-mine")
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    for package in args.package or sorted(PACKAGES):
        table = build(package, args.cache, args.jobs)
        path = OUT / f"{package}.json"
        path.write_text(json.dumps(table, separators=(",", ":"), sort_keys=False) + "\n")
        print(f"{path.relative_to(ROOT)}: {len(table['versions'])} releases ({table['versions'][0]} .. {table['versions'][-1]}), "
              f"{sum(len(v) for v in table['files'].values())} functions, {path.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
