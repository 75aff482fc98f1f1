"""Preflight: the known traps of a distributed job, caught from its environment and config before
it starts.

Each check names the cause code it prevents (kb/codes.yaml), a severity, its evidence (a config's
file:line, or a variable and the node it was seen on) and a fix in the framework's own format. The
fixes are the knowledge base's own, resolved by advisor.fixes with the same calculators
(advisor.tuning) the diagnosis uses: a save timeout here is the number `advisor suggest` would
give after the job had died of it.

Inputs: env snapshots (advisor/envfile.py; several for a multi-node comparison, see
advisor/multinode.py) and at most one training config (advisor/configs.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

from pydantic import Field

from advisor.configs import TrainingConfig, model_size
from advisor.envfile import EnvSnapshot
from advisor.fixes import framework_chain, resolve_fix
from advisor.models import FactValue, Facts, FixStep, Model, Snippet
from advisor.snippets import OLD_ENV_NAMES, Resolved, render
from advisor.tuning import CALCULATORS
from advisor.versions import version_matches

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}

SHM_MIN_BYTES = 1 << 30
MEMLOCK_MIN_BYTES = 1 << 30
NCCL_SKIPS_VIRBR = ">=2.28.3"  # src/misc/socket.cc: "^docker,lo" up to 2.27.7, "^docker,lo,virbr" from v2.28.3-1
NCCL_SOCKET_SRC = "https://github.com/NVIDIA/nccl/blob/v2.28.3-1/src/misc/socket.cc"
NCCL_PARAM_SRC = "https://github.com/NVIDIA/nccl/blob/v2.28.3-1/src/misc/param.cc"
NCCL_ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
TORCH_ENV_DOC = "https://docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html"
LAUNCHER_MARKERS = ("TORCHELASTIC_RUN_ID", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")

# File systems by what a checkpoint write costs on them (advisor.tuning.WRITE_GBPS's classes).
NETWORK_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "ceph", "cephfs", "fuse.cephfs", "glusterfs",
    "fuse.glusterfs", "beegfs", "wekafs", "fuse.weka", "fuse.juicefs", "fuse.sshfs", "9p", "panfs", "orangefs",
    "pvfs2", "afs", "davfs", "virtiofs",
})
OBJECT_FS = frozenset({"fuse.s3fs", "fuse.gcsfuse", "fuse.mountpoint-s3", "fuse.goofys", "fuse.rclone",
                       "fuse.blobfuse", "fuse.blobfuse2", "fuse.geesefs"})
LOCAL_FS = frozenset({"ext4", "ext3", "ext2", "xfs", "btrfs", "zfs", "f2fs", "overlay", "bcachefs"})


class PreflightFix(FixStep):
    """A fix step (as in the diagnosis) with its snippets in the framework's own format."""

    snippets: list[Snippet] = Field(default_factory=list)


class Finding(Model):
    code: str = Field(description="the cause code (kb/codes.yaml) this trap leads to")
    severity: Severity
    title: str
    evidence: str = Field(description="file:line of the config, or the variable and the node it was seen on")
    fix: PreflightFix | None = None
    id: str = Field(description="the check that found it")
    why: str = ""


class PreflightReport(Model):
    findings: list[Finding] = Field(default_factory=list)


@dataclass
class Context:
    kb: Any
    nodes: list[EnvSnapshot]
    config: TrainingConfig | None = None
    answers: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    facts: Facts | None = None


Check = Callable[[Context], Iterable[Finding]]


def run_preflight(kb, nodes: list[EnvSnapshot], config: TrainingConfig | None = None,
                  answers: dict[str, Any] | None = None) -> tuple[PreflightReport, list[str]]:
    """Every check over the inputs; the findings (errors first) and notes on what was not checked."""
    from advisor.multinode import compare_nodes

    ctx = Context(kb=kb, nodes=list(nodes), config=config, answers=dict(answers or {}))
    ctx.facts = base_facts(ctx)
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(ctx))
    if len(ctx.nodes) >= 2:
        findings.extend(compare_nodes(ctx))
    merged = merge_findings(findings)
    merged.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    return PreflightReport(findings=merged), ctx.notes


def merge_findings(findings: list[Finding]) -> list[Finding]:
    """The same trap on several nodes is one finding whose evidence names each node."""
    out: dict[tuple, Finding] = {}
    for f in findings:
        key = (f.id, f.code, f.severity, f.title)
        if key in out:
            if f.evidence not in out[key].evidence:
                out[key].evidence += "; " + f.evidence
        else:
            out[key] = f.model_copy(deep=True)
    return list(out.values())


# --- shared helpers -------------------------------------------------------------------------------


def base_facts(ctx: Context) -> Facts:
    """What the fixes and calculators may use: versions from the first node, the config's framework
    and model, the user's answers on top."""
    from advisor.envfacts import framework_version, likely_framework

    values: dict[str, FactValue] = {}

    def put(name: str, value: Any, origin: str = "env") -> None:
        if value is not None:
            values[name] = FactValue(value=value, origin=origin)

    node = ctx.nodes[0] if ctx.nodes else None
    framework = ctx.config.framework if ctx.config else (likely_framework(ctx.kb, node)[0] if node else None)
    put("framework", framework, "flag")
    if node is not None:
        put("torch_version", node.torch_version)
        put("nccl_version", node.nccl_version)
        put("framework_version", framework_version(node, framework))
    hosts = {n.name for n in ctx.nodes}
    if len(hosts) >= 2:
        put("nodes", len(hosts))
    if ctx.config is not None:
        size = model_size(ctx.config)
        if size is not None:
            put("model_size_b", size.billions, "flag")
        num_nodes = ctx.config.get("trainer.num_nodes")
        if isinstance(num_nodes, int) and not isinstance(num_nodes, bool) and num_nodes > 0:
            put("nodes", num_nodes, "flag")
    for name, value in ctx.answers.items():
        put(name, value, "answer")
    return Facts(values=values)


def kb_fix(ctx: Context, cause_id: str, fix_id: str, facts: Facts | None = None, values: dict[str, Any] | None = None,
           fmt: str | None = None) -> PreflightFix | None:
    """A KB fix resolved for these facts (its numbers from the same calculators as the diagnosis),
    with `values` replacing the KB's example values (None drops that setting), and only the
    snippets in `fmt` (plus shell)."""
    cause = ctx.kb.causes.get(cause_id)
    fix = next((f for f in cause.fixes if f.id == fix_id), None) if cause else None
    if fix is None:
        return None
    if values:
        settings = [s.model_copy(update={"value": values[s.env or s.knob], "placeholder": False})
                    if (s.env or s.knob) in values else s for s in fix.settings
                    if values.get(s.env or s.knob, "") is not None]
        fix = fix.model_copy(update={"settings": settings})
    step, pairs = resolve_fix(ctx.kb, fix, facts or ctx.facts or Facts())
    return PreflightFix(**step.model_dump(), snippets=_pick_snippets(pairs, fmt, (facts or ctx.facts or Facts()).get("framework")))


def _pick_snippets(pairs: list[tuple[Snippet, list[Resolved]]], fmt: str | None, framework: str | None) -> list[Snippet]:
    if fmt is None:
        return [s for s, _ in pairs]
    chosen = [s for s, _ in pairs if s.format in (fmt, "shell")]
    if not any(s.format == fmt for s in chosen):
        knob = next(((s, items) for s, items in pairs if s.format != "shell"), None)
        if knob is not None:  # a format the KB does not emit (HF TrainingArguments JSON): same items, rendered
            chosen.append(render(fmt, knob[1], framework or knob[0].framework, knob[0].title, {}))
    return chosen


def shell_fix(fix_id: str, title: str, steps: str, lines: list[str], references: list[str], kind: str = "env",
              caveat: str | None = None, settings: dict[str, Any] | None = None) -> PreflightFix:
    content = f"# {title}\n" + "\n".join(lines) + "\n"
    return PreflightFix(id=fix_id, kind=kind, title=title, steps=steps, caveat=caveat, settings=settings or {},
                        references=references,
                        snippets=[Snippet(framework="any", format="shell", language="bash", title=title, content=content)])


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.4g} {unit}"
    return f"{n} B"


def variables(node: EnvSnapshot) -> dict[str, tuple[str, str]]:
    """name -> (value, where): the environment first, then nccl.conf, as NCCL resolves them."""
    out: dict[str, tuple[str, str]] = {}
    for name, value in node.env.items():
        out[name] = (value, f"{name}={value} ({node.name})")
    conf = node.nccl_conf.files[0] if node.nccl_conf.files else "nccl.conf"
    for name, value in node.nccl_conf.values.items():
        out.setdefault(name, (value, f"{name}={value} in {conf} ({node.name})"))
    return out


def config_variables(config: TrainingConfig) -> dict[str, tuple[str, str]]:
    """The `env:` a TRL / Open-R1 recipe exports before training."""
    out = {}
    for name, setting in config.env.items():
        where = f"{config.name}:{setting.line}" if setting.line else config.name
        out[name] = (str(setting.value), f"{where} env.{name}: {setting.value}")
    return out


def variable_sources(ctx: Context) -> list[tuple[dict[str, tuple[str, str]], str | None]]:
    """Every place variables were seen, each with the torch version that reads them."""
    sources = [(variables(n), n.torch_version) for n in ctx.nodes]
    if ctx.config is not None and ctx.config.env:
        sources.append((config_variables(ctx.config), ctx.facts.get("torch_version") if ctx.facts else None))
    return sources


def _truthy(value: str) -> bool:
    return value.strip().lower() not in ("", "0", "false", "no", "off")


# --- network interfaces ------------------------------------------------------------------------------


def ifname_matches(spec: str, name: str) -> bool:
    """NCCL's NCCL_SOCKET_IFNAME matching (src/misc/socket.cc, utils.cc): a comma list of name
    prefixes (`eth,ib`), `^` to exclude them, `=` for exact names; `:port` suffixes are ignored."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    items = [item.split(":", 1)[0] for item in spec.split(",") if item]
    hit = any(name == item if exact else name.startswith(item) for item in items)
    return hit != exclude


def socket_candidates(node: EnvSnapshot) -> list:
    """Running interfaces with an address: what NCCL's interface search can return."""
    return [i for i in node.interfaces if i.running and i.addresses]


def _describe(iface) -> str:
    return f"{iface.name} ({', '.join(iface.addresses[:2])})"


def check_socket_interface(ctx: Context) -> Iterable[Finding]:
    for node in ctx.nodes:
        if not node.interfaces:
            continue
        value, where = node.variable("NCCL_SOCKET_IFNAME")
        running = socket_candidates(node)
        if value is not None and len(value.strip()) > 1:
            if not any(ifname_matches(value, i.name) for i in running):
                yield Finding(
                    id="socket-ifname-no-match", code="wrong-network-interface", severity="error",
                    title=f"NCCL_SOCKET_IFNAME={value} matches no running interface with an address",
                    evidence=f"NCCL_SOCKET_IFNAME={value} ({where}, {node.name}); running: "
                             + (", ".join(_describe(i) for i in running) or "none"),
                    why="NCCL uses only the interfaces NCCL_SOCKET_IFNAME names and fails at start-up with "
                        "\"no socket interface found\" when none of them is up and addressed on this node.",
                    fix=kb_fix(ctx, "wrong-socket-interface", "name-the-interface",
                               values=_ifname_values(_suggest_interface(node, running))))
            continue
        yield from _unset_ifname(ctx, node, running)


def _ifname_values(name: str | None) -> dict[str, Any] | None:
    return {"NCCL_SOCKET_IFNAME": name, "GLOO_SOCKET_IFNAME": name} if name else None


def _suggest_interface(node: EnvSnapshot, candidates: list) -> str | None:
    """The interface to name: the default route's, else the first physical one. A plain name is
    what both NCCL (a prefix) and gloo (an exact name) read."""
    usable = [i for i in candidates if i.kind not in ("loopback", "bridge", "virtual")]
    default = next((i.name for i in usable if i.name == node.default_route), None)
    return default or (usable[0].name if usable else None)


def _unset_ifname(ctx: Context, node: EnvSnapshot, running: list) -> Iterable[Finding]:
    nccl = node.nccl_version
    skips_virbr = version_matches(nccl, NCCL_SKIPS_VIRBR) if nccl else None
    excluded = ("docker", "lo", "virbr") if skips_virbr else ("docker", "lo")
    if any(i.name.startswith("ib") for i in running):
        return  # NCCL takes ib* first: a deterministic choice
    candidates = [i for i in running if not i.name.startswith(excluded)]
    suggestion = _suggest_interface(node, running)
    nccl_text = f"NCCL {nccl}" if nccl else "NCCL version unknown"
    bridges = [i for i in candidates if i.name.startswith(("virbr", "br-"))]
    if bridges:
        virbr = [i for i in bridges if i.name.startswith("virbr")]
        why = ("NCCL picks the first running interface that is not docker* or lo" +
               (" (virbr* is skipped only from NCCL 2.28.3)" if virbr else "") +
               ": a libvirt or docker-compose bridge has an address no other node can reach, so the other ranks "
               "time out connecting to it.")
        yield Finding(
            id="virtual-bridge-interface", code="wrong-network-interface", severity="warning",
            title="NCCL may pick a virtual bridge for its sockets: NCCL_SOCKET_IFNAME is not set",
            evidence=f"{', '.join(_describe(i) for i in bridges)} running on {node.name}; {nccl_text}",
            why=why, fix=kb_fix(ctx, "wrong-socket-interface", "name-the-interface", values=_ifname_values(suggestion)))
    others = [i for i in candidates if i not in bridges]
    nodes_known = ctx.facts.get("nodes") if ctx.facts else None
    if len(others) >= 2 and nodes_known != 1:
        yield Finding(
            id="socket-ifname-unset", code="wrong-network-interface", severity="warning",
            title="Several network interfaces are up and NCCL_SOCKET_IFNAME is not set",
            evidence=f"{', '.join(_describe(i) for i in others)} on {node.name}; NCCL_SOCKET_IFNAME unset",
            why="NCCL takes the first interface it finds; between nodes it must be one the other nodes can reach, and "
                "the same network on every node. Name it so every rank agrees.",
            fix=kb_fix(ctx, "wrong-socket-interface", "name-the-interface", values=_ifname_values(suggestion)))
    if not candidates and any(i.name.startswith("docker") for i in running) and nodes_known != 1:
        docker = [i for i in running if i.name.startswith("docker")]
        yield Finding(
            id="only-docker-interface", code="wrong-network-interface", severity="warning",
            title="The only network NCCL can use here is the docker bridge",
            evidence=f"{', '.join(_describe(i) for i in docker)} on {node.name}; no other running interface",
            why="NCCL falls back to docker* when nothing else is up; a docker bridge address is private to the "
                "host, so ranks on other nodes cannot connect. Run the container with the host's network.",
            fix=kb_fix(ctx, "wrong-socket-interface", "host-network"))


# --- shared memory, memlock -------------------------------------------------------------------------


def check_shm(ctx: Context) -> Iterable[Finding]:
    for node in ctx.nodes:
        shm = node.shm
        if shm is None or shm.size_bytes is None or shm.size_bytes >= SHM_MIN_BYTES:
            continue
        contained = node.container is not None and node.container.kind not in ("none", "")
        where = f"container: {node.container.kind}" if contained else "no container detected"
        fix = kb_fix(ctx, "dev-shm-too-small", "bigger-shm")
        also = kb_fix(ctx, "dev-shm-too-small", "shm-disable")
        if fix is not None and also is not None:
            fix.snippets.extend(also.snippets)
            fix.caveat = f"{also.title}: {also.caveat}"
        yield Finding(
            id="dev-shm-small", code="shm-exhausted", severity="error" if contained else "warning",
            title=f"/dev/shm is {_size(shm.size_bytes)}, below the 1 GiB NCCL needs",
            evidence=f"/dev/shm: {_size(shm.size_bytes)} ({where}, {node.name})",
            why="NCCL passes data between the GPUs of a node through /dev/shm and the DataLoader workers do too; "
                "Docker's default of 64 MB ends in \"failed to extend /dev/shm\" or a bus error.",
            fix=fix)


def check_memlock(ctx: Context) -> Iterable[Finding]:
    for node in ctx.nodes:
        active = [d.name for d in node.infiniband for p in d.ports if (p.state or "").upper().endswith("ACTIVE")]
        limit = node.ulimits.get("memlock")
        soft = limit.soft if limit else None
        if not active or soft is None or soft == "unlimited" or soft == -1 or soft >= MEMLOCK_MIN_BYTES:
            continue
        yield Finding(
            id="memlock-small", code="infiniband-rdma-issue", severity="warning",
            title=f"The locked-memory limit is {_size(int(soft))} on a node with RDMA devices",
            evidence=f"ulimit -l soft {_size(int(soft))} ({node.name}); active RDMA: {', '.join(sorted(set(active)))}",
            why="RDMA registers (pins) communication buffers; with a small memlock limit NCCL's InfiniBand transport "
                "fails to register memory (ibv_reg_mr) or falls back to sockets.",
            fix=shell_fix("unlimited-memlock", "Raise the locked-memory limit to unlimited",
                          "Docker: `--ulimit memlock=-1`; Slurm/hosts: `* soft memlock unlimited` and `* hard memlock unlimited` "
                          "in /etc/security/limits.conf (Slurm: PropagateResourceLimits); check with `ulimit -l` in the job.",
                          ["ulimit -l unlimited  # in the job's shell, where the hard limit allows it"],
                          [NCCL_TROUBLESHOOTING], kind="infra"))


# --- variables: stray ranks, deprecated names, debugging switches -------------------------------------------


def check_stray_rank_variables(ctx: Context) -> Iterable[Finding]:
    for vars_, _ in variable_sources(ctx):
        if any(m in vars_ for m in LAUNCHER_MARKERS):
            continue  # set by torchrun / srun / mpirun for this process: not stray
        stray = [v for v in RANK_VARIABLES if v in vars_]
        if not stray:
            continue
        evidence = "; ".join(vars_[v][1] for v in stray)
        rank, world = vars_.get("RANK", ("", ""))[0], vars_.get("WORLD_SIZE", ("", ""))[0]
        bad = rank.isdigit() and world.isdigit() and int(rank) >= int(world)
        yield Finding(
            id="stray-rank-variables", code="rank-world-size-misconfig", severity="error" if bad else "warning",
            title=("RANK is not below WORLD_SIZE" if bad else "Rank variables are set outside a launcher"),
            evidence=evidence,
            why="torchrun, srun and mpirun set RANK, LOCAL_RANK and WORLD_SIZE for each process they start. Left in a "
                "shell or an image they leak into every launch: Lightning then believes the processes were started "
                "for it and waits for ranks that never come, and scripts that read them join the wrong world.",
            fix=shell_fix("unset-rank-variables", "Unset the stray rank variables before launching",
                          "Remove them from the shell profile, the image's ENV or the job script; let the launcher set them.",
                          [f"unset {' '.join(stray)}"],
                          ["https://github.com/Lightning-AI/pytorch-lightning/issues/5651",
                           "https://docs.pytorch.org/docs/stable/elastic/run.html"], kind="config"))


NEW_NAMES = {old: new for new, old in OLD_ENV_NAMES.items()}


def check_deprecated_names(ctx: Context) -> Iterable[Finding]:
    for vars_, torch in variable_sources(ctx):
        old_torch = bool(torch and version_matches(torch, "<2.2"))
        for old, new in NEW_NAMES.items():
            if old not in vars_ or old_torch:
                continue
            value, where = vars_[old]
            teardown = old == "NCCL_ASYNC_ERROR_HANDLING" and value.strip() == "1"
            lines = [f"unset {old}"] if teardown else [f"export {new}={value}", f"unset {old}"]
            fix = kb_fix(ctx, "deprecated-nccl-env-name", "rename")
            if fix is not None:
                if teardown:
                    fix.title = f"Drop {old}=1 (torch's default, 3, keeps the Flight Recorder dumps working)"
                fix.snippets = [Snippet(framework="any", format="shell", language="bash", title=fix.title,
                                        content=f"# {fix.title}\n" + "\n".join(lines) + "\n")]
            yield Finding(
                id="deprecated-nccl-name", code="benign-warning", severity="warning" if teardown else "info",
                title=(f"{old}=1 overrides torch's default error handling and can stop Flight Recorder dumps" if teardown
                       else f"{old} is deprecated on torch >= 2.2; the name is now {new}"),
                evidence=where + (f"; torch {torch}" if torch else "; torch version unknown"),
                why=("torch >= 2.2 still reads the old name but warns; 1 selects TearDown instead of the default 3 "
                     "(SkipCleanUp), which can keep the watchdog from writing its Flight Recorder dump (pytorch#121055)."
                     if teardown else "torch >= 2.2 reads the old name with a deprecation warning in every rank's log."),
                fix=fix)
        if old_torch:
            for new, old in OLD_ENV_NAMES.items():
                if new in vars_ and old not in vars_:
                    value, where = vars_[new]
                    yield Finding(
                        id="torch-nccl-name-too-new", code="version-mismatch", severity="warning",
                        title=f"torch {torch} ignores {new}: it reads {old}",
                        evidence=f"{where}; torch {torch}",
                        why="The TORCH_NCCL_* names arrived in torch 2.2; older releases read only the NCCL_* ones.",
                        fix=shell_fix("old-name", f"Use the name torch {torch} reads", f"Export {old} instead.",
                                      [f"export {old}={value}"], ["https://github.com/pytorch/pytorch/pull/114077"]))


@dataclass(frozen=True)
class Switch:
    name: str
    severity: Severity
    code: str
    why: str
    when: Callable[[str], bool] = _truthy


SWITCHES = (
    Switch("NCCL_P2P_DISABLE", "warning", "legit-long-collective",
           "GPU-to-GPU copies inside the node go through host shared memory instead of NVLink or PCIe peer-to-peer: "
           "collectives get several times slower, enough for a healthy step to outlast the timeout."),
    Switch("NCCL_SHM_DISABLE", "warning", "legit-long-collective",
           "Intra-node traffic without shared memory (and without P2P) goes over the network stack: slower collectives."),
    Switch("NCCL_IB_DISABLE", "warning", "legit-long-collective",
           "Traffic between nodes falls back from InfiniBand/RoCE to TCP sockets, often ten times slower."),
    Switch("NCCL_BLOCKING_WAIT", "warning", "legit-long-collective",
           "wait() blocks the training thread on every collective (no overlap of communication and compute), and "
           "from torch 2.8 no watchdog thread runs, so no Flight Recorder dump explains a hang."),
    Switch("TORCH_NCCL_BLOCKING_WAIT", "warning", "legit-long-collective",
           "wait() blocks the training thread on every collective (no overlap of communication and compute), and "
           "from torch 2.8 no watchdog thread runs, so no Flight Recorder dump explains a hang."),
    Switch("CUDA_LAUNCH_BLOCKING", "warning", "legit-long-collective",
           "Every CUDA kernel launch waits for the kernel to finish: a debugging aid that makes each step much slower."),
    Switch("TORCH_DISTRIBUTED_DEBUG", "warning", "legit-long-collective",
           "DETAIL checks every collective's shapes on every rank, a synchronising step before each one: slow.",
           lambda v: v.strip().upper() == "DETAIL"),
    Switch("NCCL_DEBUG", "info", "logging-io-straggler",
           "NCCL INFO/TRACE logging writes lines for every communicator and, with TRACE, every call, on every rank; "
           "on slow storage the logging itself holds ranks back.",
           lambda v: v.strip().upper() in ("INFO", "TRACE")),
)


def check_debug_switches(ctx: Context) -> Iterable[Finding]:
    for vars_, _ in variable_sources(ctx):
        rdma = None
        for switch in SWITCHES:
            if switch.name not in vars_ or not switch.when(vars_[switch.name][0]):
                continue
            value, where = vars_[switch.name]
            if switch.name == "NCCL_IB_DISABLE":
                rdma = _has_rdma(ctx)
                if rdma is False:
                    continue  # no RDMA device: the switch changes nothing
            yield Finding(
                id="debug-switch-on", code=switch.code, severity=switch.severity,
                title=f"{switch.name}={value} is a debugging switch left on",
                evidence=where, why=switch.why,
                fix=shell_fix("unset-debug-switch", f"Unset {switch.name} once the debugging is done",
                              "Remove it from the launch script, the image or nccl.conf; keep it only while it is "
                              "the workaround for a problem you have confirmed (and then fix that problem).",
                              [f"unset {switch.name}"], [NCCL_ENV_DOC, TORCH_ENV_DOC], kind="config"))
    config = ctx.config
    if config is not None and config.format == "accelerate-yaml" and config.flag("debug"):
        yield Finding(
            id="debug-switch-on", code="legit-long-collective", severity="info",
            title="accelerate's debug mode is on: every distributed operation is checked first",
            evidence=config.evidence("debug"),
            why="`debug: true` makes accelerate compare tensor shapes across ranks before each gather and reduce: "
                "useful to find a mismatch, slower for every step.",
            fix=_accelerate_debug_off(ctx))


def _accelerate_debug_off(ctx: Context) -> PreflightFix:
    """`debug: false` in the accelerate config, with the key the KB gives accelerate's distributed_debug."""
    spec = ctx.kb.frameworks["accelerate"].knobs["distributed_debug"]
    title = "Turn accelerate's debug mode off once the mismatch is found"
    snippet = render("accelerate-yaml", [Resolved("distributed_debug", spec.key, spec.unit, False)], "accelerate", title, {})
    return PreflightFix(id="accelerate-debug-off", kind="config", title=title, settings={spec.key: False},
                        steps="Set `debug: false` in the accelerate config (and drop `--debug` / ACCELERATE_DEBUG_MODE).",
                        references=list(spec.references), snippets=[snippet])


def _has_rdma(ctx: Context) -> bool | None:
    if not ctx.nodes:
        return None
    return any(d.ports for n in ctx.nodes for d in n.infiniband)


# --- config checks: timeouts, data preparation, TRL, torchtitan metrics -------------------------------------


def knob_key(ctx: Context, knob: str) -> tuple[str | None, Any]:
    """The key a framework's config format uses for an abstract knob (kb/frameworks/*.yaml), and its spec."""
    config = ctx.config
    for fw in framework_chain(ctx.kb, config.framework):
        spec = ctx.kb.frameworks[fw].knobs.get(knob)
        if spec is None:
            continue
        key = spec.keys_by_format.get(config.format, spec.key)
        if config.format == "lightningcli-yaml":
            owner, _, rest = key.partition(".")
            key = f"trainer.strategy.init_args.{rest}" if owner == "strategy" else key
        return key, spec
    return None, None


def lightning_seconds(config: TrainingConfig, key: str) -> float | None:
    """LightningCLI's timedelta, which jsonargparse reads only from "h:m:s" or "d days, h:m:s"."""
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise config._bad(key, 'a quoted "h:mm:ss" string (LightningCLI reads timedelta only in that form)')
    text = value.strip()
    days = 0.0
    if "day" in text:
        head, _, text = text.partition(",")
        try:
            days = float(head.split()[0])
        except (ValueError, IndexError):
            raise config._bad(key, 'a "d days, h:mm:ss" string') from None
    parts = text.strip().split(":")
    try:
        h, m, s = (float(p) for p in parts)
    except ValueError:
        raise config._bad(key, 'a quoted "h:mm:ss" string') from None
    return days * 86400 + h * 3600 + m * 60 + s


def current_timeout(ctx: Context) -> tuple[float | None, str, str]:
    """The collective timeout the config puts in force after start-up: (seconds, key, evidence)."""
    config = ctx.config
    key, spec = knob_key(ctx, "collective_timeout")
    if key is None:
        return None, "", ""
    seconds = lightning_seconds(config, key) if config.format == "lightningcli-yaml" else config.seconds(key)
    if seconds is not None:
        return seconds, key, config.evidence(key)
    default = spec.default
    if not isinstance(default, (int, float)):
        return None, key, ""
    note = spec.default_note or "the framework's default"
    return float(default), key, config.evidence(key, f"default {default:g} s: {note}")


def storage_of(path: str | None, node: EnvSnapshot | None) -> tuple[str | None, str]:
    """Where an absolute path lives, from the node's mount table: network-fs, object-store, tmpfs, local-nvme."""
    if not path or not os.path.isabs(path) or node is None or not node.mounts:
        return None, ""
    norm = os.path.normpath(path)
    best = None
    for mount in node.mounts:
        mp = os.path.normpath(mount.path)
        if mp == "/":
            continue  # a path no mount covers may not exist on this node at all: unknown, not "local"
        if norm == mp or norm.startswith(mp + "/"):
            if best is None or len(mp) > len(os.path.normpath(best.path)):
                best = mount
    if best is None:
        return None, ""
    fs = best.fstype.lower()
    kind = ("network-fs" if fs in NETWORK_FS else "object-store" if fs in OBJECT_FS else "tmpfs" if fs == "tmpfs"
            else "local-nvme" if fs in LOCAL_FS else None)
    return kind, f"{path} is on {best.path} ({best.fstype}, {node.name})"


def _is_peft(config: TrainingConfig) -> bool:
    if config.format == "llamafactory-yaml":
        return (config.text("finetuning_type") or "lora") in ("lora", "oft")  # LLaMA-Factory's default is lora
    if config.format in ("trl-yaml", "openr1-yaml"):
        return config.flag("use_peft") is True
    return False


def _output_dir(config: TrainingConfig) -> str | None:
    if config.format == "torchtitan-toml":
        return os.path.join(config.text("job.dump_folder") or "./outputs", config.text("checkpoint.folder") or "checkpoint")
    if config.format == "torchtitan-python":
        return os.path.join(config.text("dump_folder") or "./outputs", config.text("checkpoint.folder") or "checkpoint")
    if config.format == "lightningcli-yaml":
        return config.text("trainer.default_root_dir")
    return config.text("output_dir")


def save_facts(ctx: Context) -> tuple[Facts, list[str]]:
    """Facts for the save-time calculator, read from the config, the node's mounts and the answers."""
    config = ctx.config
    facts = ctx.facts.model_copy(deep=True)
    evidence: list[str] = []
    size = model_size(config)
    if size is not None and "model_size_b" not in ctx.answers:
        evidence.append(size.evidence)
    if "storage" not in ctx.answers:
        kind, why = storage_of(_output_dir(config), ctx.nodes[0] if ctx.nodes else None)
        if kind:
            facts.values["storage"] = FactValue(value=kind, origin="env")
            evidence.append(why)
    if "saves_optimizer" not in ctx.answers:
        if config.flag("save_only_model") or (config.format == "llamafactory-yaml" and config.text("finetuning_type") == "freeze"):
            facts.values["saves_optimizer"] = FactValue(value=False, origin="flag")
        elif config.format.startswith("torchtitan"):
            facts.values["saves_optimizer"] = FactValue(value=True, origin="flag")
    if config.format.startswith("torchtitan") and "sharded_checkpoint" not in ctx.answers:
        facts.values["sharded_checkpoint"] = FactValue(value=True, origin="flag")  # DCP: every rank writes its shard
    return facts, evidence


def check_save_timeout(ctx: Context) -> Iterable[Finding]:
    config = ctx.config
    if config is None or config.format == "accelerate-yaml":
        return
    if config.format.startswith("torchtitan"):
        if config.flag("checkpoint.enable") is not True:
            return
        if (config.text("checkpoint.async_mode") or "disabled").lower() != "disabled":
            return  # the write happens in the background, outside the collectives
    if _is_peft(config):
        ctx.notes.append("save timeout not checked: the run trains adapters (LoRA), whose checkpoints are small")
        return
    current, key, timeout_evidence = current_timeout(ctx)
    if current is None:
        return
    facts, evidence = save_facts(ctx)
    if not facts.known("model_size_b"):
        ctx.notes.append("save timeout not checked: the model size is not in the config "
                         "(name it with --answer model_size_b=70)")
        return
    calc = CALCULATORS["checkpoint_save_timeout"](facts)
    write_s = calc.used.get("write_s") or 0
    if current >= calc.value:
        return
    severe = current < write_s
    size = facts.get("model_size_b")
    storage = calc.used.get("storage")
    fmt = config.format
    fix = kb_fix(ctx, "save-checkpoint-timeout", "timeout-for-save", facts=facts, fmt=fmt)
    yield Finding(
        id="save-timeout-too-short", code="checkpoint-save-straggler", severity="error" if severe else "warning",
        title=(f"{key} = {current:g} s is shorter than writing a checkpoint of this {size:g} B model takes "
               f"(about {write_s:g} s on {storage})" if severe else
               f"{key} = {current:g} s leaves too little margin to save this {size:g} B model (needs {calc.value} s)"),
        evidence="; ".join([timeout_evidence, *evidence]),
        why=("While one rank writes the checkpoint the others wait in the next collective; the wait is bounded by the "
             "collective timeout, so a save longer than it kills the job at the first checkpoint."
             + (" The storage is assumed to be a network file system: answer storage=local-nvme if it is local."
                if "storage" in calc.missing else "")),
        fix=fix)


def check_data_preparation(ctx: Context) -> Iterable[Finding]:
    config = ctx.config
    if config is None or config.format != "llamafactory-yaml" or config.flag("streaming"):
        return
    current, key, timeout_evidence = current_timeout(ctx)
    need = CALCULATORS["data_prep_timeout"](ctx.facts)
    if current is None or current >= need.value:
        return
    tokenized = config.text("tokenized_path")
    if tokenized and os.path.isdir(tokenized) and os.listdir(tokenized):
        return  # LLaMA-Factory loads it and skips the preprocessing (data/loader.py has_tokenized_data)
    workers = config.seconds("preprocessing_num_workers")
    evidence = [timeout_evidence, config.evidence("tokenized_path", "the dataset is tokenized at every start")]
    if tokenized:
        evidence[-1] = f"{config.evidence('tokenized_path')} (not there yet: the first run tokenizes and saves it)"
    evidence.append(config.evidence("preprocessing_num_workers", "one process tokenizes") if not workers
                    else config.evidence("preprocessing_num_workers"))
    fix = kb_fix(ctx, "dataset-prep-on-main-rank", "preprocess-offline", fmt=config.format)
    also = kb_fix(ctx, "dataset-prep-on-main-rank", "timeout-for-prep", fmt=config.format)
    if fix is not None and also is not None:
        fix.snippets.extend(also.snippets)
        fix.derivations.extend(also.derivations)
        fix.caveat = f"{also.title}: {also.caveat}"
    yield Finding(
        id="data-prep-outlasts-timeout", code="data-preprocessing-straggler", severity="info" if tokenized else "warning",
        title=f"Dataset preprocessing on the main rank can outlast {key} = {current:g} s",
        evidence="; ".join(evidence),
        why="LLaMA-Factory loads and tokenizes the dataset under main_process_first: the other ranks wait in a "
            "barrier, under the collective timeout, until the main rank is done. A large dataset tokenized by one "
            "process takes longer than 30 minutes.",
        fix=fix)


def _trl_is_sft(config: TrainingConfig) -> bool:
    return not any(config.has(k) for k in ("num_generations", "reward_funcs", "use_vllm", "vllm_mode", "beta",
                                              "max_prompt_length", "reward_weights"))


def check_trl_packing(ctx: Context) -> Iterable[Finding]:
    versions = {n.package("trl") for n in ctx.nodes} - {None}
    broken = sorted(v for v in versions if version_matches(v, "==0.15.0"))
    if not broken:
        return
    config = ctx.config
    gpus = [n.gpus.visible if n.gpus and n.gpus.visible is not None else (n.gpus.count if n.gpus else None) for n in ctx.nodes]
    if len(ctx.nodes) == 1 and gpus[0] is not None and gpus[0] <= 1:
        return  # the gather only hangs with more than one process
    fmt = None
    if config is not None:
        if config.framework not in ("trl", "open-r1") or not _trl_is_sft(config):
            return
        if config.flag("packing") is True or config.flag("use_liger") is True:
            return
        fmt = config.format
        evidence = f"trl {broken[0]} installed; " + config.evidence("packing", "SFTConfig's default is False")
    else:
        evidence = f"trl {broken[0]} installed ({', '.join(n.name for n in ctx.nodes if n.package('trl') in broken)}); no config to see packing"
    fix = kb_fix(ctx, "trl-sft-token-accuracy-gather", "upgrade-trl", fmt=fmt)
    also = kb_fix(ctx, "trl-sft-token-accuracy-gather", "packing-on", fmt=fmt)
    if fix is not None and also is not None:
        fix.snippets.extend(also.snippets)
        fix.caveat = f"{also.title}: {also.caveat}"
    yield Finding(
        id="trl-0.15.0-sft-gather", code="framework-version-bug", severity="error" if config is not None else "warning",
        title="TRL 0.15.0's SFTTrainer hangs multi-GPU training without packing",
        evidence=evidence,
        why="SFTTrainer 0.15.0 gathers the full logits across ranks for its token-accuracy metric; without packing "
            "each rank's sequence length differs, so the all-gather never completes (trl#2879, fixed in 0.15.1).",
        fix=fix)


def check_titan_metrics(ctx: Context) -> Iterable[Finding]:
    config = ctx.config
    if config is None or not config.format.startswith("torchtitan"):
        return
    log_freq = config.seconds("metrics.log_freq")
    if log_freq != 1 or config.flag("metrics.enable_tensorboard") is not True:
        return
    dump = config.text("job.dump_folder" if config.format == "torchtitan-toml" else "dump_folder") or "./outputs"
    folder = os.path.join(dump, config.text("metrics.save_tb_folder") or "tb")
    storage, why_storage = storage_of(folder, ctx.nodes[0] if ctx.nodes else None)
    if "storage" in ctx.answers:
        storage, why_storage = ctx.answers["storage"], f"TensorBoard files go to {folder} (answered storage={ctx.answers['storage']})"
    if storage in ("local-nvme", "tmpfs"):
        return
    known = storage in ("network-fs", "object-store")
    fix = kb_fix(ctx, "rank0-logging-io", "log-less-often", fmt=config.format)
    also = kb_fix(ctx, "rank0-logging-io", "local-log-dir")
    if fix is not None and also is not None:
        fix.steps += "\n\n" + also.steps
    evidence = [config.evidence("metrics.log_freq"), config.evidence("metrics.enable_tensorboard"),
                why_storage or f"TensorBoard files go to {folder} (storage unknown: give --env with the node's mounts)"]
    yield Finding(
        id="titan-metrics-every-step", code="logging-io-straggler", severity="warning" if known else "info",
        title="torchtitan writes TensorBoard metrics every step" + (" to a network file system" if known else ""),
        evidence="; ".join(evidence),
        why="After the first step torchtitan bounds every collective by train_timeout_seconds (100 s by default); the "
            "logging rank writing event files to slow shared storage every step falls behind until one wait exceeds it.",
        fix=fix)


CHECKS: tuple[Check, ...] = (
    check_socket_interface, check_shm, check_memlock, check_stray_rank_variables, check_deprecated_names,
    check_debug_switches, check_save_timeout, check_data_preparation, check_trl_packing, check_titan_metrics,
)


def exit_status(report: PreflightReport) -> int:
    """0 when nothing was found, 1 when there are findings (the CLI's 2 and 3 are usage and input errors)."""
    return 1 if report.findings else 0

