"""Numbers for fixes, worked out from the user's facts, with the arithmetic shown.

Each calculator returns the value, one line of arithmetic the user can check, the facts it used
and the facts that would sharpen it (which become guided questions). A value is never smaller than
what the log shows already failed: if a 30-minute timeout expired during a save, 30 minutes is
not enough, whatever the estimate says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from advisor.models import Facts
from advisor.versions import version_matches

# Sustained write bandwidth one writer gets, GB/s: deliberately conservative so the advice holds on
# a busy shared system (a fast local NVMe does more; a congested NFS share does less).
WRITE_GBPS = {"tmpfs": 5.0, "local-nvme": 1.5, "network-fs": 0.4, "object-store": 0.15}
ASSUMED_STORAGE = "network-fs"
WEIGHT_BYTES = 2  # bf16/fp16 weights
ADAM_STATE_BYTES = 12  # fp32 master copy + two Adam moments, per parameter
SAFETY = 3
MARGIN_S = 300
ASSUMED_MODEL_B = 7.0
"""the model size a save estimate assumes when the size is unknown (a typical 1-10 B fine-tune):
the same rule then gives the same number as for a known 7 B model, and says it assumed."""
MAX_TIMEOUT_S = 6 * 3600


@dataclass
class Calculated:
    value: int
    unit: str
    derivation: str
    used: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    note: str | None = None


def _derivation(parts: list[str], value: int) -> str:
    """The steps joined, ending in the value used (said once when the last step already gives it)."""
    text = "; ".join(parts)
    return text if text.endswith(f"= {value} s") else f"{text} -> {value} s"


def _round_up(seconds: float, step: int = 60) -> int:
    return int(math.ceil(seconds / step) * step)


def _failed_timeout_s(facts: Facts) -> int | None:
    ms = facts.get("timeout_ms")
    return int(ms) // 1000 if ms else None


def _floor_from_failure(facts: Facts, value: int, parts: list[str]) -> int:
    failed = _failed_timeout_s(facts)
    if failed and 2 * failed > value:
        parts.append(f"at least 2 x the {failed} s that already expired = {2 * failed} s")
        return 2 * failed
    return value


def save_floor(size_b: float) -> int:
    """The least time any save of a model this size gets, whatever the bandwidth estimate says:
    600 s below 1 B, 1800 s up to 10 B, 3600 s above."""
    return 600 if size_b < 1 else 1800 if size_b <= 10 else 3600


def checkpoint_write(size_b: float, with_optimizer: bool, gbps: float, writers: int) -> tuple[int, float, float]:
    """Bytes per parameter, checkpoint GB, and the seconds the slowest writer needs to write it."""
    per_param = WEIGHT_BYTES + (ADAM_STATE_BYTES if with_optimizer else 0)
    gb = size_b * per_param
    return per_param, gb, gb / (gbps * writers)


def checkpoint_save_timeout(facts: Facts) -> Calculated:
    """A collective timeout long enough for the slowest rank to finish writing a checkpoint."""
    missing: list[str] = []
    size = facts.get("model_size_b")
    if size is None:
        missing.append("model_size_b")
    storage = facts.get("storage")
    if storage not in WRITE_GBPS:
        missing.append("storage")
        storage_used = ASSUMED_STORAGE
    else:
        storage_used = storage
    optimizer = facts.get("saves_optimizer")
    if optimizer is None:
        missing.append("saves_optimizer")
    with_optimizer = optimizer is not False
    sharded = facts.get("sharded_checkpoint") is True
    nodes = int(facts.get("nodes") or 1)
    writers = min(nodes, 8) if sharded else 1
    bw = WRITE_GBPS[storage_used]
    parts: list[str] = []
    size_used = float(size) if size is not None else ASSUMED_MODEL_B
    if size is None:
        parts.append(f"model size unknown, assumed {ASSUMED_MODEL_B:g} B (answer model_size_b)")
    per_param, gb, write_s = checkpoint_write(size_used, with_optimizer, bw, writers)
    estimate = _round_up(SAFETY * write_s + MARGIN_S)
    what = "bf16 weights + fp32 Adam state" if with_optimizer else "bf16 weights only"
    assumed = "" if storage == storage_used else ", assumed"
    parts.append(
        f"{gb:.1f} GB ({size_used:g} B params x {per_param} B/param: {what}) / "
        f"({bw:g} GB/s {storage_used}{assumed} x {writers} writer{'s' if writers > 1 else ''}) = {write_s:.0f} s; "
        f"x {SAFETY} safety + {MARGIN_S} s = {estimate} s"
    )
    floor = save_floor(size_used)
    value = estimate
    if floor > value:
        parts.append(f"at least {floor} s for a {size_used:g} B model")
        value = floor
    value = _floor_from_failure(facts, value, parts)
    note = None
    if value > MAX_TIMEOUT_S:
        note = f"capped at {MAX_TIMEOUT_S} s: a save this slow needs faster storage or sharded saving, not a longer wait"
        parts.append(f"capped at {MAX_TIMEOUT_S} s")
        value = MAX_TIMEOUT_S
    return Calculated(
        value=value, unit="s", derivation=_derivation(parts, value),
        used={"model_size_b": size_used, "storage": storage_used, "saves_optimizer": with_optimizer, "writers": writers,
              "write_s": None if size is None else round(write_s)},
        missing=missing, note=note,
    )


def default_heartbeat_s(torch_version: str | None) -> int:
    """TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC default, read from ProcessGroupNCCL's constructor in the
    released wheels: 120 s in 2.2 (where the monitor is off unless turned on), 600 s in 2.3-2.4, 480 s
    from 2.5 (PR #133028); 600 s when the version is not known."""
    if torch_version and version_matches(torch_version, ">=2.5"):
        return 480
    if torch_version and version_matches(torch_version, ">=2.2,<2.3"):
        return 120
    return 600


def heartbeat_timeout(facts: Facts) -> Calculated:
    """A heartbeat-monitor timeout above the printed one and above the nodes' start-up skew."""
    printed = facts.get("heartbeat_timeout_s")
    base = int(printed) if printed else default_heartbeat_s(facts.get("torch_version"))
    source = "printed in the log" if printed else "the default for this torch version"
    parts = [f"2 x the {base} s heartbeat timeout ({source}) = {2 * base} s"]
    value = 2 * base
    skew = facts.get("startup_skew_s")
    missing = [] if skew is not None else ["startup_skew_s"]
    if skew is not None:
        need = _round_up(float(skew) * 2 + 300)
        parts.append(f"2 x {float(skew):g} s start-up skew + 300 s = {need} s")
        value = max(value, need)
    value = min(_round_up(value), 3600)
    return Calculated(value=value, unit="s", derivation=_derivation(parts, value),
                      used={"heartbeat_timeout_s": base, "startup_skew_s": skew}, missing=missing)


def _stopgap(facts: Facts, minimum: int, label: str, factor: int = 2) -> Calculated:
    failed = _failed_timeout_s(facts) or (int(facts.get("store_timeout_s")) if facts.get("store_timeout_s") else None)
    parts: list[str] = []
    if failed:
        value = max(factor * failed, minimum)
        parts.append(f"{factor} x the {failed} s that expired = {factor * failed} s")
        if minimum > factor * failed:
            parts.append(f"at least {minimum} s for {label}")
    else:
        value = minimum
        parts.append(f"{minimum} s for {label} (the timeout in force is not in the log)")
    value = min(_round_up(value), MAX_TIMEOUT_S)
    return Calculated(value=value, unit="s", derivation=_derivation(parts, value), used={"failed_timeout_s": failed})


def data_prep_timeout(facts: Facts) -> Calculated:
    return _stopgap(facts, 3600, "tokenizing a large dataset on one rank")


def eval_timeout(facts: Facts) -> Calculated:
    return _stopgap(facts, 3600, "generation-heavy evaluation on the slowest rank")


def collective_timeout(facts: Facts) -> Calculated:
    return _stopgap(facts, 1800, "a slow but healthy collective")


def train_timeout_stopgap(facts: Facts) -> Calculated:
    """torchtitan's tight post-step-1 timeout (100 s): a stop-gap while the straggler is fixed."""
    return _stopgap(facts, 300, "a stop-gap above torchtitan's 100 s train timeout", factor=3)


def startup_timeout(facts: Facts) -> Calculated:
    """Init timeout covering the gap between the first and the last rank to arrive."""
    skew = facts.get("startup_skew_s")
    base = _stopgap(facts, 1800, "ranks that arrive minutes apart")
    if skew is None:
        base.missing = ["startup_skew_s"]
        return base
    need = _round_up(float(skew) * 2 + 600)
    if need > base.value:
        steps = base.derivation.rsplit(" -> ", 1)[0]
        base.derivation = _derivation([steps, f"2 x {float(skew):g} s skew + 600 s = {need} s"], need)
        base.value = need
    return base


CALCULATORS: dict[str, Callable[[Facts], Calculated]] = {
    "checkpoint_save_timeout": checkpoint_save_timeout,
    "heartbeat_timeout": heartbeat_timeout,
    "data_prep_timeout": data_prep_timeout,
    "eval_timeout": eval_timeout,
    "collective_timeout": collective_timeout,
    "train_timeout_stopgap": train_timeout_stopgap,
    "startup_timeout": startup_timeout,
}
