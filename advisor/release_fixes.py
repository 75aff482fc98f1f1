"""Fixes that later releases shipped in the part of NCCL that failed in this log.

A log that names its NCCL version (or is dated by NCCL's source lines) and whose WARN lines or error
trail say which part of NCCL failed (socket, IB, bootstrap, proxy, shm, ...; fact `nccl_areas`) can
be checked against NCCL's own release notes (kb/releases/nccl.yaml): every later fix in that part
that names the symptom the log shows (a hang, a crash, a corruption, an error) is a lead the user can
act on (upgrade past it), and the release note's words say what it was. Pure: facts and the KB in, a short list out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.models import LaterFix
from advisor.versions import parse_version

if TYPE_CHECKING:
    from packaging.version import Version

LIMIT = 5
# every NCCL error trail of a failed set-up passes through init.cc: an area too broad to tie a fix to
BROAD_AREAS = frozenset({"init"})
# a fix may also name these without being about another part (set-up, tear-down, the topology search)
GENERIC_AREAS = frozenset({"init", "abort", "topology"})
_CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE", "SIGILL"})


def _newest(value: Any) -> "Version | None":
    """The log's NCCL release (a printed `2.21.5+cuda12.4` or an answer), or the newest of the releases
    that fit its source lines: a fix after the newest is after all of them."""
    values = value if isinstance(value, list) else [value]
    return max((v for v in map(parse_version, values) if v is not None), default=None)


def symptoms_of(facts: dict[str, Any]) -> set[str]:
    """What the log shows NCCL doing wrong, in the release notes' terms."""
    kinds = set(facts.get("failure_kinds") or [])
    out: set[str] = set()
    if kinds & {"timeout", "heartbeat"} or facts.get("no_error_lines") or facts.get("run_outcome") == "hung":
        out.add("hang")
    if facts.get("signal") in _CRASH_SIGNALS:
        out.add("crash")
    if facts.get("wrong_results"):
        out.add("corruption")
    if "nccl-error" in kinds:
        out.add("error")
    return out


def later_nccl_fixes(kb, facts: dict[str, Any], limit: int = LIMIT) -> list[LaterFix]:
    """NCCL's fixes after the log's release in the parts of NCCL its lines come from that name the
    log's symptom, earliest release first (the smallest upgrade that has them)."""
    notes = kb.release_notes.get("nccl")
    version = _newest(facts.get("nccl_version"))
    areas = set(facts.get("nccl_areas") or []) - BROAD_AREAS
    symptoms = symptoms_of(facts)
    if notes is None or version is None or not areas or not symptoms:
        return []
    found: list[LaterFix] = []
    for release in notes.releases:
        if parse_version(release.version) <= version:
            continue
        for fix in release.fixes:
            shared = [a for a in fix.areas if a in areas]
            elsewhere = [a for a in fix.areas if a not in areas and a not in GENERIC_AREAS]
            if not shared or elsewhere or not symptoms.intersection(fix.kinds):
                continue  # not about the part that failed here, or about another part too (RAS's socket)
            url = (f"https://github.com/NVIDIA/nccl/issues/{fix.issues[0]}" if fix.issues
                   else f"https://github.com/NVIDIA/nccl/pull/{fix.prs[0]}" if fix.prs
                   else f"https://github.com/NVIDIA/nccl/releases/tag/{release.tag}")
            found.append(LaterFix(software="nccl", version=release.version, text=fix.text, kinds=list(fix.kinds),
                                  areas=shared, url=url))
    return found[:limit]  # the releases are oldest first, so the smallest upgrade leads
