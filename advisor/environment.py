"""`advisor env`: what this machine can tell about a distributed job, collected before it starts.

Everything is read locally, with no network and without importing torch (unless `deep`): package
metadata for the versions, /sys and /proc for interfaces, shared memory, limits and containers,
`nvidia-smi` for the GPUs. Every reader goes through `Sources`, so the tests run the same code
against a fake root file system, a fake environment and canned command output.

The result is a plain JSON-able dict (the "env snapshot", see advisor/envfile.py for its schema),
written by `advisor env -o FILE` and read back by `advisor suggest --env` and `advisor preflight`.
Environment variable values pass through the project's redactor: a secret never reaches the file.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

# the schema's name and version (advisor.envfile holds the same two: importing it would cost the
# collector pydantic's start-up; tests/test_environment.py checks they agree)
SNAPSHOT_KIND = "nccl-advisor-env"
SNAPSHOT_VERSION = "1"

# Variables that shape a distributed run. Prefixes cover NCCL's own and PyTorch's settings; the
# names add the launcher's rank/size variables and the markers that say a launcher set them.
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_", "TORCH_DISTRIBUTED_", "GLOO_", "TORCHELASTIC_")
ENV_NAMES = frozenset({
    "TORCH_CPP_LOG_LEVEL", "TORCH_SHOW_CPP_STACKTRACES", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK",
    "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "NNODES", "NPROC_PER_NODE",
    "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS", "DEEPSPEED_TIMEOUT",
    "ACCELERATE_DEBUG_MODE", "FORCE_TORCHRUN", "USE_LIBUV", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_LOCALID",
    "SLURM_NTASKS", "SLURM_NNODES", "SLURM_NODEID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
    "PMI_SIZE", "PYTORCH_CUDA_ALLOC_CONF", "NVIDIA_VISIBLE_DEVICES",
})
MAX_ENV_VARS = 300
MAX_VALUE = 1000

# Distributions whose versions matter, by their PyPI names. The frameworks are the ones the issue
# and the KB name; `open-r1` is installed from its repository (`pip install -e .`).
FRAMEWORK_PACKAGES = ("transformers", "accelerate", "trl", "deepspeed", "lightning", "pytorch-lightning",
                      "llamafactory", "torchtitan", "vllm", "open-r1", "peft", "datasets")
NCCL_PACKAGES = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
CUDA_RUNTIME_PACKAGES = ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11")
OTHER_PACKAGES = ("torch", "triton", "jsonargparse", "omegaconf")

COMMAND_TIMEOUT_S = 1.5  # nvidia-smi on a busy node can hang; the whole collection stays under 2 s
DEEP_TIMEOUT_S = 120.0
MAX_TEXT = 16384
MAX_ITEMS = 256

# File systems that say nothing about where a job's files go.
_PSEUDO_FS = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "securityfs", "debugfs", "tracefs", "pstore",
    "bpf", "configfs", "fusectl", "hugetlbfs", "autofs", "binfmt_misc", "nsfs", "rpc_pipefs", "efivarfs",
    "selinuxfs", "devtmpfs", "ramfs", "squashfs", "nfsd",
})
_VIRTUAL_PREFIXES = ("veth", "tun", "tap", "wg", "tailscale", "flannel", "cali", "vxlan", "docker", "virbr",
                     "cni", "br-", "kube-ipvs", "weave", "genev", "zt", "ifb", "dummy", "bond")


def run_commands(commands: list[list[str]], timeout: float, environ: Mapping[str, str]) -> list[str | None]:
    """Run commands at once (so two slow ones cost one wait); the stdout of each, or None when it
    is missing, fails, or does not finish within `timeout` seconds."""
    path = environ.get("PATH", os.defpath)
    procs: list[subprocess.Popen | None] = []
    for args in commands:
        exe = shutil.which(args[0], path=path)
        if exe is None:
            procs.append(None)
            continue
        try:
            procs.append(subprocess.Popen([exe, *args[1:]], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          stdin=subprocess.DEVNULL, env=dict(environ)))
        except OSError:
            procs.append(None)
    deadline = time.monotonic() + timeout
    out: list[str | None] = []
    for proc in procs:
        if proc is None:
            out.append(None)
            continue
        try:
            stdout, _ = proc.communicate(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out.append(None)
            continue
        out.append(stdout.decode("utf-8", "replace") if proc.returncode == 0 else None)
    return out


def installed_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
    except Exception:  # a broken dist-info folder must not stop the collection
        return None


def installed_file(dist: str, relative: str) -> str | None:
    """A text file shipped in an installed distribution (torch/version.py), read without importing it."""
    from importlib import metadata

    try:
        path = Path(str(metadata.distribution(dist).locate_file(relative)))
        return path.read_text(encoding="utf-8", errors="replace")[:MAX_TEXT] if path.is_file() else None
    except Exception:
        return None


@dataclass
class Sources:
    """Where the collection reads from: the real machine by default, fakes in tests."""

    root: Path = Path("/")
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    run: Callable[[list[list[str]], float], list[str | None]] | None = None
    package_version: Callable[[str], str | None] = installed_version
    package_file: Callable[[str, str], str | None] = installed_file
    statvfs: Callable[[str], Any] = os.statvfs
    hostname: Callable[[], str] = socket.gethostname
    now: Callable[[], float] = time.time
    python: tuple[str, str, str] = field(default_factory=lambda: (
        ".".join(str(p) for p in sys.version_info[:3]), sys.implementation.name, sys.executable))

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*(p.lstrip("/") for p in parts))

    def read(self, *parts: str, limit: int = MAX_TEXT) -> str | None:
        try:
            with open(self.path(*parts), "rb") as handle:
                return handle.read(limit).decode("utf-8", "replace")
        except (OSError, ValueError):
            return None

    def listdir(self, *parts: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(*parts)))[:MAX_ITEMS]
        except (OSError, ValueError):
            return []

    def commands(self, commands: list[list[str]], timeout: float) -> list[str | None]:
        if self.run is not None:
            return self.run(commands, timeout)
        return run_commands(commands, timeout, self.environ)


def collect(sources: Sources | None = None, deep: bool = False, mask_hosts: bool = False) -> dict[str, Any]:
    """The environment snapshot of this machine (see the module docstring)."""
    src = sources or Sources()
    notes: list[str] = []
    started = src.now()
    # the slow part first, in the background of everything else: nvidia-smi answers in parallel
    gpu_text = _gpu_commands(src)
    packages = _packages(src)
    torch = _torch(src, packages, notes, deep)
    snapshot: dict[str, Any] = {
        "kind": SNAPSHOT_KIND,
        "version": SNAPSHOT_VERSION,
        "host": _hostname(src),
        "collected_at": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        "time_unix": round(started, 3),
        "python": {"version": src.python[0], "implementation": src.python[1], "executable": src.python[2]},
        "torch": torch,
        "nccl": _nccl(packages, torch),
        "packages": packages,
        "frameworks": {name: packages[name] for name in FRAMEWORK_PACKAGES if name in packages},
        "env": _distributed_env(src.environ),
        "nccl_conf": _nccl_conf(src),
        "interfaces": _interfaces(src, notes),
        "default_route": _default_route(src),
        "mounts": _mounts(src),
        "shm": _shm(src, notes),
        "ulimits": _ulimits(src, notes),
        "container": _container(src),
        "gpus": _gpus(src, gpu_text, notes),
        "infiniband": _infiniband(src),
        "notes": notes,
    }
    return mask_snapshot_hosts(snapshot) if mask_hosts else snapshot


# --- hosts ----------------------------------------------------------------------------------------


def _hostname(src: Sources) -> str | None:
    try:
        return src.hostname()[:255] or None
    except OSError:
        return None


def mask_snapshot_hosts(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot with host names and IP addresses masked (for sharing it publicly)."""
    from advisor.redact import HOST_MASK, Redactor

    out = json.loads(json.dumps(snapshot))
    if out.get("host"):
        out["host"] = HOST_MASK
    for iface in out.get("interfaces") or []:
        iface["addresses"] = [HOST_MASK + ("/" + a.split("/", 1)[1] if "/" in a else "") for a in iface.get("addresses") or []]
    redactor = Redactor(mask_hosts=True)
    for section in ("env",):
        values = out.get(section) or {}
        for key, value in list(values.items()):
            values[key] = redactor.redact(value)
    conf = (out.get("nccl_conf") or {}).get("values") or {}
    for key, value in list(conf.items()):
        conf[key] = redactor.redact(value)
    gpus = out.get("gpus") or {}
    if gpus.get("topology"):
        gpus["topology"] = redactor.redact(gpus["topology"])
    out["masked"] = True
    return out


# --- packages, torch, NCCL --------------------------------------------------------------------------


def _packages(src: Sources) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in (*OTHER_PACKAGES, *NCCL_PACKAGES, *CUDA_RUNTIME_PACKAGES, *FRAMEWORK_PACKAGES):
        version = src.package_version(name)
        if version:
            out[name] = str(version)[:100]
    return out


def _version_file_value(text: str, name: str) -> str | None:
    """A string assigned in torch/version.py (`cuda: Optional[str] = '12.4'`), read, never executed."""
    import ast

    for line in text.splitlines():
        head, sep, value = line.partition("=")
        if not sep or head.split(":", 1)[0].strip() != name:
            continue
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        return str(parsed)[:100] if isinstance(parsed, str) else None
    return None


def _torch(src: Sources, packages: dict[str, str], notes: list[str], deep: bool) -> dict[str, Any] | None:
    version = packages.get("torch")
    if version is None:
        notes.append("torch is not installed in this Python environment")
        return None
    info: dict[str, Any] = {"version": version, "cuda": None, "nccl": None, "git_version": None, "source": "metadata"}
    text = src.package_file("torch", "torch/version.py")
    if text:
        info["cuda"] = _version_file_value(text, "cuda")
        info["git_version"] = _version_file_value(text, "git_version")
    if deep:
        info.update(_torch_deep(src, notes))
    return info


_DEEP_SCRIPT = r"""
import json, torch
out = {"version": torch.__version__, "cuda": torch.version.cuda, "nccl": None,
       "cuda_available": torch.cuda.is_available(), "device_count": None, "nccl_available": None}
try:
    v = torch.cuda.nccl.version()
    if isinstance(v, tuple):
        out["nccl"] = ".".join(str(x) for x in v[:3])
    elif isinstance(v, int):
        major, rest = (v // 10000, v % 10000) if v >= 10000 else (v // 1000, v % 1000)
        out["nccl"] = f"{major}.{rest // 100}.{rest % 100}"
except Exception:
    pass
try:
    out["device_count"] = torch.cuda.device_count()
except Exception:
    pass
try:
    import torch.distributed as dist
    out["nccl_available"] = dist.is_available() and dist.is_nccl_available()
except Exception:
    pass
print(json.dumps(out))
"""


def _torch_deep(src: Sources, notes: list[str]) -> dict[str, Any]:
    """What torch was built with, asked from torch itself in a child process (a CUDA driver that
    hangs on initialisation must not hang the advisor)."""
    python = src.python[2] or sys.executable
    (stdout,) = src.commands([[python, "-c", _DEEP_SCRIPT]], DEEP_TIMEOUT_S)
    if not stdout:
        notes.append("--deep: importing torch failed or took too long; versions are from package metadata")
        return {}
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        notes.append("--deep: could not read what torch printed")
        return {}
    if not isinstance(data, dict):
        return {}
    keep = {k: data.get(k) for k in ("version", "cuda", "nccl", "cuda_available", "device_count", "nccl_available")}
    return {**{k: v for k, v in keep.items() if v is not None}, "source": "import"}


def _nccl(packages: dict[str, str], torch: dict[str, Any] | None) -> dict[str, Any] | None:
    """The NCCL torch loads: the nvidia-nccl wheel pip installs beside it (torch's CUDA wheels load
    that library), or, with --deep, the version torch reports."""
    if torch and torch.get("source") == "import" and torch.get("nccl"):
        return {"version": torch["nccl"], "source": "torch.cuda.nccl.version()"}
    for name in NCCL_PACKAGES:
        if name in packages:
            return {"version": packages[name], "source": f"{name} package"}
    return None


# --- environment variables and nccl.conf -------------------------------------------------------------


def wanted_variable(name: str) -> bool:
    return name in ENV_NAMES or name.startswith(ENV_PREFIXES)


def _redacted(name: str, value: str) -> str:
    from advisor.redact import Redactor

    text = f"{name}={value[:MAX_VALUE]}"
    return Redactor().redact(text).partition("=")[2]


def _distributed_env(environ: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in sorted(environ):
        if wanted_variable(name) and len(out) < MAX_ENV_VARS:
            out[name] = _redacted(name, str(environ[name]))
    return out


def parse_nccl_conf(text: str) -> dict[str, str]:
    """NCCL's own reading of a conf file (src/misc/param.cc setEnvFile): lines that do not start
    with `#`, split at the first `=`."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if sep and name and len(out) < MAX_ENV_VARS:
            out.setdefault(name[:200], _redacted(name, value))
    return out


def _nccl_conf(src: Sources) -> dict[str, Any]:
    """Settings NCCL reads from files: $NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf; a
    variable already in the environment wins (NCCL calls setenv without overwriting)."""
    files: list[str] = []
    values: dict[str, str] = {}
    user = src.environ.get("NCCL_CONF_FILE")
    home = src.environ.get("HOME")
    candidates = [user] if user else ([os.path.join(home, ".nccl.conf")] if home else [])
    candidates.append("/etc/nccl.conf")
    for name in candidates:
        text = src.read(name)
        if text is None:
            continue
        files.append(name)
        for key, value in parse_nccl_conf(text).items():
            values.setdefault(key, value)
    return {"files": files, "values": values}


# --- network ---------------------------------------------------------------------------------------


def _interface_kind(src: Sources, name: str, if_type: str | None) -> str:
    if name == "lo" or if_type == "772":
        return "loopback"
    if if_type == "32":
        return "infiniband"
    if src.path("sys/class/net", name, "bridge").is_dir():
        return "bridge"
    if name.startswith(_VIRTUAL_PREFIXES):
        return "virtual"
    if src.path("sys/class/net", name, "device").exists():
        return "physical"
    return "virtual"


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _interfaces(src: Sources, notes: list[str]) -> list[dict[str, Any]]:
    names = [n for n in src.listdir("sys/class/net") if n and "/" not in n]
    if not names:
        notes.append("no network interfaces under /sys/class/net")
        return []
    v4 = _ipv4_addresses(src)
    v6 = _ipv6_addresses(src)
    out = []
    for name in names:
        base = ("sys/class/net", name)
        if not src.path(*base).is_dir():
            continue
        state = (src.read(*base, "operstate") or "").strip() or None
        carrier = (src.read(*base, "carrier") or "").strip()
        if_type = (src.read(*base, "type") or "").strip() or None
        running = carrier == "1" if carrier in ("0", "1") else state == "up"
        speed = _int(src.read(*base, "speed"))
        out.append({
            "name": name[:64],
            "state": state,
            "running": running,
            "kind": _interface_kind(src, name, if_type),
            "mtu": _int(src.read(*base, "mtu")),
            "speed_mbps": speed if speed and speed > 0 else None,
            "addresses": v4.get(name, []) + v6.get(name, []),
        })
    return out


def _routes(src: Sources) -> list[tuple[str, int, int, int]]:
    """(interface, destination, mask, metric) from /proc/net/route (addresses little-endian hex)."""
    text = src.read("proc/net/route") or ""
    out = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 8:
            continue
        try:
            dest = int.from_bytes(bytes.fromhex(parts[1]), "little")
            mask = int.from_bytes(bytes.fromhex(parts[7]), "little")
            metric = int(parts[6])
        except ValueError:
            continue
        out.append((parts[0], dest, mask, metric))
    return out


def _default_route(src: Sources) -> str | None:
    defaults = sorted((metric, iface) for iface, dest, mask, metric in _routes(src) if dest == 0 and mask == 0)
    return defaults[0][1] if defaults else None


def _ipv4_addresses(src: Sources) -> dict[str, list[str]]:
    """Local IPv4 addresses per interface: /proc/net/fib_trie lists them ("/32 host LOCAL"), and the
    interface is the one whose route covers the address (the longest prefix)."""
    text = src.read("proc/net/fib_trie", limit=1 << 20) or ""
    local: list[str] = []
    previous = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("/32 host LOCAL") and previous:
            if previous not in local:
                local.append(previous)
        previous = stripped[4:] if stripped.startswith(("|-- ", "+-- ")) else ""
    routes = _routes(src)
    out: dict[str, list[str]] = {}
    for text_addr in local[:MAX_ITEMS]:
        try:
            addr = int(ipaddress.IPv4Address(text_addr.split()[0]))
        except ValueError:
            continue
        best: tuple[int, str] | None = None
        for iface, dest, mask, _ in routes:
            if mask and addr & mask == dest and (best is None or mask > best[0]):
                best = (mask, iface)
        if best is not None:
            out.setdefault(best[1], []).append(f"{text_addr}/{bin(best[0]).count('1')}")
        elif text_addr.startswith("127."):
            out.setdefault("lo", []).append(f"{text_addr}/8")
    return out


def _ipv6_addresses(src: Sources) -> dict[str, list[str]]:
    """Global IPv6 addresses from /proc/net/if_inet6 (link-local ones carry no route between nodes)."""
    out: dict[str, list[str]] = {}
    for line in (src.read("proc/net/if_inet6") or "").splitlines()[:MAX_ITEMS]:
        parts = line.split()
        if len(parts) < 6 or len(parts[0]) != 32:
            continue
        try:
            addr = ipaddress.IPv6Address(bytes.fromhex(parts[0]))
            prefix = int(parts[2], 16)
            scope = int(parts[3], 16)
        except ValueError:
            continue
        if scope & 0x20 or addr.is_link_local:  # link-local
            continue
        out.setdefault(parts[5], []).append(f"{addr.compressed}/{prefix}")
    return out


# --- storage, limits, containers ---------------------------------------------------------------------


def _unescape_mount(path: str) -> str:
    """/proc/mounts writes a space as \\040, a tab as \\011 ..."""
    out = []
    i = 0
    while i < len(path):
        digits = path[i + 1:i + 4]
        if path[i] == "\\" and len(digits) == 3 and all(c in "01234567" for c in digits):
            out.append(chr(int(digits, 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def _mounts(src: Sources) -> list[dict[str, str]]:
    """Mount points and file-system types (never the mount source: an NFS source names its server)."""
    text = src.read("proc/self/mounts", limit=1 << 20) or src.read("proc/mounts", limit=1 << 20) or ""
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[2] in _PSEUDO_FS:
            continue
        path = _unescape_mount(parts[1])[:1024]
        if path in seen:
            continue
        seen.add(path)
        out.append({"path": path, "fstype": parts[2][:64]})
        if len(out) >= MAX_ITEMS:
            break
    return out


def _shm(src: Sources, notes: list[str]) -> dict[str, Any] | None:
    try:
        st = src.statvfs(str(src.path("dev/shm")))
    except (OSError, ValueError):
        notes.append("/dev/shm is missing or unreadable")
        return None
    block = st.f_frsize or st.f_bsize
    return {"path": "/dev/shm", "size_bytes": int(st.f_blocks * block), "free_bytes": int(st.f_bavail * block)}


_LIMITS = {"Max locked memory": "memlock", "Max open files": "nofile"}


def _limit(text: str) -> int | str | None:
    if text == "unlimited":
        return "unlimited"
    return _int(text)


def _ulimits(src: Sources, notes: list[str]) -> dict[str, Any]:
    """memlock and nofile (soft and hard) of this process, as /proc/self/limits shows them: a job
    started from the same shell inherits them."""
    out: dict[str, Any] = {}
    for line in (src.read("proc/self/limits") or "").splitlines():
        for label, key in _LIMITS.items():
            if line.startswith(label):
                parts = line[len(label):].split()
                if len(parts) >= 2:
                    out[key] = {"soft": _limit(parts[0]), "hard": _limit(parts[1])}
    if not out:
        notes.append("/proc/self/limits is unreadable: ulimits unknown")
    return out


def _container(src: Sources) -> dict[str, Any]:
    evidence: list[str] = []
    kinds: list[str] = []

    def saw(kind: str, why: str) -> None:
        evidence.append(why)
        if kind not in kinds:
            kinds.append(kind)

    env = src.environ
    if env.get("KUBERNETES_SERVICE_HOST"):
        saw("kubernetes", "KUBERNETES_SERVICE_HOST is set")
    if src.path("var/run/secrets/kubernetes.io").exists():
        saw("kubernetes", "/var/run/secrets/kubernetes.io exists")
    if src.path(".dockerenv").exists():
        saw("docker", "/.dockerenv exists")
    if src.path("run/.containerenv").exists():
        saw("podman", "/run/.containerenv exists")
    cgroup = (src.read("proc/1/cgroup") or "").lower()
    for word, kind in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"), ("lxc", "lxc"), ("containerd", "containerd")):
        if word in cgroup:
            saw(kind, f"/proc/1/cgroup mentions {word}")
    marker = env.get("container")
    if marker:
        saw(marker[:32] if marker in ("podman", "docker", "lxc", "oci") else "container", f"container={marker[:32]} is set")
    order = ["kubernetes", "docker", "podman", "lxc", "containerd", "oci", "container"]
    kind = min(kinds, key=lambda k: order.index(k) if k in order else len(order)) if kinds else "none"
    return {
        "kind": kind,
        "evidence": evidence[:10],
        "scheduler": "slurm" if env.get("SLURM_JOB_ID") else None,
        "hypervisor": _hypervisor(src),
    }


_HYPERVISORS = ("kvm", "qemu", "vmware", "virtualbox", "xen", "virtual machine", "amazon ec2", "google compute engine",
                "openstack", "bochs", "parallels", "cloud hypervisor")


def _hypervisor(src: Sources) -> str | None:
    vendor = (src.read("sys/class/dmi/id/sys_vendor") or "").strip()
    product = (src.read("sys/class/dmi/id/product_name") or "").strip()
    both = f"{vendor} {product}".strip()
    if any(word in both.lower() for word in _HYPERVISORS):
        return both[:100]
    flags = next((line for line in (src.read("proc/cpuinfo", limit=1 << 16) or "").splitlines() if line.startswith("flags")), "")
    if " hypervisor" in flags:
        return both[:100] or "unknown hypervisor"
    return None


# --- GPUs and InfiniBand -------------------------------------------------------------------------------


def _gpu_commands(src: Sources) -> tuple[str | None, str | None]:
    listing, topology = src.commands([["nvidia-smi", "-L"], ["nvidia-smi", "topo", "-m"]], COMMAND_TIMEOUT_S)
    return listing, topology


def _clean(text: str) -> str:
    """Command output without terminal escapes or other control characters (tabs and newlines kept)."""
    out = []
    i = 0
    while i < len(text) and len(out) < MAX_TEXT:
        ch = text[i]
        if ch == "\x1b":  # skip an escape sequence up to its final letter
            i += 1
            while i < len(text) and not text[i].isalpha():
                i += 1
        elif ch in "\t\n" or ch.isprintable():
            out.append(ch)
        i += 1
    return "".join(out).rstrip()


def visible_devices(value: str | None, total: int | None) -> int | None:
    """How many GPUs CUDA_VISIBLE_DEVICES leaves visible (None when it is unset)."""
    if value is None:
        return total
    items = [v for v in value.split(",") if v.strip()]
    if not items or items[0].strip() in ("-1", "NoDevFiles"):
        return 0
    return len(items) if total is None else min(len(items), total)


def _gpus(src: Sources, texts: tuple[str | None, str | None], notes: list[str]) -> dict[str, Any]:
    listing, topology = texts
    names = [_clean(line) for line in (listing or "").splitlines() if line.startswith("GPU ")][:MAX_ITEMS]
    proc_count = len([n for n in src.listdir("proc/driver/nvidia/gpus")])
    count = len(names) if names else (proc_count or None)
    driver = None
    version_text = src.read("proc/driver/nvidia/version")
    if version_text:
        words = version_text.split()
        if "Module" in words and words.index("Module") + 1 < len(words):
            driver = words[words.index("Module") + 1][:40]
    if listing is None and (proc_count or driver):
        notes.append("nvidia-smi did not answer (missing, failed, or slower than "
                     f"{COMMAND_TIMEOUT_S:g} s): GPU names and topology unknown")
    return {
        "count": count,
        "visible": visible_devices(src.environ.get("CUDA_VISIBLE_DEVICES"), count),
        "names": names,
        "driver": driver,
        "topology": _clean(topology) if topology else None,
    }


def _infiniband(src: Sources) -> list[dict[str, Any]]:
    out = []
    for dev in src.listdir("sys/class/infiniband"):
        base = ("sys/class/infiniband", dev)
        ports = []
        for port in src.listdir(*base, "ports"):
            pbase = (*base, "ports", port)
            ports.append({
                "port": _int(port),
                "state": (src.read(*pbase, "state") or "").strip()[:40] or None,
                "phys_state": (src.read(*pbase, "phys_state") or "").strip()[:40] or None,
                "link_layer": (src.read(*pbase, "link_layer") or "").strip()[:40] or None,
                "rate": (src.read(*pbase, "rate") or "").strip()[:60] or None,
            })
        out.append({
            "name": dev[:64],
            "ports": ports,
            "netdevs": src.listdir(*base, "device", "net"),
            "fw_ver": (src.read(*base, "fw_ver") or "").strip()[:60] or None,
        })
    return out
