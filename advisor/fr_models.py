"""Flight Recorder dumps and what they show, as data.

`FrDump` is one rank's dump after reading (`advisor.fr_dumps`), whatever torch release or format
wrote it; `FlightRecorderSummary` is what the analysis (`advisor.flight_recorder`) found, and is
the `flight_recorder` object of the JSON contract. Only pydantic is imported here, so the
Diagnosis model can hold a summary without importing the analysis.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FrFrame(_Model):
    """One Python stack frame recorded with a collective (pickle dumps only: JSON has none)."""

    name: str
    file: str
    line: int | None = None


class FrEntry(_Model):
    """One recorded collective or point-to-point operation on one rank."""

    record_id: int
    pg: str = Field(description="the process group's name: '0' for the default group, a counter or a hash for others")
    pg_desc: str = ""
    pg_id: int | None = Field(default=None, description="the rank-local id that `pg_status` is keyed by")
    seq: int = Field(description="collective_seq_id: the n-th collective of this group on this rank")
    p2p_seq: int = 0
    op_id: int | None = None
    is_p2p: bool = False
    backend: str = ""
    op: str = Field(description="the operation as torch names it: all_reduce, _allgather_base, send, ...")
    peer: str | None = Field(default=None, description="group-local 'src->dst' of a send or recv")
    input_sizes: list[list[int]] = Field(default_factory=list)
    output_sizes: list[list[int]] = Field(default_factory=list)
    input_dtypes: list[str] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)
    state: Literal["scheduled", "started", "completed", ""] = ""
    created_ns: int | None = None
    started_ns: int | None = None
    completed_ns: int | None = None
    duration_ms: float | None = None
    timeout_ms: int | None = None
    retired: bool | None = None
    frames: list[FrFrame] = Field(default_factory=list)


class FrGroupConfig(_Model):
    name: str
    desc: str = ""
    ranks: list[int] | None = None


class FrPgStatus(_Model):
    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None


class FrDump(_Model):
    """One rank's dump. `problem` is set when the file gave nothing to compare (empty, truncated,
    no entries): that is a finding about the job, not an error."""

    rank: int
    source: str = Field(description="the file (or request field) it came from")
    format: Literal["pickle", "json"] = "pickle"
    version: str | None = Field(default=None, description="the dump format version torch wrote (2.4, 2.9, 2.10, ...)")
    torch: str | None = Field(default=None, description="the torch releases that write this format version")
    backend: str | None = None
    comm_lib_version: str | None = None
    pg_config: dict[str, FrGroupConfig] = Field(default_factory=dict)
    pg_status: dict[str, FrPgStatus] = Field(default_factory=dict)
    entries: list[FrEntry] = Field(default_factory=list)
    comm_state: dict[str, dict[str, str]] = Field(default_factory=dict, description="nccl_comm_state, per communicator")
    problem: str | None = None
    notes: list[str] = Field(default_factory=list)


# --- what the analysis found (the `flight_recorder` object of the JSON contract) -------------------


class FrAt(_Model):
    """A place in the job: the `seq`-th collective of process group `pg`."""

    pg: str
    seq: int
    op: str
    desc: str = ""
    timeout_ms: int | None = None


class FrMismatch(_Model):
    pg: str
    seq: int
    desc: str = ""
    kind: Literal["op", "sizes", "dtypes"] = Field(description="what the ranks disagree on first")
    by_rank: dict[str, dict] = Field(description="per rank: op, sizes (inputs), output_sizes, dtypes, state, where")
    odd_ranks: list[int] = Field(default_factory=list, description="the ranks that issued what the others did not")


class FrGroup(_Model):
    pg: str
    desc: str = ""
    ranks: list[int] = Field(default_factory=list)
    ranks_from: Literal["pg_config", "entries", "world"] = "entries"
    last_seq: dict[str, int] = Field(default_factory=dict, description="per rank: the last collective it entered")
    waiting_in: FrAt | None = None
    behind: list[int] = Field(default_factory=list, description="members with a dump that never entered `waiting_in`")
    missing: list[int] = Field(default_factory=list, description="members without a usable dump")


class FrRank(_Model):
    """Each rank's last collective, as the Ranks picture shows it."""

    rank: int
    dump: Literal["ok", "empty", "unreadable", "missing"]
    status: Literal["waiting", "behind", "mismatch", "in-step", "no-dump", "unknown"]
    last: FrAt | None = None
    state: str = ""
    waits_for: list[int] = Field(default_factory=list)


class FrDumpInfo(_Model):
    rank: int
    file: str
    format: str
    version: str | None = None
    torch: str | None = None
    backend: str | None = None
    entries: int = 0
    problem: str | None = None


class FlightRecorderSummary(_Model):
    ranks_dumped: list[int]
    ranks_missing: list[int]
    process_groups: list[FrGroup]
    first_mismatch: FrMismatch | None = None
    culprits: list[int] = Field(default_factory=list)
    waiting_in: FrAt | None = None
    world_size: int | None = None
    why: dict[str, str] = Field(default_factory=dict, description="per culprit rank: why it is one")
    culprit_frames: dict[str, list[FrFrame]] = Field(default_factory=dict,
                                                     description="per culprit rank: the stack of its last recorded collective, innermost first")
    activity: Literal["save", "eval", "data", "dataloader", "logging"] | None = Field(
        default=None, description="what the culprits' recorded stacks show them doing")
    ranks: list[FrRank] = Field(default_factory=list)
    dumps: list[FrDumpInfo] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
