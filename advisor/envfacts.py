"""What an env snapshot answers: the fixed questions (framework, framework_version, torch_version,
gpus_per_node, nodes, ...) and a few more facts (NCCL and CUDA versions, containers, the fabric).

Precedence: an answer beats the log, the log beats the snapshot (the log is the job that failed,
the snapshot may come from another shell), and the snapshot beats an inference from message
wording. One exception: when the log only shows the framework a more specific one builds on
(transformers' Trainer lines, but LLaMA-Factory is what is installed), the specific one wins, as
it does between two log detections.
"""

from __future__ import annotations

from typing import Iterable

from advisor.envfile import EnvSnapshot
from advisor.models import FactValue, Facts

# PyPI name -> KB framework id, most specific first
PACKAGE_FRAMEWORK = {
    "llamafactory": "llama-factory", "open-r1": "open-r1", "torchtitan": "torchtitan", "trl": "trl",
    "lightning": "lightning", "pytorch-lightning": "lightning", "transformers": "transformers",
    "accelerate": "accelerate", "deepspeed": "deepspeed",
}
# What installing (or using) a framework brings along: installed beside it, these are not what
# launched the job. llamafactory 0.9.5 requires trl, transformers and accelerate (its METADATA);
# DeepSpeed is an engine transformers, accelerate and Lightning drive.
PULLED_IN = {
    "llama-factory": ("trl", "transformers", "accelerate", "deepspeed"),
    "open-r1": ("trl", "transformers", "accelerate", "deepspeed"),
    "trl": ("transformers", "accelerate", "deepspeed"),
    "transformers": ("accelerate", "deepspeed"),
    "accelerate": ("deepspeed",),
    "lightning": ("deepspeed",),
}
OVERRIDABLE = ("inferred",)


def framework_packages(framework: str) -> list[str]:
    return [pkg for pkg, fw in PACKAGE_FRAMEWORK.items() if fw == framework]


def installed_frameworks(snapshot: EnvSnapshot) -> dict[str, str]:
    """KB framework id -> version, for every framework package the snapshot lists."""
    out: dict[str, str] = {}
    for pkg, fw in PACKAGE_FRAMEWORK.items():
        version = snapshot.package(pkg)
        if version and fw not in out:
            out[fw] = version
    return out


def likely_framework(kb, snapshot: EnvSnapshot) -> tuple[str | None, str]:
    """The one framework the installed packages point to, and why; None when several could be it."""
    from advisor.fixes import framework_chain

    installed = installed_frameworks(snapshot)
    if not installed:
        if snapshot.torch_version:
            return "pytorch", "torch is installed and no training framework is"
        return None, ""
    underneath: set[str] = set()
    for fw in installed:
        if fw in kb.frameworks:
            underneath.update(framework_chain(kb, fw)[1:])
        underneath.update(PULLED_IN.get(fw, ()))
    top = [fw for fw in installed if fw not in underneath and fw in kb.frameworks]
    if len(top) == 1:
        return top[0], f"{top[0]} {installed[top[0]]} is installed, and no framework that builds on it"
    return None, f"several frameworks are installed ({', '.join(sorted(top))})"


def interconnect(snapshot: EnvSnapshot) -> tuple[str | None, str]:
    active = [(d.name, p.link_layer or "") for d in snapshot.infiniband for p in d.ports if (p.state or "").upper().endswith("ACTIVE")]
    if any(name.startswith("efa") for name, _ in active):
        return "efa", "an active EFA device"
    if any(layer.lower() == "infiniband" for _, layer in active):
        return "infiniband", "an active InfiniBand port"
    if any(layer.lower() == "ethernet" for _, layer in active):
        return "roce", "an active RDMA port on Ethernet (RoCE)"
    topology = snapshot.gpus.topology if snapshot.gpus else None
    if topology:
        cells = topology.split()
        if any(c.startswith("NV") and c[2:].isdigit() for c in cells):
            return "nvlink", "nvidia-smi topo -m shows NVLink between GPUs"
        if (snapshot.gpus.count or 0) >= 2 and any(c in ("PIX", "PXB", "PHB", "NODE", "SYS") for c in cells):
            return "pcie", "nvidia-smi topo -m shows only PCIe paths between GPUs"
    return None, ""


def container(snapshot: EnvSnapshot) -> tuple[str | None, str]:
    c = snapshot.container
    if c is None:
        return None, ""
    if c.kind == "kubernetes":
        return "kubernetes", "; ".join(c.evidence[:2])
    if c.kind not in ("none", ""):
        return "docker", "; ".join(c.evidence[:2]) or c.kind
    if c.scheduler == "slurm":
        return "slurm", "SLURM_JOB_ID is set"
    if c.hypervisor:
        return "vm", f"hypervisor: {c.hypervisor}"
    return "bare-metal", "no container, scheduler or hypervisor detected"


def environment_facts(kb, snapshots: list[EnvSnapshot], framework: str | None = None) -> dict[str, FactValue]:
    """Facts the snapshots give (the first snapshot is the node the job starts from)."""
    if not snapshots:
        return {}
    first = snapshots[0]
    where = f"env snapshot {first.name}"
    out: dict[str, FactValue] = {}

    def put(name: str, value, why: str) -> None:
        if value is not None and value != "":
            out[name] = FactValue(value=value, origin="env", detail=f"{where}: {why}" if why else where)

    fw, why = likely_framework(kb, first)
    put("framework", fw, why)
    put("torch_version", first.torch_version, "torch package")
    put("nccl_version", first.nccl_version, first.nccl.source if first.nccl else "")
    put("cuda_version", first.torch.cuda if first.torch else None, "the CUDA torch was built for")
    from advisor.answers import PACKAGE_VERSION_FACTS

    for package, fact in PACKAGE_VERSION_FACTS.items():  # the rules and timers read these by package
        put(fact, first.package(package), f"{package} package")
    if first.gpus is not None:
        gpus = first.gpus.visible if first.gpus.visible is not None else first.gpus.count
        put("gpus_per_node", gpus or None, "GPUs visible to CUDA" if first.gpus.visible is not None else "GPUs on the node")
    kind, why = container(first)
    put("container", kind, why)
    fabric, why = interconnect(first)
    put("interconnect", fabric, why)
    names = {s.name for s in snapshots}
    if len(names) >= 2:
        out["nodes"] = FactValue(value=len(names), origin="env", detail=f"{len(names)} env snapshots: {', '.join(sorted(names))}")
    return out


def framework_version(snapshot: EnvSnapshot, framework: str | None) -> str | None:
    for pkg in framework_packages(framework or ""):
        version = snapshot.package(pkg)
        if version:
            return version
    return None


def apply_environment(kb, facts: Facts, snapshots: Iterable[EnvSnapshot]) -> set[str]:
    """Fill the facts the snapshots know and nothing better already gave; returns the facts set."""
    from advisor.fixes import framework_chain

    snapshots = list(snapshots)
    if not snapshots:
        return set()
    found = environment_facts(kb, snapshots)
    changed: set[str] = set()
    env_fw = found.pop("framework", None)
    current = facts.values.get("framework")
    if env_fw is not None:
        refines = (current is not None and current.origin in ("log", "inferred")
                   and current.value in framework_chain(kb, env_fw.value)[1:])
        if current is None or refines:
            facts.values["framework"] = env_fw
            changed.add("framework")
            version = facts.values.get("framework_version")
            if refines and version is not None and version.origin != "answer":
                facts.values.pop("framework_version")  # it was the version of the framework the log suggested
    effective = facts.get("framework")
    version = facts.values.get("framework_version")
    if effective and (version is None or version.origin in OVERRIDABLE):
        value = framework_version(snapshots[0], effective)
        if value:
            facts.values["framework_version"] = FactValue(
                value=value, origin="env", detail=f"env snapshot {snapshots[0].name}: {effective} package")
            changed.add("framework_version")
    for name, fact in found.items():
        existing = facts.values.get(name)
        if existing is None or existing.value is None or existing.origin in OVERRIDABLE:
            facts.values[name] = fact
            changed.add(name)
    return changed
