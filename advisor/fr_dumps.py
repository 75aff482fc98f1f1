"""Reading Flight Recorder dumps: files, folders or globs; torch's pickle or its JSON; gzip too.

Every torch release from 2.5 writes one of three dump format versions (checked in each release's
headers, torch/csrc/distributed/c10d/NCCLUtils.hpp then FlightRecorder.hpp):

| format | torch | top-level keys besides `entries` | entry keys added |
|---|---|---|---|
| 2.4  | 2.5, 2.6, 2.7 | version, pg_config, pg_status, nccl_comm_state | (base set) |
| 2.9  | 2.8          | + nccl_version | thread_id, thread_name |
| 2.10 | 2.9 - 2.13   | comm_lib_version instead of nccl_version | |

The base entry keys: record_id, pg_id, process_group (name, desc), collective_seq_id, p2p_seq_id,
is_p2p, op_id, profiling_name ("nccl:all_reduce", "gloo:broadcast", "nccl:send 0->1"),
time_created_ns, duration_ms (with TORCH_NCCL_ENABLE_TIMING), input_sizes, input_dtypes,
output_sizes, output_dtypes, state (scheduled / started / completed), time_discovered_started_ns,
time_discovered_completed_ns, retired, timeout_ms, and frames (pickle only). The JSON writer
(`_dump_fr_trace_json`) has no frames, writes pg_status numbers as strings and missing times as 0.
gloo records into the same buffer from torch 2.8, with every entry "scheduled" and its group
configuration filed under an empty name.

Nothing here trusts a file: pickles go through `advisor.safe_pickle`, sizes are capped, and every
field is checked for its type before use. A file that cannot be a dump is a `DumpError` naming it;
an empty, truncated or entry-less dump is read as a `FrDump` whose `problem` says so.
"""

from __future__ import annotations

import glob
import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any, Iterable

from advisor.fr_models import FrDump, FrEntry, FrFrame, FrGroupConfig, FrPgStatus
from advisor.inputs import shown
from advisor.regex import compile_pattern
from advisor.safe_pickle import Limits, UnsafePickle, loads

MAX_FILE_BYTES = 64 << 20
"""a dump file as stored (torch's default 2,000 entries with their stacks take 1-3 MB)."""
MAX_DUMP_BYTES = 64 << 20
"""a dump after gunzip."""
MAX_FILES = 4096
MAX_ENTRIES = 20_000
"""entries kept per dump (the newest): TORCH_FR_BUFFER_SIZE defaults to 2,000."""
MAX_FRAMES = 64
MAX_TENSORS, MAX_DIMS = 64, 16
MAX_GROUPS = 4096
MAX_RANK = 1 << 17
MAX_TEXT = 512
INT64 = 1 << 63

FORMAT_TORCH = {"2.4": "2.5-2.7", "2.9": "2.8", "2.10": "2.9-2.13"}
"""which torch releases write each dump format version (see the table above)."""
_RANK_IN_NAME = compile_pattern(r"(\d+)$", ignore_case=False, wrap=False)
_RANK_LIST = compile_pattern(r"\s*\[[\d,\s]*\]\s*", wrap=False)
_SUFFIXES = (".gz", ".json", ".pkl", ".pickle", ".bin", ".trace", ".dump")
_STATES = {"scheduled", "started", "completed"}


class DumpError(ValueError):
    """A file that cannot be read as a dump; the message names it and says why."""


# --- finding the files ----------------------------------------------------------------------


def rank_from_name(name: str) -> int | None:
    """The rank a dump file's name ends with, after its extensions: nccl_trace_rank_3,
    fr_trace_rank_3.json.gz, rank_3, nccl_trace_rank_node02_3 (torch names dumps prefix + rank)."""
    base = os.path.basename(name)
    lowered = base.lower()
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if lowered.endswith(suffix) and len(lowered) > len(suffix):
                base, lowered = base[: -len(suffix)], lowered[: -len(suffix)]
                changed = True
    m = _RANK_IN_NAME.search(base)
    if m is None or len(m.group(1)) > 7:
        return None
    rank = int(m.group(1))
    return rank if rank < MAX_RANK else None


def find_dump_files(specs: Iterable[str]) -> tuple[list[tuple[int, Path]], list[str]]:
    """(rank, path) for every dump named by `specs` (folders, files, globs), and notes on what was
    skipped. A folder contributes the files in it whose names end in a rank number; a file named
    outright must have one."""
    found: dict[Path, int] = {}
    notes: list[str] = []
    for spec in specs:
        if not spec:
            raise DumpError("--dumps: the path is empty; give a folder of dumps, dump files or a glob")
        paths: list[tuple[Path, bool]] = []
        if any(ch in spec for ch in "*?[") and not os.path.exists(spec):
            matches = sorted(glob.glob(spec, recursive=True))
            if not matches:
                raise DumpError(f"{shown(spec)}: no file matches this pattern")
            paths = [(Path(m), False) for m in matches if os.path.isfile(m)]
        else:
            try:
                st = os.stat(spec)
            except (OSError, ValueError):
                raise DumpError(f"{shown(spec)}: no such file or folder; give the folder the dumps were written to") from None
            if stat.S_ISDIR(st.st_mode):
                try:
                    names = sorted(os.listdir(spec))
                except OSError as exc:
                    raise DumpError(f"{shown(spec)}: cannot list the folder ({exc.strerror or exc})") from None
                paths = [(Path(spec) / n, False) for n in names if not n.startswith(".") and os.path.isfile(os.path.join(spec, n))]
                if not paths:
                    raise DumpError(f"{shown(spec)}: the folder holds no files; give the folder the dumps were written to")
            else:
                paths = [(Path(spec), True)]
        for path, named in paths:
            rank = rank_from_name(path.name)
            if rank is None:
                if named:
                    raise DumpError(f"{shown(str(path))}: the file name does not end in a rank number "
                                    "(torch names dumps <prefix><rank>, e.g. nccl_trace_rank_3); rename it")
                notes.append(f"skipped {shown(path.name)}: its name does not end in a rank number")
                continue
            found.setdefault(path, rank)
            if len(found) > MAX_FILES:
                raise DumpError(f"over {MAX_FILES} dump files: give the dumps of one job")
    if not found:
        raise DumpError("no dump files found (torch names them <prefix><rank>, e.g. nccl_trace_rank_3)")
    return sorted(((rank, path) for path, rank in found.items()), key=lambda rp: (rp[0], str(rp[1]))), notes


def read_dumps(specs: Iterable[str]) -> tuple[list[FrDump], list[str]]:
    """Every dump named by `specs`, one per rank (a pickle is preferred to a JSON of the same rank:
    it has the stacks), plus notes on what was skipped."""
    files, notes = find_dump_files(specs)
    by_rank: dict[int, FrDump] = {}
    for rank, path in files:
        dump = read_dump_file(path, rank)
        have = by_rank.get(rank)
        if have is None or (have.problem and not dump.problem) or (have.format == "json" and dump.format == "pickle" and not dump.problem):
            if have is not None:
                notes.append(f"rank {rank}: {shown(path.name)} used instead of {shown(have.source)}")
            by_rank[rank] = dump
        else:
            notes.append(f"rank {rank}: {shown(path.name)} ignored, {shown(have.source)} is used")
    return [by_rank[r] for r in sorted(by_rank)], notes


# --- one file --------------------------------------------------------------------------------


def read_dump_file(path: Path, rank: int) -> FrDump:
    name = shown(path.name)
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        raise DumpError(f"{name}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise DumpError(f"{name}: not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise DumpError(f"{name}: {st.st_size:,} bytes, over the {MAX_FILE_BYTES >> 20} MiB a dump can be; is it a dump?")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise DumpError(f"{name}: cannot read ({exc.strerror or exc})") from None
    return parse_dump_bytes(raw, rank, path.name)


def parse_dump_bytes(raw: bytes, rank: int, source: str) -> FrDump:
    """A dump from its bytes (gzip, pickle or JSON, told apart by their first bytes)."""
    name = shown(source)
    if raw[:2] == b"\x1f\x8b":
        raw, truncated = _gunzip(raw, name)
        if truncated:
            return _problem(rank, source, "pickle", f"the gzip file breaks off after {len(raw):,} bytes of dump (copied while being written?)")
    if not raw.strip():
        return _problem(rank, source, "pickle", "the file is empty (the dump was never written, or the rank died while writing it)")
    head = raw.lstrip()[:16]
    if head[:1] == b"{" or (head[:1] == b"[" and head[1:].lstrip()[:1] in (b"{", b"[", b"]")):  # not "[rank0]: ..."
        return _parse_json(raw, rank, source, name)
    if raw[:1] == b"\x80" or raw[:1] in (b"(", b"}", b"]"):
        try:
            data = loads(raw, Limits())
        except UnsafePickle as exc:
            message = str(exc)
            if message.startswith("truncated"):
                return _problem(rank, source, "pickle", f"the dump is cut off ({len(raw):,} bytes: {message})")
            raise DumpError(f"{name}: {message}") from None
        return normalize(data, rank, source, "pickle")
    raise DumpError(f"{name}: not a Flight Recorder dump (neither torch's pickle nor its JSON): is it a log? Give logs with --log")


def parse_dump_object(data: Any, rank: int, source: str) -> FrDump:
    """A dump sent as a JSON object (the HTTP API): the same checks as a file's."""
    return normalize(data, rank, source, "json")


def _gunzip(raw: bytes, name: str) -> tuple[bytes, bool]:
    out = bytearray()
    decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        out += decompressor.decompress(raw, MAX_DUMP_BYTES + 1)
    except zlib.error as exc:
        raise DumpError(f"{name}: the gzip data is corrupt ({exc})") from None
    if len(out) > MAX_DUMP_BYTES:
        raise DumpError(f"{name}: over {MAX_DUMP_BYTES >> 20} MiB once decompressed: not a dump this tool reads")
    if decompressor.unused_data[:2] == b"\x1f\x8b":
        raise DumpError(f"{name}: gzip inside gzip: decompress it first")
    return bytes(out), not decompressor.eof


def _parse_json(raw: bytes, rank: int, source: str, name: str) -> FrDump:
    text = raw.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except RecursionError:
        raise DumpError(f"{name}: the JSON nests too deeply to be a dump") from None
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string"):  # it ends mid-value
            return _problem(rank, source, "json", f"the JSON dump is cut off ({len(raw):,} bytes)")
        raise DumpError(f"{name}: not valid JSON ({exc.msg} at character {exc.pos:,})") from None
    except ValueError as exc:  # a number too long to convert
        raise DumpError(f"{name}: not valid JSON ({str(exc)[:120]})") from None
    return normalize(data, rank, source, "json")


def _problem(rank: int, source: str, fmt: str, problem: str) -> FrDump:
    return FrDump(rank=rank, source=source, format=fmt, problem=problem)


# --- from torch's structure to ours ----------------------------------------------------------


def normalize(data: Any, rank: int, source: str, fmt: str) -> FrDump:
    """Check and convert a loaded dump; unknown keys are ignored, wrong types refused by name."""
    name = shown(source)
    if isinstance(data, list):  # the first format (torch 2.2) was a bare list of entries
        data = {"entries": data}
    if not isinstance(data, dict):
        raise DumpError(f"{name}: a {type(data).__name__}, not a Flight Recorder dump (a dict with 'entries')")
    known = {"entries", "version", "pg_config", "pg_status", "nccl_comm_state", "comm_lib_version", "nccl_version"}
    if not known & {k for k in data if isinstance(k, str)}:
        raise DumpError(f"{name}: not a Flight Recorder dump (none of its keys is version, entries or pg_config)")
    notes: list[str] = []
    version = _text(data.get("version"), 16) or None
    raw_entries = data.get("entries", [])
    if not isinstance(raw_entries, list):
        raise DumpError(f"{name}: 'entries' is a {type(raw_entries).__name__}, not a list")
    if len(raw_entries) > MAX_ENTRIES:
        notes.append(f"{len(raw_entries):,} entries: only the newest {MAX_ENTRIES:,} are read")
        raw_entries = raw_entries[-MAX_ENTRIES:]
    frames_seen: dict[int, FrFrame] = {}
    entries: list[FrEntry] = []
    skipped = 0
    for i, raw in enumerate(raw_entries):
        entry = _entry(raw, frames_seen)
        if entry is None:
            skipped += 1
            continue
        entries.append(entry)
    if skipped:
        notes.append(f"{skipped} entr{'y' if skipped == 1 else 'ies'} without a process group, sequence number or operation skipped")
    entries.sort(key=lambda e: e.record_id)
    backends = sorted({e.backend for e in entries if e.backend})
    problem = None
    if not entries:
        problem = ("the dump holds no collectives: the recorder was off (TORCH_FR_BUFFER_SIZE unset or 0) "
                   "or the rank had not communicated yet")
    return FrDump(
        rank=rank, source=source, format=fmt, version=version, torch=FORMAT_TORCH.get(version or ""),
        backend="/".join(backends) or None,
        comm_lib_version=_text(data.get("comm_lib_version") or data.get("nccl_version"), 64) or None,
        pg_config=_pg_config(data.get("pg_config")), pg_status=_pg_status(data.get("pg_status")),
        entries=entries, comm_state=_comm_state(data.get("nccl_comm_state")), problem=problem, notes=notes,
    )


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value[:limit] if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    """An int64 from an int or a numeric string (the JSON writer's pg_status); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and 0 < len(value) <= 20 and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, int) and -INT64 <= value < INT64:
        return value
    return None


def _sizes(value: Any) -> list[list[int]] | None:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_TENSORS:
        return None
    out: list[list[int]] = []
    for dims in value:
        if not isinstance(dims, (list, tuple)) or len(dims) > MAX_DIMS:
            return None
        row = [_int(d) for d in dims]
        if any(d is None for d in row):
            return None
        out.append(row)  # type: ignore[arg-type]
    return out


def _dtypes(value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)):
        return []
    return [_text(v, 32) for v in value[:MAX_TENSORS] if isinstance(v, (str, bytes))]


def _frames(value: Any, seen: dict[int, FrFrame]) -> list[FrFrame]:
    """The stack, innermost first; frame dicts torch shares between entries are converted once."""
    if not isinstance(value, list):
        return []
    out: list[FrFrame] = []
    for raw in value[:MAX_FRAMES]:
        frame = seen.get(id(raw))
        if frame is None:
            if not isinstance(raw, dict):
                continue
            frame = FrFrame.model_construct(name=_text(raw.get("name"), 256), file=_text(raw.get("filename")), line=_int(raw.get("line")))
            seen[id(raw)] = frame
        out.append(frame)
    return out


def _entry(raw: Any, frames_seen: dict[int, FrFrame]) -> FrEntry | None:
    if not isinstance(raw, dict):
        return None
    group = raw.get("process_group")
    if isinstance(group, (list, tuple)) and len(group) == 2:
        pg, desc = _text(group[0], 128), _text(group[1], 128)
    elif isinstance(group, str):
        pg, desc = _text(group, 128), ""
    else:
        return None
    seq = _int(raw.get("collective_seq_id"))
    profiling = _text(raw.get("profiling_name"), 128)
    record = _int(raw.get("record_id"))
    if seq is None or not profiling or record is None:
        return None
    backend, _, name = profiling.partition(":") if ":" in profiling else ("", "", profiling)
    parts = name.split(" ", 1)
    op = parts[0] or "unknown"
    peer = parts[1].strip() if len(parts) == 2 else None
    is_p2p = raw.get("is_p2p")
    if not isinstance(is_p2p, bool):  # older dumps: tell by the operation
        is_p2p = op in ("send", "recv", "recvAnySource")
    state = _text(raw.get("state"), 16)
    # every field is checked above, so the model is built without validating it again (a dump
    # holds thousands of entries per rank)
    return FrEntry.model_construct(
        record_id=record, pg=pg, pg_desc=desc, pg_id=_int(raw.get("pg_id")), seq=seq,
        p2p_seq=_int(raw.get("p2p_seq_id")) or 0, op_id=_int(raw.get("op_id")), is_p2p=is_p2p,
        backend=backend.lower(), op=op, peer=peer,
        input_sizes=_sizes(raw.get("input_sizes")) or [], output_sizes=_sizes(raw.get("output_sizes")) or [],
        input_dtypes=_dtypes(raw.get("input_dtypes")), output_dtypes=_dtypes(raw.get("output_dtypes")),
        state=state if state in _STATES else "",
        created_ns=_int(raw.get("time_created_ns")),
        started_ns=_int(raw.get("time_discovered_started_ns")) or None,
        completed_ns=_int(raw.get("time_discovered_completed_ns")) or None,
        duration_ms=_float(raw.get("duration_ms")), timeout_ms=_int(raw.get("timeout_ms")),
        retired=raw.get("retired") if isinstance(raw.get("retired"), bool) else None,
        frames=_frames(raw.get("frames"), frames_seen),
    )


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if number == number and abs(number) < 1e18 else None


def parse_ranks(value: Any) -> list[int] | None:
    """A group's ranks: torch writes the string "[0, 1, 2]"; read as digits, never evaluated."""
    if isinstance(value, (list, tuple)):
        ranks = [_int(v) for v in value[:65536]]
    elif isinstance(value, str) and len(value) < 1_000_000 and _RANK_LIST.fullmatch(value):
        parts = [p.strip() for p in value.strip()[1:-1].split(",")[:65536]]
        ranks = [int(p) if len(p) <= 7 and p.isdigit() else None for p in parts if p]
    else:
        return None
    if any(r is None or not 0 <= r < MAX_RANK for r in ranks):
        return None
    return sorted(set(ranks))  # type: ignore[arg-type]


def _pg_config(value: Any) -> dict[str, FrGroupConfig]:
    if not isinstance(value, dict):
        return {}
    out: dict[str, FrGroupConfig] = {}
    for key, info in list(value.items())[:MAX_GROUPS]:
        if not isinstance(info, dict):
            continue
        name = _text(info.get("name"), 128) or _text(key, 128)
        out[_text(key, 128)] = FrGroupConfig(name=name, desc=_text(info.get("desc"), 128), ranks=parse_ranks(info.get("ranks")))
    return out


def _pg_status(value: Any) -> dict[str, FrPgStatus]:
    if not isinstance(value, dict):
        return {}
    out: dict[str, FrPgStatus] = {}
    for key, info in list(value.items())[:MAX_GROUPS]:
        if not isinstance(info, dict):
            continue
        out[_text(str(key) if isinstance(key, int) else key, 32)] = FrPgStatus(
            last_enqueued=_int(info.get("last_enqueued_collective")),
            last_started=_int(info.get("last_started_collective")),
            last_completed=_int(info.get("last_completed_collective")),
        )
    return out


def _comm_state(value: Any) -> dict[str, dict[str, str]]:
    if not isinstance(value, dict):
        return {}
    out: dict[str, dict[str, str]] = {}
    for comm, info in list(value.items())[:64]:
        if isinstance(info, dict):
            out[_text(str(comm), 128)] = {_text(str(k), 128): _text(str(v), 256) for k, v in list(info.items())[:64]
                                          if isinstance(k, (str, int)) and isinstance(v, (str, int, float, bool))}
    return out
