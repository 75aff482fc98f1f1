"""Mine kb/messages/cuda-runtime.yaml: the CUDA error strings NCCL quotes in `Cuda failure '...'`.

NCCL reports a failed CUDA runtime call as `NCCL WARN Cuda failure '<cudaGetErrorString(err)>'`
(src/include/checks.h, every release) and, from 2.19.1, a failed driver call as `Cuda failure <n>
'<string>'` (src/include/cudawrap.h); torch prints the same strings as `CUDA error: <string>`
(kb/messages/c10-cuda.yaml). The string, not the wrapper, says what went wrong, so each CUDA error
the c10-cuda component already maps (plus EXTRA below) gets an entry here whose meaning, causes and
event are the c10-cuda entry's: one piece of knowledge, two wrappers, and tests/test_catalogue.py
fails when they drift apart.

Every string is checked against the `.rodata` strings of libcudart.so in the nvidia-cuda-runtime
wheels listed in WHEELS (downloaded to --cache, never committed); a string no wheel holds stops the
run. Hand-written fields of an existing entry (meaning, pattern, sample, examples, near_misses) are
kept: a new entry's meaning starts as the c10-cuda one and is then reworded for NCCL where it differs.

Usage:  .venv/bin/python tools/mine/cuda_runtime.py [--cache ~/.cache/cuda-mine] [--dry-run]
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalogue_io import load, save  # noqa: E402

COMPONENT = "cuda-runtime"
WHEELS = [("nvidia-cuda-runtime-cu12", "12.9.79")]
SOURCE = "src/include/checks.h (CUDACHECK; cudawrap.h CUCHECK from 2.19.1), text from cudaGetErrorString"

# CUDA errors torch's c10-cuda entries do not carry, with what they mean here (CUDA runtime API
# documentation of the error code, https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html:
# cudaErrorSystemNotReady) and the causes they point to.
EXTRA = {
    "system not yet initialized": {
        "slug": "system-not-ready",
        "meaning": "cudaErrorSystemNotReady: the system is not ready for CUDA work because a driver daemon it needs is"
                   " not running; on NVSwitch systems (HGX/DGX) that is nvidia-fabricmanager, stopped or of another"
                   " version than the driver.",
        "points_to": [{"cause": "gpu-xid-ecc", "weight": 4}],
        "event": "hardware",
    },
}


def cuda_strings(cache: Path) -> set[str]:
    """The NUL-terminated strings of libcudart.so in every wheel of WHEELS."""
    out: set[str] = set()
    cache.mkdir(parents=True, exist_ok=True)
    for name, version in WHEELS:
        wheel = next(cache.glob(f"{name.replace('-', '_')}-{version}-*.whl"), None)
        if wheel is None:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"{name}=={version}", "-d", str(cache)],
                           check=True)
            wheel = next(cache.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            lib = next(n for n in zf.namelist() if re.search(r"lib/libcudart\.so\.\d+$", n))
            data = zf.read(lib)
        out.update(s.decode("ascii", "replace") for s in re.findall(rb"[\x20-\x7e]{6,}", data))
    return out


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48].rstrip("-")


def entries(known: dict[str, dict]) -> list[dict]:
    """One entry per CUDA error string that c10-cuda maps, plus EXTRA; existing hand-written
    fields kept."""
    torch = load("c10-cuda") or {"messages": []}
    wanted: dict[str, dict] = {}
    for m in torch["messages"]:
        if m["text"].startswith("CUDA error: ") and m.get("points_to"):
            wanted[m["text"][len("CUDA error: "):]] = {"slug": m["id"].split(".", 1)[1], "meaning": m["meaning"],
                                                        "points_to": m["points_to"], "event": m.get("event")}
    wanted.update(EXTRA)
    out = []
    for text, info in wanted.items():
        mid = f"{COMPONENT}.{info['slug']}"
        old = known.get(mid, {})
        # a space in a KB pattern also matches a line break (advisor.regex): keep spaces unescaped
        literal = re.escape(text[:60].rsplit(" ", 1)[0] if len(text) > 60 else text).replace("\\ ", " ")
        entry = {
            "id": mid, "level": "warn", "text": f"Cuda failure '{text}'", "source": SOURCE, "versions": "",
            "pattern": old.get("pattern") or f"(?:NCCL WARN|Last error:) Cuda failure (?:\\d+ )?'{literal}",
            "case_sensitive": True,
            "meaning": old.get("meaning") or f"NCCL's CUDA call failed with the CUDA error '{text}'. {info['meaning']}",
            "role": "cause", "points_to": info["points_to"], "event": info.get("event"),
            "refines": [],
            "sample": old.get("sample") or f"host:1:1 [0] enqueue.cc:7 NCCL WARN Cuda failure '{text}'",
            "examples": old.get("examples", []),  # lines from real logs only
            "near_misses": old.get("near_misses") or [
                f"host:1:1 [0] NCCL INFO init.cc:7 Cuda failure '{text}'",  # NCCL ignored it and went on
                f"RuntimeError: CUDA error: {text}",  # torch's own wrapper: kb/messages/c10-cuda.yaml
            ],
        }
        entry["refines"] = sharing(entry)
        out.append(entry)
    return out


GENERAL = ("nccl-misc.cuda-failure", "nccl-misc.cuda-failure-3")
"""NCCL's general `Cuda failure` formats (runtime and driver call) that these entries are instances of."""


@functools.lru_cache(maxsize=1)
def _general() -> dict[str, dict]:
    return {m["id"]: m for m in (load("nccl-misc") or {"messages": []})["messages"] if m["id"] in GENERAL}


def sharing(entry: dict) -> list[str]:
    """The general formats that claim a line of this entry, or whose line this entry claims (the
    catalogue's collision check lets an instance and its format share lines only when declared)."""
    general = _general()
    out = []
    for mid, m in general.items():
        theirs = m.get("sample") or m["text"]
        if re.search(m["pattern"], entry["sample"]) or re.search(entry["pattern"], theirs):
            out.append(mid)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "cuda-mine")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    strings = cuda_strings(args.cache)
    current = load(COMPONENT) or {"messages": []}
    built = entries({m["id"]: m for m in current["messages"]})
    missing = [e["text"] for e in built if e["text"][len("Cuda failure '"):-1] not in strings]
    if missing:
        print("not in libcudart's strings (fix the text or the WHEELS list):", *missing, sep="\n  ")
        return 1
    mined_from = [{"artifact": f"{name}=={version} libcudart.so (.rodata strings)", "url": f"https://pypi.org/project/{name}/{version}/"}
                  for name, version in WHEELS]
    mined_from.append({"artifact": "NVIDIA/nccl v2.29.7-1 src/include/checks.h, src/include/cudawrap.h (the wrappers)",
                       "url": "https://github.com/NVIDIA/nccl/blob/v2.29.7-1/src/include/checks.h"})
    print(f"{len(built)} CUDA error strings, all in libcudart")
    if not args.dry_run:
        path = save(COMPONENT, "cuda", "CUDA errors NCCL reports: the cudaGetErrorString text in `Cuda failure '...'`",
                    mined_from, built)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
