"""A fake machine for `advisor.environment`: a root folder with the /sys and /proc files the
collector reads, a fake environment, canned `nvidia-smi` output and fake package metadata.

`FakeHost` describes the machine; `build()` writes it under a temporary root and returns the
`Sources` that point the collector at it. The defaults are a GPU node in a Docker container with
the classic traps: a 64 MiB /dev/shm, a running libvirt bridge, stray rank variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from advisor.environment import Sources

NVIDIA_SMI_L = (
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0a1b2c3d-0000-0000-0000-000000000000)\n"
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-0a1b2c3d-0000-0000-0000-000000000001)\n"
)
TOPO = (
    "\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
    "GPU0\t X \tNV18\tPXB\t0-63\t0\n"
    "GPU1\tNV18\t X \tPXB\t0-63\t0\n"
    "NIC0\tPXB\tPXB\t X \t\t\n"
)
TORCH_VERSION_PY = (
    "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
    "__version__ = '2.6.0+cu124'\ndebug = False\ncuda: Optional[str] = '12.4'\n"
    "git_version = '2236df1770800ffea5697b11b0bb0d910b2e59e1'\nhip: Optional[str] = None\n"
)


def _hex_le(addr: str) -> str:
    return "".join(f"{int(p):02X}" for p in reversed(addr.split(".")))


@dataclass
class Iface:
    name: str
    state: str = "up"
    carrier: str | None = "1"
    mtu: int = 1500
    kind: str = "physical"  # physical | bridge | loopback | virtual | infiniband
    ipv4: str | None = None  # "10.0.0.5/24"
    ipv6: str | None = None  # 32 hex digits, prefix
    speed: str = "100000"


@dataclass
class FakeHost:
    hostname: str = "gpu-node-7"
    now: float = 1_795_000_000.0
    interfaces: list[Iface] = field(default_factory=lambda: [
        Iface("lo", state="unknown", mtu=65536, kind="loopback", ipv4="127.0.0.1/8"),
        Iface("eth0", ipv4="10.0.0.5/24", ipv6="fd000000000000000000000000000005"),
        Iface("ens6", ipv4="172.31.4.9/20", mtu=9001),
        Iface("docker0", state="down", carrier="0", kind="bridge", ipv4="172.17.0.1/16"),
        Iface("virbr0", kind="bridge", ipv4="192.168.122.1/24"),
        Iface("veth1a2b", kind="virtual"),
    ])
    default_route: str = "eth0"
    environ: dict[str, str] = field(default_factory=lambda: {
        "PATH": "/usr/bin", "HOME": "/root", "NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": "1",
        "NCCL_ASYNC_ERROR_HANDLING": "1", "RANK": "0", "WORLD_SIZE": "16", "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500", "CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "hf_" + "a" * 34,
        "NCCL_IB_API_TOKEN": "s3cretvalue123456", "NCCL_NET_PLUGIN": "none",
    })
    packages: dict[str, str] = field(default_factory=lambda: {
        "torch": "2.6.0+cu124", "nvidia-nccl-cu12": "2.21.5", "nvidia-cuda-runtime-cu12": "12.4.127",
        "transformers": "4.48.3", "accelerate": "1.3.0", "trl": "0.15.0", "deepspeed": "0.16.3",
    })
    shm_bytes: int = 64 << 20
    memlock: str = "65536"
    docker: bool = True
    cgroup: str = "0::/docker/3f2a\n"
    nccl_conf: str | None = "# site settings\nNCCL_IB_TIMEOUT=22\nNCCL_SOCKET_NTHREADS=4\n"
    infiniband: bool = True
    gpus: int = 2
    smi: bool = True
    mounts: str = ("overlay / overlay rw 0 0\nproc /proc proc rw 0 0\nshm /dev/shm tmpfs rw,size=65536k 0 0\n"
                   "nfs.example.com:/export /mnt/nfs nfs4 rw 0 0\n/dev/nvme0n1 /scratch ext4 rw 0 0\n"
                   "tmpfs /mnt/my\\040data tmpfs rw 0 0\n")
    commands: list = field(default_factory=list)

    def build(self, root: Path) -> Sources:
        def write(rel: str, text: str) -> None:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

        routes = ["Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"]
        trie = ["Main:", "  +-- 0.0.0.0/0 3 0 5"]
        inet6 = []
        for i, iface in enumerate(self.interfaces, 1):
            base = f"sys/class/net/{iface.name}"
            write(f"{base}/operstate", iface.state + "\n")
            if iface.carrier is not None:
                write(f"{base}/carrier", iface.carrier + "\n")
            write(f"{base}/mtu", f"{iface.mtu}\n")
            write(f"{base}/type", {"loopback": "772", "infiniband": "32"}.get(iface.kind, "1") + "\n")
            write(f"{base}/speed", iface.speed + "\n")
            if iface.kind in ("physical", "infiniband"):
                (root / base / "device").mkdir(parents=True)
            if iface.kind == "bridge":
                (root / base / "bridge").mkdir(parents=True)
            if iface.ipv4:
                addr, prefix = iface.ipv4.split("/")
                mask = (0xFFFFFFFF << (32 - int(prefix))) & 0xFFFFFFFF
                net = ".".join(str(b) for b in (int.from_bytes(bytes(int(p) for p in addr.split(".")), "big") & mask).to_bytes(4, "big"))
                mask_text = ".".join(str(b) for b in mask.to_bytes(4, "big"))
                if iface.kind != "loopback":
                    routes.append(f"{iface.name}\t{_hex_le(net)}\t00000000\t0001\t0\t0\t0\t{_hex_le(mask_text)}\t0\t0\t0")
                trie += [f"     +-- {net}/{prefix} 2 0 2", f"        |-- {net}", f"           /{prefix} link UNICAST",
                         f"        |-- {addr}", "           /32 host LOCAL", f"        |-- {net[:-1]}255",
                         "           /32 link BROADCAST"]
            if iface.ipv6:
                inet6.append(f"{iface.ipv6} {i:02x} 40 00 80 {iface.name}")
                inet6.append(f"fe80000000000000020000fffe00000{i % 10} {i:02x} 40 20 80 {iface.name}")
        routes.insert(1, f"{self.default_route}\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0")
        write("proc/net/route", "\n".join(routes) + "\n")
        write("proc/net/fib_trie", "\n".join(trie + ["Local:", "  +-- 0.0.0.0/0 3 0 5"]) + "\n")
        write("proc/net/if_inet6", "\n".join(inet6) + "\n")
        write("proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units     \n"
                                  "Max open files            1048576              1048576              files     \n"
                                  f"Max locked memory         {self.memlock:<20} {self.memlock:<20} bytes     \n")
        write("proc/self/mounts", self.mounts)
        write("proc/1/cgroup", self.cgroup)
        if self.docker:
            write(".dockerenv", "")
        if self.nccl_conf is not None:
            write("etc/nccl.conf", self.nccl_conf)
        write("sys/class/dmi/id/sys_vendor", "Supermicro\n")
        write("sys/class/dmi/id/product_name", "SYS-821GE-TNHR\n")
        if self.infiniband:
            ib = "sys/class/infiniband/mlx5_0"
            write(f"{ib}/ports/1/state", "4: ACTIVE\n")
            write(f"{ib}/ports/1/phys_state", "5: LinkUp\n")
            write(f"{ib}/ports/1/link_layer", "InfiniBand\n")
            write(f"{ib}/ports/1/rate", "400 Gb/sec (4X NDR)\n")
            write(f"{ib}/fw_ver", "28.39.1002\n")
            (root / ib / "device" / "net" / "ib0").mkdir(parents=True)
        if self.gpus:
            write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n")
            for g in range(self.gpus):
                (root / f"proc/driver/nvidia/gpus/0000:{g + 0x18:02x}:00.0").mkdir(parents=True)
        (root / "dev" / "shm").mkdir(parents=True, exist_ok=True)

        host = self

        def run(commands, timeout):
            host.commands.append((commands, timeout))
            out = []
            for args in commands:
                if args[0] == "nvidia-smi" and host.smi and host.gpus:
                    out.append(NVIDIA_SMI_L if args[1:] == ["-L"] else TOPO)
                else:
                    out.append(None)
            return out

        def statvfs(path):
            assert path == str(root / "dev/shm"), path
            blocks = host.shm_bytes // 4096
            return SimpleNamespace(f_frsize=4096, f_bsize=4096, f_blocks=blocks, f_bavail=blocks - 10)

        return Sources(
            root=root, environ=dict(self.environ), run=run, package_version=self.packages.get,
            package_file=lambda dist, rel: TORCH_VERSION_PY if (dist, rel) == ("torch", "torch/version.py") else None,
            statvfs=statvfs, hostname=lambda: host.hostname, now=lambda: host.now,
            python=("3.11.9", "cpython", "/opt/venv/bin/python"),
        )


# --- the committed snapshots (tests/fixtures/preflight/env/*.json) -------------------------------

ENV_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "preflight" / "env"


def second_node() -> FakeHost:
    """node0's partner: another NCCL, other interface names, another MTU, a clock 42 s ahead."""
    return FakeHost(
        hostname="gpu-node-8", now=1_795_000_042.0, default_route="ens5", docker=False, cgroup="0::/\n",
        interfaces=[Iface("lo", state="unknown", mtu=65536, kind="loopback", ipv4="127.0.0.1/8"),
                    Iface("ens5", ipv4="10.0.0.6/24"), Iface("ens6", ipv4="172.31.4.10/20", mtu=1500),
                    Iface("docker0", state="down", carrier="0", kind="bridge", ipv4="172.17.0.1/16")],
        environ={"PATH": "/usr/bin", "HOME": "/root", "NCCL_DEBUG": "INFO", "MASTER_ADDR": "10.0.0.1",
                 "MASTER_PORT": "29500", "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_ASYNC_ERROR_HANDLING": "1"},
        packages={"torch": "2.6.0+cu124", "nvidia-nccl-cu12": "2.26.2", "transformers": "4.48.3", "accelerate": "1.3.0",
                  "trl": "0.15.0", "deepspeed": "0.16.3"},
        shm_bytes=64 << 30, memlock="unlimited")


def clean_node() -> FakeHost:
    """A node without traps: host network named, big /dev/shm, no leftovers, memlock unlimited."""
    return FakeHost(
        hostname="gpu-node-9", docker=False, cgroup="0::/\n", nccl_conf=None,
        interfaces=[Iface("lo", state="unknown", mtu=65536, kind="loopback", ipv4="127.0.0.1/8"),
                    Iface("eth0", ipv4="10.0.0.9/24"), Iface("ens6", ipv4="172.31.4.11/20")],
        environ={"PATH": "/usr/bin", "HOME": "/root", "NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0"},
        packages={"torch": "2.6.0+cu124", "nvidia-nccl-cu12": "2.21.5", "llamafactory": "0.9.5", "transformers": "4.57.1",
                  "accelerate": "1.11.0", "trl": "0.24.0", "peft": "0.18.0"},
        shm_bytes=64 << 30, memlock="unlimited")


FIXTURE_HOSTS = {"node0.json": FakeHost, "node1.json": second_node, "clean.json": clean_node}


def snapshot(host: FakeHost, root: Path) -> dict:
    from advisor.environment import collect

    return collect(host.build(root))


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    for name, make in FIXTURE_HOSTS.items():
        with tempfile.TemporaryDirectory() as tmp:
            text = json.dumps(snapshot(make(), Path(tmp)), indent=2) + "\n"
        if "--write" in sys.argv[1:]:
            ENV_FIXTURES.mkdir(parents=True, exist_ok=True)
            (ENV_FIXTURES / name).write_text(text)
        else:
            sys.stdout.write(f"== {name}\n{text}")
