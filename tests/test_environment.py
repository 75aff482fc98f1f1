"""`advisor env`: the collector against a fake /sys, /proc and environment (tests/fakehost.py), the
snapshot schema, host masking, and the promises: no torch import, no network, nothing secret."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.envfile import EnvSnapshot, snapshot_from_data
from advisor.environment import Sources, collect, parse_nccl_conf, visible_devices
from advisor.inputs import InputError
from fakehost import ENV_FIXTURES, FIXTURE_HOSTS, FakeHost, Iface, snapshot


@pytest.fixture
def node0(tmp_path):
    host = FakeHost()
    return host, collect(host.build(tmp_path))


def by_name(snap: dict) -> dict:
    return {i["name"]: i for i in snap["interfaces"]}


def test_versions_come_from_package_metadata_and_torch_version_py(node0):
    _, s = node0
    assert s["kind"] == "nccl-advisor-env" and s["version"] == "1"
    assert s["host"] == "gpu-node-7" and s["time_unix"] == 1_795_000_000.0
    assert s["collected_at"] == "2026-11-18T11:06:40+00:00"
    assert s["python"] == {"version": "3.11.9", "implementation": "cpython", "executable": "/opt/venv/bin/python"}
    assert s["torch"] == {"version": "2.6.0+cu124", "cuda": "12.4", "nccl": None,
                          "git_version": "2236df1770800ffea5697b11b0bb0d910b2e59e1", "source": "metadata"}
    assert s["nccl"] == {"version": "2.21.5", "source": "nvidia-nccl-cu12 package"}
    assert s["frameworks"] == {"transformers": "4.48.3", "accelerate": "1.3.0", "trl": "0.15.0", "deepspeed": "0.16.3"}
    assert s["packages"]["nvidia-cuda-runtime-cu12"] == "12.4.127"


def test_distributed_variables_only_and_secrets_redacted(node0):
    _, s = node0
    env = s["env"]
    assert "HF_TOKEN" not in env and "PATH" not in env and "HOME" not in env
    assert env["NCCL_IB_API_TOKEN"] == "[REDACTED]"
    assert env["NCCL_P2P_DISABLE"] == "1" and env["RANK"] == "0" and env["MASTER_ADDR"] == "10.0.0.1"
    assert "s3cretvalue" not in json.dumps(s) and "hf_aaaa" not in json.dumps(s)


def test_nccl_conf_is_read_like_nccl(node0):
    _, s = node0
    assert s["nccl_conf"] == {"files": ["/etc/nccl.conf"], "values": {"NCCL_IB_TIMEOUT": "22", "NCCL_SOCKET_NTHREADS": "4"}}
    assert parse_nccl_conf("#NCCL_X=1\nNCCL_A=1=2\nnoequals\n\nNCCL_A=3\n") == {"NCCL_A": "1=2"}


def test_nccl_conf_file_variable_replaces_the_home_file(tmp_path):
    host = FakeHost(nccl_conf=None)
    host.environ["NCCL_CONF_FILE"] = "/opt/site/nccl.conf"
    sources = host.build(tmp_path)
    (tmp_path / "opt/site").mkdir(parents=True)
    (tmp_path / "opt/site/nccl.conf").write_text("NCCL_SOCKET_IFNAME=ib\n")
    (tmp_path / "root").mkdir()
    (tmp_path / "root/.nccl.conf").write_text("NCCL_SOCKET_IFNAME=eth\n")
    s = collect(sources)
    assert s["nccl_conf"] == {"files": ["/opt/site/nccl.conf"], "values": {"NCCL_SOCKET_IFNAME": "ib"}}


def test_interfaces_state_kind_mtu_and_addresses(node0):
    _, s = node0
    ifaces = by_name(s)
    assert sorted(ifaces) == ["docker0", "ens6", "eth0", "lo", "veth1a2b", "virbr0"]
    assert ifaces["eth0"] == {"name": "eth0", "state": "up", "running": True, "kind": "physical", "mtu": 1500,
                              "speed_mbps": 100000, "addresses": ["10.0.0.5/24", "fd00::5/64"]}
    assert ifaces["ens6"]["mtu"] == 9001 and ifaces["ens6"]["addresses"] == ["172.31.4.9/20"]
    assert ifaces["docker0"]["running"] is False and ifaces["docker0"]["kind"] == "bridge"
    assert ifaces["docker0"]["addresses"] == ["172.17.0.1/16"]  # a route covers it even while it is down
    assert ifaces["virbr0"]["running"] is True and ifaces["virbr0"]["kind"] == "bridge"
    assert ifaces["lo"]["kind"] == "loopback" and ifaces["lo"]["addresses"] == ["127.0.0.1/8"]
    assert ifaces["veth1a2b"]["kind"] == "virtual" and ifaces["veth1a2b"]["addresses"] == []
    assert s["default_route"] == "eth0"
    # link-local IPv6 addresses are left out (they carry no route between nodes)
    assert not any(a.startswith("fe80") for i in ifaces.values() for a in i["addresses"])


def test_mounts_skip_pseudo_file_systems_and_never_record_the_source(node0):
    _, s = node0
    assert s["mounts"] == [{"path": "/", "fstype": "overlay"}, {"path": "/dev/shm", "fstype": "tmpfs"},
                           {"path": "/mnt/nfs", "fstype": "nfs4"}, {"path": "/scratch", "fstype": "ext4"},
                           {"path": "/mnt/my data", "fstype": "tmpfs"}]
    assert "nfs.example.com" not in json.dumps(s)


def test_shm_ulimits_container(node0):
    _, s = node0
    assert s["shm"]["size_bytes"] == 64 << 20 and s["shm"]["free_bytes"] < s["shm"]["size_bytes"]
    assert s["ulimits"] == {"nofile": {"soft": 1048576, "hard": 1048576}, "memlock": {"soft": 65536, "hard": 65536}}
    assert s["container"] == {"kind": "docker", "evidence": ["/.dockerenv exists", "/proc/1/cgroup mentions docker"],
                              "scheduler": None, "hypervisor": None}


def test_gpus_topology_and_infiniband(node0):
    host, s = node0
    g = s["gpus"]
    assert g["count"] == 2 and g["visible"] == 2 and g["driver"] == "550.54.15"
    assert g["names"][0].startswith("GPU 0: NVIDIA H100")
    assert "\x1b" not in g["topology"] and g["topology"].startswith("GPU0\tGPU1")
    assert "NV18" in g["topology"]
    assert s["infiniband"] == [{"name": "mlx5_0", "fw_ver": "28.39.1002", "netdevs": ["ib0"], "ports": [
        {"port": 1, "state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "InfiniBand", "rate": "400 Gb/sec (4X NDR)"}]}]
    # both nvidia-smi commands go out in one batch, under a deadline that keeps the collection under 2 s
    (commands, timeout), = host.commands
    assert commands == [["nvidia-smi", "-L"], ["nvidia-smi", "topo", "-m"]] and timeout <= 1.5


def test_nvidia_smi_missing_is_a_note_and_the_driver_still_counts_gpus(tmp_path):
    host = FakeHost(smi=False, gpus=4)
    s = collect(host.build(tmp_path))
    assert s["gpus"]["count"] == 4 and s["gpus"]["names"] == [] and s["gpus"]["topology"] is None
    assert any("nvidia-smi did not answer" in n for n in s["notes"])


def test_a_machine_without_gpus_torch_or_sys(tmp_path):
    sources = Sources(root=tmp_path, environ={}, run=lambda cmds, t: [None] * len(cmds),
                      package_version=lambda name: None, package_file=lambda d, r: None,
                      statvfs=lambda p: (_ for _ in ()).throw(FileNotFoundError(p)), hostname=lambda: "empty",
                      now=lambda: 0.0)
    s = collect(sources)
    assert s["torch"] is None and s["nccl"] is None and s["interfaces"] == [] and s["shm"] is None
    assert s["gpus"] == {"count": None, "visible": None, "names": [], "driver": None, "topology": None}
    assert s["container"]["kind"] == "none"
    assert {"torch is not installed in this Python environment", "/dev/shm is missing or unreadable",
            "no network interfaces under /sys/class/net"} <= set(s["notes"])
    snapshot_from_data(s, "empty")  # still a valid snapshot


def test_deep_asks_torch_in_a_child_process(tmp_path):
    host = FakeHost()
    sources = host.build(tmp_path)
    answer = json.dumps({"version": "2.6.0+cu124", "cuda": "12.4", "nccl": "2.21.5", "cuda_available": True,
                         "device_count": 8, "nccl_available": True})
    smi = sources.run

    def run(commands, timeout):
        if commands[0][:2] == ["/opt/venv/bin/python", "-c"]:
            assert "import json, torch" in commands[0][2] and timeout >= 60
            return ["warning: something\n" + answer + "\n"]
        return smi(commands, timeout)

    sources.run = run
    s = collect(sources, deep=True)
    assert s["torch"]["source"] == "import" and s["torch"]["device_count"] == 8
    assert s["nccl"] == {"version": "2.21.5", "source": "torch.cuda.nccl.version()"}


def test_deep_failure_falls_back_to_metadata_with_a_note(tmp_path):
    host = FakeHost()
    s = collect(host.build(tmp_path), deep=True)  # the fake runner answers None for python -c
    assert s["torch"]["source"] == "metadata" and s["nccl"]["source"] == "nvidia-nccl-cu12 package"
    assert any(n.startswith("--deep:") for n in s["notes"])


def test_mask_hosts(tmp_path):
    host = FakeHost()
    s = collect(host.build(tmp_path), mask_hosts=True)
    text = json.dumps(s)
    assert s["host"] == "[HOST]" and s["masked"] is True
    assert "10.0.0.5" not in text and "10.0.0.1" not in text and "gpu-node-7" not in text
    assert by_name(s)["eth0"]["addresses"] == ["[HOST]/24", "[HOST]/64"]
    assert s["env"]["MASTER_ADDR"] == "[HOST]"
    snapshot_from_data(s, "masked")


@pytest.mark.parametrize("kind, setup", [
    ("kubernetes", lambda h: h.environ.update(KUBERNETES_SERVICE_HOST="10.96.0.1")),
    ("podman", lambda h: setattr(h, "cgroup", "0::/machine.slice/libpod-3f2a.scope\n")),
    ("none", lambda h: setattr(h, "cgroup", "0::/user.slice\n")),
])
def test_container_kinds(tmp_path, kind, setup):
    host = FakeHost(docker=False)
    setup(host)
    assert collect(host.build(tmp_path))["container"]["kind"] == kind


def test_slurm_and_hypervisor(tmp_path):
    host = FakeHost(docker=False, cgroup="")
    host.environ["SLURM_JOB_ID"] = "4242"
    sources = host.build(tmp_path)
    (tmp_path / "sys/class/dmi/id/sys_vendor").write_text("QEMU\n")
    (tmp_path / "sys/class/dmi/id/product_name").write_text("Standard PC (Q35 + ICH9, 2009)\n")
    c = collect(sources)["container"]
    assert c["scheduler"] == "slurm" and c["hypervisor"].startswith("QEMU")


@pytest.mark.parametrize("value, total, expected", [
    (None, 8, 8), ("0,1,2,3", 8, 4), ("", 8, 0), ("-1", 8, 0), ("GPU-a,GPU-b", None, 2), ("0,1,2", 2, 2)])
def test_visible_devices(value, total, expected):
    assert visible_devices(value, total) == expected


def test_interface_without_carrier_file_uses_operstate(tmp_path):
    host = FakeHost(interfaces=[Iface("eth0", carrier=None, ipv4="10.0.0.5/24"),
                                Iface("eth1", state="down", carrier=None, ipv4="10.1.0.5/24")])
    ifaces = by_name(collect(host.build(tmp_path)))
    assert ifaces["eth0"]["running"] is True and ifaces["eth1"]["running"] is False


def test_the_snapshot_validates_and_reads_back(node0, tmp_path):
    _, s = node0
    path = tmp_path / "node0.json"
    path.write_text(json.dumps(s))
    from advisor.envfile import load_snapshot

    snap = load_snapshot(str(path))
    assert isinstance(snap, EnvSnapshot) and snap.name == "node0.json" and snap.host == "gpu-node-7"
    assert snap.torch_version == "2.6.0+cu124" and snap.nccl_version == "2.21.5"
    assert snap.variable("NCCL_IB_TIMEOUT") == ("22", "/etc/nccl.conf")
    assert snap.variable("NCCL_P2P_DISABLE") == ("1", "environment")


@pytest.mark.parametrize("content, says", [
    ("[]", "expected a JSON object"),
    ('{"kind": "something-else"}', "not an env snapshot"),
    ('{"interfaces": [{"name": ""}]}', "field interfaces.0.name"),
    ('{"time_unix": 1e999}', "field time_unix"),
    ('{"shm": {"size_bytes": -5}}', "field shm.size_bytes"),
    ("{not json", "not valid JSON"),
    ('{"time_unix": NaN}', "not valid JSON"),
    ("[" * 100000, "nested too deeply"),
])
def test_bad_snapshot_files_get_one_line_errors(tmp_path, content, says):
    from advisor.envfile import load_snapshot

    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputError) as exc:
        load_snapshot(str(path))
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_committed_fixtures_are_what_the_fake_hosts_give(tmp_path):
    """tests/fixtures/preflight/env/*.json: regenerate with `python tests/fakehost.py --write`."""
    for name, make in FIXTURE_HOSTS.items():
        root = tmp_path / name
        root.mkdir()
        expected = snapshot(make(), root)
        assert json.loads((ENV_FIXTURES / name).read_text()) == expected, name


def test_the_real_machine_gives_a_valid_snapshot():
    """No assertion on content (it is this machine's), only that collection works here and validates."""
    snapshot_from_data(collect(), "this machine")


def test_advisor_env_does_not_import_torch():
    code = ("import sys, io\nfrom advisor.cli import main\nout = io.StringIO()\n"
            "assert main(['env', '--json'], stdout=out) == 0\nimport json; json.loads(out.getvalue())\n"
            "bad = [m for m in ('torch', 'numpy', 'transformers', 'httpx', 'urllib.request') if m in sys.modules]\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_collector_and_the_schema_agree_on_kind_and_version():
    from advisor import envfile, environment

    assert (environment.SNAPSHOT_KIND, environment.SNAPSHOT_VERSION) == (envfile.SNAPSHOT_KIND, envfile.SNAPSHOT_VERSION)
