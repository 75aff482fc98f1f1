"""Comparing the env snapshots of the nodes of one job: what must be the same everywhere.

Ranks on different nodes must run the same torch, NCCL and CUDA builds (NCCL's wire protocol and
torch's collectives assume it), the same framework versions, agree on the rendezvous and world
size, name a socket interface that exists on every node, and have matching MTUs on the links
between them. Clocks far apart make the per-node logs disagree about what happened first.
"""

from __future__ import annotations

from typing import Iterable

from advisor.envfile import EnvSnapshot
from advisor.preflight import Context, Finding, ifname_matches, kb_fix, shell_fix, socket_candidates
from advisor.versions import parse_version

CLOCK_SKEW_S = 5.0

# variables that legitimately differ per node or per process
PER_PROCESS = frozenset({"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "SLURM_PROCID", "SLURM_LOCALID",
                         "SLURM_NODEID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "CUDA_VISIBLE_DEVICES",
                         "NVIDIA_VISIBLE_DEVICES", "TORCHELASTIC_RUN_ID", "NCCL_DEBUG_FILE"})
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT")
SIZES = ("WORLD_SIZE", "NNODES", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NNODES", "NPROC_PER_NODE")


def _table(nodes: list[EnvSnapshot], value) -> dict[str, list[str]]:
    """value -> the nodes that have it (None values are shown as `unset`)."""
    out: dict[str, list[str]] = {}
    for node in nodes:
        v = value(node)
        out.setdefault("unset" if v is None else str(v), []).append(node.name)
    return out


def _spread(table: dict[str, list[str]]) -> str:
    return "; ".join(f"{value} on {', '.join(names)}" for value, names in table.items())


def _release(version: str | None) -> tuple | None:
    parsed = parse_version(version)
    return parsed.release if parsed else None


def compare_nodes(ctx: Context) -> Iterable[Finding]:
    nodes = ctx.nodes
    yield from _versions(ctx, nodes)
    yield from _variables(ctx, nodes)
    yield from _interfaces(ctx, nodes)
    yield from _clocks(nodes)
    yield from _gpus(nodes)


def _versions(ctx: Context, nodes: list[EnvSnapshot]) -> Iterable[Finding]:
    checks = [
        ("torch", lambda n: n.torch_version, "error"),
        ("NCCL", lambda n: n.nccl_version, "error"),
        ("CUDA (torch build)", lambda n: n.torch.cuda if n.torch else None, "error"),
    ]
    packages = sorted({p for n in nodes for p in n.frameworks})
    checks += [(p, (lambda n, p=p: n.package(p)), "warning") for p in packages]
    checks.append(("Python", lambda n: n.python.version if n.python else None, "info"))
    for label, value, severity in checks:
        table = _table(nodes, value)
        known = {v for v in table if v != "unset"}
        if len(known) < 2 and not (known and "unset" in table and severity == "error"):
            continue
        if known and len({_release(v) for v in known}) == 1 and "unset" not in table:
            continue  # the same release with different local tags (+cu124 vs +cu124.post1)
        yield Finding(
            id="versions-differ", code="version-mismatch", severity=severity,
            title=f"{label} differs between the nodes",
            evidence=_spread(table),
            why="Every rank must run the same builds: NCCL's protocol between ranks, torch's collectives and the "
                "frameworks' own synchronisation assume identical versions, and a mismatch hangs or fails at the "
                "first collective, often without naming the versions.",
            fix=kb_fix(ctx, "nccl-cuda-version-mismatch", _first_fix(ctx, "nccl-cuda-version-mismatch"))
            or shell_fix("same-versions", "Install the same versions on every node",
                         "Use one image or one lock file for every node.", ["pip freeze > requirements.lock  # on one node"],
                         ["https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"], kind="upgrade"))


def _first_fix(ctx: Context, cause_id: str) -> str:
    cause = ctx.kb.causes.get(cause_id)
    return cause.fixes[0].id if cause and cause.fixes else ""


def _variables(ctx: Context, nodes: list[EnvSnapshot]) -> Iterable[Finding]:
    names = sorted({k for n in nodes for k in n.env} | {k for n in nodes for k in n.nccl_conf.values})
    for name in names:
        if name in PER_PROCESS:
            continue
        table = _table(nodes, lambda n, name=name: n.variable(name)[0])
        if len(table) < 2:
            continue
        if name in RENDEZVOUS:
            code, severity, why = ("rendezvous-unreachable", "error",
                                   "Every rank must connect to the same rendezvous address and port; a node pointed "
                                   "elsewhere waits for peers that never arrive.")
        elif name in SIZES:
            code, severity, why = ("rank-world-size-misconfig", "error",
                                   "The nodes disagree on the size of the job: some ranks wait for ranks that are not coming.")
        elif name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            code, severity, why = ("wrong-network-interface", "info",
                                   "Different interface names are fine when they are the same network on each node; "
                                   "check each names the cluster network.")
        elif name.startswith(("NCCL_IB_", "NCCL_NET", "NCCL_CROSS_NIC")):
            code, severity, why = ("infiniband-rdma-issue", "warning",
                                   "Nodes that configure the RDMA transport differently may fail to connect their queue "
                                   "pairs or pick different HCAs and GID indices.")
        else:
            code, severity, why = ("collective-mismatch", "warning",
                                   "NCCL and torch expect every rank to run with the same settings; a rank with a different "
                                   "algorithm, protocol, transport or error handling behaves differently in the same collective.")
        yield Finding(
            id="variables-differ", code=code, severity=severity, title=f"{name} differs between the nodes",
            evidence=_spread(table), why=why,
            fix=shell_fix("same-variables", f"Set {name} the same way on every node",
                          "Export it in the one job script every node runs (or unset it everywhere).",
                          [f"export {name}=<the same value on every node>"],
                          ["https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"], kind="config"))
    ranks = _table([n for n in nodes if n.variable("NODE_RANK")[0] is not None], lambda n: n.variable("NODE_RANK")[0])
    for value, owners in ranks.items():
        if len(owners) > 1:
            yield Finding(
                id="node-rank-duplicate", code="rank-world-size-misconfig", severity="error",
                title=f"NODE_RANK={value} on more than one node",
                evidence=f"NODE_RANK={value} on {', '.join(owners)}",
                why="Each node needs its own NODE_RANK (0..N-1); two nodes with the same one claim the same ranks.",
                fix=shell_fix("unique-node-rank", "Give each node its own NODE_RANK",
                              "torchrun --node_rank=<0..N-1> (or NODE_RANK) differs per node; Slurm: use $SLURM_NODEID.",
                              ["export NODE_RANK=$SLURM_NODEID  # under Slurm"],
                              ["https://docs.pytorch.org/docs/stable/elastic/run.html"], kind="config"))


def _interfaces(ctx: Context, nodes: list[EnvSnapshot]) -> Iterable[Finding]:
    with_ifaces = [n for n in nodes if n.interfaces]
    if len(with_ifaces) < 2:
        return
    spec = next((n.variable("NCCL_SOCKET_IFNAME")[0] for n in with_ifaces if n.variable("NCCL_SOCKET_IFNAME")[0]), None)
    physical = lambda n: sorted(i.name for i in socket_candidates(n) if i.kind in ("physical", "infiniband"))  # noqa: E731
    table = _table(with_ifaces, lambda n: ", ".join(physical(n)) or None)
    if spec is None and len(table) > 1:
        routes = [n.default_route for n in with_ifaces if n.default_route]
        prefix = _common_prefix(routes) if len(routes) == len(with_ifaces) else ""
        value = prefix.lstrip("=") if len(prefix.lstrip("=")) >= 2 else "^docker,lo,virbr"
        gloo = prefix[1:] if prefix.startswith("=") else None  # gloo reads exact names only
        yield Finding(
            id="interface-names-differ", code="wrong-network-interface", severity="warning",
            title="The nodes' network interfaces have different names and NCCL_SOCKET_IFNAME is not set",
            evidence=_spread(table),
            why="Each node picks its interface on its own; with different names (and networks) the nodes can pick "
                "networks that do not reach each other. Name the cluster network in a way that holds on every node: "
                "a prefix they share, or an exclusion list.",
            fix=kb_fix(ctx, "wrong-socket-interface", "name-the-interface",
                       values={"NCCL_SOCKET_IFNAME": value, "GLOO_SOCKET_IFNAME": gloo}))
    names = sorted({i.name for n in with_ifaces for i in socket_candidates(n) if i.kind != "loopback"})
    for name in names:
        if spec is not None and not ifname_matches(spec, name):
            continue
        mtus = _table([n for n in with_ifaces if any(i.name == name and i.running for i in n.interfaces)],
                      lambda n, name=name: next((i.mtu for i in n.interfaces if i.name == name), None))
        if len([v for v in mtus if v != "unset"]) < 2:
            continue
        ib = name.startswith("ib")
        yield Finding(
            id="mtu-differs", code="infiniband-rdma-issue" if ib else "wrong-network-interface", severity="warning",
            title=f"The MTU of {name} differs between the nodes",
            evidence="; ".join(f"MTU {v} on {', '.join(o)}" for v, o in mtus.items()),
            why="Packets larger than the smaller MTU are dropped on the way (jumbo frames on one end only): connections "
                "set up fine and then stall on the first large transfer.",
            fix=shell_fix("same-mtu", f"Use one MTU for {name} on every node (and the switches between them)",
                          "Set it in the node's network configuration; check with `ip link show` on every node.",
                          [f"ip link set dev {name} mtu <the same value everywhere>  # as root"],
                          ["https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"], kind="infra"))


def _common_prefix(names: list[str]) -> str:
    """An NCCL_SOCKET_IFNAME value matching every node's default-route interface: `=name` when they
    agree, else their common prefix without trailing digits (`ens` for ens5 and ens6)."""
    if not names:
        return ""
    if len(set(names)) == 1:
        return "=" + names[0]
    first, last = min(names), max(names)
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i]:
        i += 1
    return first[:i].rstrip("0123456789")


def _clocks(nodes: list[EnvSnapshot]) -> Iterable[Finding]:
    times = [(n.time_unix, n.name) for n in nodes if n.time_unix is not None]
    if len(times) < 2:
        return
    (t0, first), (t1, last) = min(times), max(times)
    if t1 - t0 <= CLOCK_SKEW_S:
        return
    yield Finding(
        id="clocks-apart", code="slow-startup-skew", severity="warning",
        title=f"The nodes' clocks (or collection times) are {t1 - t0:,.0f} s apart",
        evidence=f"{first} at {t0:.0f}, {last} at {t1:.0f} (seconds since the epoch)",
        why="Snapshots taken at the same moment (pdsh, srun) should agree within a few seconds. Clocks further apart "
            "make per-node log timestamps disagree, which hides or invents start-up skew between the nodes; if the "
            "snapshots were taken one after another, this is only the time between them.",
        fix=shell_fix("sync-clocks", "Keep the nodes' clocks synchronised", "Run chrony or systemd-timesyncd against "
                      "the same time source on every node; take snapshots together: `srun advisor env -o env.$(hostname).json`.",
                      ["chronyc tracking  # on every node: the offset should be milliseconds"],
                      ["https://chrony-project.org/documentation.html"], kind="infra"))


def _gpus(nodes: list[EnvSnapshot]) -> Iterable[Finding]:
    table = _table(nodes, lambda n: (n.gpus.visible if n.gpus.visible is not None else n.gpus.count) if n.gpus else None)
    known = [v for v in table if v != "unset"]
    if len(known) < 2:
        return
    yield Finding(
        id="gpu-counts-differ", code="rank-world-size-misconfig", severity="warning",
        title="The nodes see different numbers of GPUs",
        evidence="; ".join(f"{v} GPUs on {', '.join(o)}" for v, o in table.items()),
        why="One --nproc_per_node for every node needs the same number of GPUs on each; a node with fewer fails "
            "with an invalid device ordinal, one with more leaves GPUs idle or the world size wrong.",
        fix=shell_fix("same-gpus", "Launch with the GPUs every node has", "Check CUDA_VISIBLE_DEVICES and the scheduler's "
                      "GPU request on each node; use --nproc_per_node equal to the GPUs each node sees.",
                      ["nvidia-smi -L  # on every node"], ["https://docs.pytorch.org/docs/stable/elastic/run.html"],
                      kind="config"))
