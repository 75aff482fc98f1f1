"""The torch wheels the torch miners read: download, keep what they need, drop the rest.

Each release's manylinux CUDA wheel from PyPI (about 1 GB) is downloaded with `pip download
--no-deps`, the Python sources the catalogue reads are unpacked, the shared libraries are reduced to
their `strings` (gzipped) and the wheel is deleted: a release takes about 30 MB in the cache.

Cache layout: <cache>/<version>/{wheel.txt, lib*.strings.gz, src/torch/...}; default cache
$TORCH_MINE_CACHE or /work/mine/torch (never inside the repository).
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from catalogue_io import version_key

DEFAULT_CACHE = Path(os.environ.get("TORCH_MINE_CACHE", "/work/mine/torch"))
# torch 1.x wheels split libtorch_cuda.so into libtorch_cuda_cpp.so (ProcessGroupNCCL's C++) and
# libtorch_cuda_cu.so (the kernels); the 1.13.1 wheel's libtorch_cuda.so is a 0.2 MB stub
LIBS = ("libtorch_cuda.so", "libtorch_cuda_cpp.so", "libtorch_cuda_cu.so", "libtorch_cpu.so", "libc10_cuda.so", "libc10.so",
        "libtorch_python.so")
SOURCES = (
    "torch/distributed/", "torch/nn/parallel/", "torch/utils/data/", "torch/version.py", "torch/cuda/__init__.py",
    "torch/_utils.py", "torch/multiprocessing/",
    "torch/include/torch/csrc/distributed/c10d/",
)
# one release per minor: the newest patch release of each (2.13.0 is the only 2.13 with CUDA wheels),
# from 1.13.1 (the oldest with a Python 3.11 wheel; public threads' torch 1.x logs)
RELEASES = ("1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0")


def pypi_url(version: str) -> str:
    return f"https://pypi.org/project/torch/{version}/"


def fetch(version: str, cache: Path = DEFAULT_CACHE) -> Path:
    """Download one release's CUDA wheel and keep its strings and sources under <cache>/<version>."""
    dest = cache / version
    if (dest / ".done").exists():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    download = cache / f"dl_{version}"
    # PyPI itself: a local find-links directory may hold a `+cpu` build under the same version
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
         "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64", "--python-version", "3.11",
         "--index-url", "https://pypi.org/simple", f"torch=={version}", "-d", str(download)],
        check=True, env=env,
    )
    wheel = next(download.glob("*.whl"))
    if "+cpu" in wheel.name:
        raise SystemExit(f"{wheel.name} is a CPU wheel: it lacks libtorch_cuda.so (ProcessGroupNCCL)")
    (dest / "wheel.txt").write_text(wheel.name + "\n")
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith(SOURCES) and not name.endswith("/"):
                zf.extract(name, dest / "src")
            elif name.startswith("torch/lib/") and name.rsplit("/", 1)[-1] in LIBS:
                lib = Path(zf.extract(name, dest))
                out = subprocess.run(["strings", "-n", "4", str(lib)], check=True, capture_output=True).stdout
                with gzip.open(dest / (lib.name.removesuffix(".so") + ".strings.gz"), "wb") as fh:
                    fh.write(out)
                lib.unlink()
    shutil.rmtree(download)
    shutil.rmtree(dest / "torch", ignore_errors=True)
    (dest / ".done").touch()
    return dest


def mined_versions(cache: Path = DEFAULT_CACHE) -> list[str]:
    """The releases present in the cache, oldest first."""
    found = [p.name for p in cache.iterdir() if (p / ".done").exists()] if cache.is_dir() else []
    return sorted(found, key=version_key)


def wheel_name(version: str, cache: Path = DEFAULT_CACHE) -> str:
    path = cache / version / "wheel.txt"
    return Path(path.read_text().strip()).name if path.exists() else f"torch-{version}"


if __name__ == "__main__":
    for v in sys.argv[1:] or RELEASES:
        print(fetch(v))
