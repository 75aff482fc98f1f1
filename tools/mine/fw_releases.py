"""The framework releases the framework miner reads: download from PyPI, keep their Python sources.

Each release is fetched with `pip download --no-deps` (a wheel where PyPI has one, else the sdist),
its `.py` files under the package's import roots are unpacked and the archive is deleted. The
release date (newest member time in the archive) is kept so the chosen releases can be checked to
span a year or more.

Cache layout: <cache>/<package>/<version>/{archive.txt, src/<import root>/...}; default cache
$FW_MINE_CACHE or /work/mine/fw (never inside the repository).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

DEFAULT_CACHE = Path(os.environ.get("FW_MINE_CACHE", "/work/mine/fw"))

# package -> (import roots kept, releases read: oldest first; the pins of tests/integration/envs
# among them, and one release about a year older than the pin)
PACKAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "deepspeed": (("deepspeed/",), ("0.14.5", "0.15.4", "0.16.0", "0.16.9", "0.17.6", "0.18.0", "0.18.9", "0.19.8")),
    "accelerate": (("accelerate/",), ("0.34.2", "1.0.1", "1.2.1", "1.4.0", "1.6.0", "1.8.1", "1.10.1", "1.12.0", "1.15.0")),
    "transformers": (("transformers/trainer", "transformers/training_args.py", "transformers/integrations/",
                      "transformers/modeling_utils.py", "transformers/utils/import_utils.py",
                      "transformers/utils/versions.py", "transformers/distributed/"),
                     ("4.46.3", "4.49.0", "4.51.3", "4.53.3", "4.57.6", "5.0.0", "5.5.4", "5.12.1", "5.23.0")),
    "lightning": (("lightning/pytorch/", "lightning/fabric/"), ("2.2.5", "2.3.3", "2.4.0", "2.5.1", "2.5.6", "2.6.0", "2.6.6")),
    "trl": (("trl/",), ("0.14.0", "0.16.1", "0.17.0", "0.19.1", "0.21.0", "0.23.1", "0.26.2", "0.29.1", "1.0.0", "1.8.0", "1.16.0")),
    "vllm": (("vllm/distributed/", "vllm/envs.py", "vllm/utils/", "vllm/utils.py", "vllm/v1/executor/", "vllm/v1/engine/",
              "vllm/executor/", "vllm/engine/"),
             ("0.8.5", "0.9.2", "0.10.2", "0.11.0", "0.15.1", "0.19.1", "0.25.1", "0.33.0")),
    "torchtitan": (("torchtitan/",), ("0.1.0", "0.2.0", "0.2.2", "0.3.0")),
    "llamafactory": (("llamafactory/",), ("0.9.0", "0.9.1", "0.9.2", "0.9.3", "0.9.4", "0.9.5")),
    "sglang": (("sglang/srt/managers/", "sglang/srt/entrypoints/", "sglang/srt/utils.py", "sglang/srt/utils/",
                "sglang/srt/server.py", "sglang/srt/server_args.py"),
               ("0.3.0", "0.3.6", "0.4.0", "0.4.3", "0.4.6", "0.4.9", "0.5.1", "0.5.5", "0.5.12", "0.5.23")),
}
PLATFORM_ARGS: dict[str, list[str]] = {
    "sglang": ["--only-binary=:all:", "--platform", "manylinux_2_34_x86_64", "--platform", "manylinux_2_28_x86_64",
               "--platform", "manylinux2014_x86_64", "--platform", "any", "--python-version", "3.11"],
    "vllm": ["--only-binary=:all:", "--platform", "manylinux_2_31_x86_64", "--platform", "manylinux_2_28_x86_64",
             "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64", "--python-version", "3.12"],
}

# other platforms to try when the first has no wheel for a release (none needed so far)
FALLBACK_ARGS: dict[str, list[list[str]]] = {}


def pypi_url(package: str, version: str) -> str:
    return f"https://pypi.org/project/{package}/{version}/"


def fetch(package: str, version: str, cache: Path = DEFAULT_CACHE) -> Path:
    """Download one release and keep the .py files under its import roots in <cache>/<package>/<version>/src."""
    dest = cache / package / version
    if (dest / ".done").exists():
        return dest
    roots = PACKAGES[package][0]
    download = cache / f"dl_{package}_{version}"
    shutil.rmtree(download, ignore_errors=True)
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}
    for platform in [PLATFORM_ARGS.get(package, []), *FALLBACK_ARGS.get(package, [])]:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *platform,
             "--index-url", "https://pypi.org/simple", f"{package}=={version}", "-d", str(download)],
            env=env,
        )
        if done.returncode == 0:
            break
    else:
        raise SystemExit(f"pip download {package}=={version} failed")
    archive = next(p for p in download.iterdir() if p.suffix in (".whl", ".gz", ".zip"))
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "src").mkdir(parents=True)
    newest = 0.0
    for name, data, mtime in _members(archive):
        inner = name.split("/", 1)[1] if archive.suffix != ".whl" and "/" in name else name  # an sdist's top folder
        inner = inner.removeprefix("src/")  # an sdist that keeps its packages under src/
        if not inner.endswith(".py") or not inner.startswith(roots):
            continue
        out = dest / "src" / inner
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        newest = max(newest, mtime)
    date = dt.datetime.fromtimestamp(newest, dt.timezone.utc).date().isoformat() if newest else "?"
    (dest / "archive.txt").write_text(f"{archive.name}\n{date}\n")
    shutil.rmtree(download)
    (dest / ".done").touch()
    return dest


def _members(archive: Path):
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if info.filename.endswith(".py"):
                    stamp = dt.datetime(*info.date_time).timestamp() if info.date_time[0] > 1980 else 0.0
                    yield info.filename, zf.read(info), stamp
        return
    with tarfile.open(archive) as tf:
        for info in tf.getmembers():
            if info.isfile() and info.name.endswith(".py"):
                fh = tf.extractfile(info)
                if fh is not None:
                    yield info.name, fh.read(), float(info.mtime)


def mined_versions(package: str, cache: Path = DEFAULT_CACHE) -> list[str]:
    """The releases of `package` present in the cache, oldest first."""
    base = cache / package
    found = [p.name for p in base.iterdir() if (p / ".done").exists()] if base.is_dir() else []
    return sorted(found, key=version_key)


def archive_name(package: str, version: str, cache: Path = DEFAULT_CACHE) -> str:
    path = cache / package / version / "archive.txt"
    return path.read_text().split("\n")[0] if path.exists() else f"{package}-{version}"


def release_date(package: str, version: str, cache: Path = DEFAULT_CACHE) -> str:
    path = cache / package / version / "archive.txt"
    lines = path.read_text().split("\n") if path.exists() else []
    return lines[1] if len(lines) > 1 else "?"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("+")[0].replace(".post", ".").split(".") if p.isdigit())


if __name__ == "__main__":
    wanted = sys.argv[1:] or list(PACKAGES)
    for pkg in wanted:
        name, _, ver = pkg.partition("==")
        for v in [ver] if ver else PACKAGES[name][1]:
            print(fetch(name, v), release_date(name, v))
