"""The env snapshot as data: the schema `advisor env` writes and `suggest --env` / `preflight --env`
(and the HTTP API's `env` object) read back.

Snapshots come from files people copy between machines, edit by hand or build in a bot, so the
model is lenient where that is harmless (unknown fields are ignored, numbers may be strings) and
strict where a value is used (types, sizes, finite numbers). A file that is not a snapshot gets a
one-line error naming the field, never a traceback.
"""

from __future__ import annotations

import json
import math
import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from advisor.inputs import InputError, shown
from advisor.smallfile import read_text_file

SNAPSHOT_KIND = "nccl-advisor-env"
SNAPSHOT_VERSION = "1"
MAX_SNAPSHOT_BYTES = 4 << 20


def _scalar_text(value: Any) -> Any:
    """Environment values are strings; a hand-written `"WORLD_SIZE": 8` means "8"."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


Text = Annotated[str, Field(max_length=4096)]
Name = Annotated[str, Field(max_length=255)]
EnvValue = Annotated[str, BeforeValidator(_scalar_text), Field(max_length=4096)]
Count = Annotated[int, Field(ge=0, le=1_000_000)]


class Lax(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PythonInfo(Lax):
    version: Name | None = None
    implementation: Name | None = None
    executable: Text | None = None


class TorchInfo(Lax):
    version: Name | None = None
    cuda: Name | None = None
    nccl: Name | None = None
    git_version: Name | None = None
    source: Name | None = None
    cuda_available: bool | None = None
    device_count: Count | None = None
    nccl_available: bool | None = None


class NcclInfo(Lax):
    version: Name | None = None
    source: Name | None = None


class NcclConf(Lax):
    files: list[Text] = Field(default_factory=list, max_length=16)
    values: dict[Name, EnvValue] = Field(default_factory=dict)


class Interface(Lax):
    name: Annotated[str, Field(min_length=1, max_length=64)]
    state: Name | None = None
    running: bool | None = None
    kind: Name | None = None
    mtu: Annotated[int, Field(ge=0, le=1 << 20)] | None = None
    speed_mbps: Count | None = None
    addresses: list[Name] = Field(default_factory=list, max_length=256)


class Mount(Lax):
    path: Text
    fstype: Name


class Shm(Lax):
    path: Name = "/dev/shm"
    size_bytes: Annotated[int, Field(ge=0)] | None = None
    free_bytes: Annotated[int, Field(ge=0)] | None = None


class Limit(Lax):
    soft: Annotated[int, Field(ge=-1)] | Literal["unlimited"] | None = None
    hard: Annotated[int, Field(ge=-1)] | Literal["unlimited"] | None = None


class Container(Lax):
    kind: Name = "none"
    evidence: list[Text] = Field(default_factory=list, max_length=32)
    scheduler: Name | None = None
    hypervisor: Name | None = None


class Gpus(Lax):
    count: Count | None = None
    visible: Count | None = None
    names: list[Text] = Field(default_factory=list, max_length=1024)
    driver: Name | None = None
    topology: Annotated[str, Field(max_length=65536)] | None = None


class IBPort(Lax):
    port: Count | None = None
    state: Name | None = None
    phys_state: Name | None = None
    link_layer: Name | None = None
    rate: Name | None = None


class IBDevice(Lax):
    name: Name
    ports: list[IBPort] = Field(default_factory=list, max_length=64)
    netdevs: list[Name] = Field(default_factory=list, max_length=64)
    fw_ver: Name | None = None


class EnvSnapshot(Lax):
    """One machine's environment, as `advisor env --json` prints it."""

    kind: Literal["nccl-advisor-env"] | None = SNAPSHOT_KIND
    version: Name | None = None
    host: Name | None = None
    collected_at: Name | None = None
    time_unix: float | None = Field(default=None, description="seconds since the epoch when it was collected")
    python: PythonInfo | None = None
    torch: TorchInfo | None = None
    nccl: NcclInfo | None = None
    packages: dict[Name, Name] = Field(default_factory=dict)
    frameworks: dict[Name, Name] = Field(default_factory=dict)
    env: dict[Name, EnvValue] = Field(default_factory=dict, description="distributed environment variables, secrets redacted")
    nccl_conf: NcclConf = Field(default_factory=NcclConf)
    interfaces: list[Interface] = Field(default_factory=list, max_length=4096)
    default_route: Name | None = None
    mounts: list[Mount] = Field(default_factory=list, max_length=4096)
    shm: Shm | None = None
    ulimits: dict[Name, Limit] = Field(default_factory=dict)
    container: Container | None = None
    gpus: Gpus | None = None
    infiniband: list[IBDevice] = Field(default_factory=list, max_length=256)
    notes: list[Text] = Field(default_factory=list, max_length=256)
    masked: bool = False
    label: Name | None = Field(default=None, description="what findings call this node (the file name when read from a file)")

    @field_validator("time_unix")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @property
    def name(self) -> str:
        """How findings refer to this node: its label, else its host, else `this machine`."""
        return self.label or self.host or "this machine"

    def variable(self, name: str) -> tuple[str | None, str]:
        """A variable's value and where it came from (the environment first, as NCCL reads them)."""
        if name in self.env:
            return self.env[name], "environment"
        if name in self.nccl_conf.values:
            where = self.nccl_conf.files[0] if self.nccl_conf.files else "nccl.conf"
            return self.nccl_conf.values[name], where
        return None, ""

    def package(self, name: str) -> str | None:
        return self.packages.get(name) or self.frameworks.get(name)

    @property
    def torch_version(self) -> str | None:
        return (self.torch.version if self.torch else None) or self.packages.get("torch")

    @property
    def nccl_version(self) -> str | None:
        return self.nccl.version if self.nccl else None


def snapshot_from_data(data: Any, name: str) -> EnvSnapshot:
    """Validate parsed JSON as a snapshot; InputError names the first bad field."""
    if not isinstance(data, dict):
        raise InputError(f"{name}: not an env snapshot (expected a JSON object); write one with `advisor env -o FILE`")
    kind = data.get("kind")
    if kind is not None and kind != SNAPSHOT_KIND:
        raise InputError(f"{name}: not an env snapshot (kind {shown(str(kind), 60)!r}); write one with `advisor env -o FILE`")
    try:
        return EnvSnapshot.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "the top level"
        raise InputError(f"{name}: field {shown(where, 120)}: {err.get('msg', 'invalid')}; "
                         f"regenerate it with `advisor env -o FILE`") from None


def load_snapshot(path: str) -> EnvSnapshot:
    """An env snapshot file, validated; its label is the file's name (node0.json)."""
    text = read_text_file(path, "env snapshot", MAX_SNAPSHOT_BYTES)
    name = shown(path)
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise InputError(f"{name}: JSON nested too deeply for an env snapshot") from None
    except ValueError as exc:
        raise InputError(f"{name}: not valid JSON ({shown(str(exc), 160)}); write the snapshot with `advisor env -o FILE`") from None
    snapshot = snapshot_from_data(data, name)
    if snapshot.label is None:
        snapshot.label = os.path.basename(path)[:255] or None
    return snapshot


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a number JSON allows")
