"""NCCL's release notes as knowledge: the miner's reading of them, the shipped table, and which later
fixes a log gets shown (those in the part of NCCL that failed, naming the symptom it shows)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisor.diagnose import diagnose
from advisor.facts import nccl_area_of
from advisor.knowledge import load_kb
from advisor.models import DiagnoseRequest
from advisor.release_fixes import later_nccl_fixes, symptoms_of
from advisor.render import render_markdown, render_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "mine"))
import nccl_releases  # noqa: E402


@pytest.fixture(scope="module")
def kb():
    return load_kb()


def _versions(fixes):
    return [f.version for f in fixes]


# --- the miner -----------------------------------------------------------------------------------

def test_fix_items_join_wrapped_lines_and_read_sub_items():
    message = ("2.18.3-1\n\nFix hang with Collnet on bfloat16 on systems with less than one NIC\nper GPU.\n"
               "Fix long initialization time.\nAdd support for DGX Spark.\n"
               "RAS fixes\n * Fix a race condition leading to a crash when generating a RAS report\n"
               "   during communicator initialization (Issues #1669, #1718).\n")
    items = nccl_releases.fix_items(message)
    assert items == ["Fix hang with Collnet on bfloat16 on systems with less than one NIC per GPU.",
                     "Fix long initialization time.",
                     "Fix a race condition leading to a crash when generating a RAS report during communicator "
                     "initialization (Issues #1669, #1718)."]


def test_fix_items_of_an_indented_message():
    # 2.4.x indents the whole body by four spaces
    message = "NCCL 2.4.6-1\n    Added NCCL_IGNORE_CPU_AFFINITY env var.\n    Fix memory leaks; GithubIssue#180\n    Fix LL cleanup hang during long running DL jobs.\n"
    assert nccl_releases.fix_items(message) == ["Fix memory leaks; GithubIssue#180", "Fix LL cleanup hang during long running DL jobs."]


@pytest.mark.parametrize("text, kinds, areas, issues, prs", [
    ("Fix a race condition leading to a crash when generating a RAS report during communicator initialization (Issues #1669, #1718).",
     ["crash"], ["ras", "init"], [1669, 1718], []),
    ("Fix UDS connection failure when using ncclCommSplit. Issue #1185", ["error"], ["split", "uds"], [1185], []),
    ("Fix net/IB error path. Github PR #1164", ["error"], ["ib"], [], [1164]),
    ("Fix Tree+Shared Memory crash. GithubPR#185", ["crash"], ["shm"], [], [185]),
    ("Fixes nccl-tests#37.", [], [], [], []),  # another repository's issue
    ("Fixes a hang on GB200/300 + CX8 when the user disables GDR.", ["hang"], ["ib", "platform"], [], []),
])
def test_describe(text, kinds, areas, issues, prs):
    got = nccl_releases.describe(text)
    assert got["kinds"] == kinds and sorted(got["areas"]) == sorted(areas)
    assert got["issues"] == issues and got["prs"] == prs


@pytest.mark.parametrize("text, keep", [
    ("Fix NVTX3 compilation issues on Debian 10.", False),
    ("Fix compiler warnings with GCC 14.", False),
    ("Fix a typo in a comment (Issue #1236).", False),
    ("Fix bugs", False),
    ("Fix #162", True),
    ("Fix crash when shared memory creation fails.", True),
])
def test_worth_keeping(text, keep):
    assert nccl_releases.worth_keeping(nccl_releases.describe(text)) is keep


# --- the shipped table ---------------------------------------------------------------------------

def test_table_is_ordered_and_holds_known_fixes(kb):
    notes = kb.release_notes["nccl"]
    keys = [tuple(map(int, r.version.split("."))) for r in notes.releases]
    assert keys == sorted(keys) and len(keys) >= 40
    assert all(r.tag.startswith(f"v{r.version}-") for r in notes.releases)
    by_version = {r.version: r for r in notes.releases}
    assert any(1185 in f.issues for f in by_version["2.20.5"].fixes)  # the UDS collision (kb cause nccl-uds-socket-collision)
    assert any(1669 in f.issues and "crash" in f.kinds for f in by_version["2.27.3"].fixes)  # RAS (nccl-ras-crash)


# --- which fixes a log is shown ------------------------------------------------------------------

@pytest.mark.parametrize("path, area", [
    ("transport/net_ib.cc", "ib"), ("misc/ibvwrap.cc", "ib"), ("misc/socket.cc", "socket"), ("include/socket.h", "socket"),
    ("bootstrap.cc", "bootstrap"), ("proxy.cc", "proxy"), ("transport/shm.cc", "shm"), ("ras/client_support.cc", "ras"),
    ("init.cc", "init"), ("enqueue.cc", None),
])
def test_area_of_a_source_file(path, area):
    assert nccl_area_of(path) == area


def test_symptoms():
    assert symptoms_of({"failure_kinds": ["timeout"]}) == {"hang"}
    assert symptoms_of({"no_error_lines": True}) == {"hang"}
    assert symptoms_of({"signal": "SIGSEGV"}) == {"crash"}
    assert symptoms_of({"failure_kinds": ["nccl-error"]}) == {"error"}
    assert symptoms_of({"signal": "SIGTERM"}) == set()  # stopped by someone, not a crash of NCCL


def test_a_crash_fix_in_the_failing_part_after_the_version(kb):
    fixes = later_nccl_fixes(kb, {"nccl_version": "2.11.4", "nccl_areas": ["shm"], "failure_kinds": ["nccl-error"]})
    assert "2.18.3" in _versions(fixes)
    assert any("shared memory creation fails" in f.text for f in fixes)
    assert _versions(fixes) == sorted(_versions(fixes), key=lambda v: tuple(map(int, v.split("."))))


def test_nothing_from_releases_at_or_before_the_version(kb):
    after = later_nccl_fixes(kb, {"nccl_version": "2.18.3", "nccl_areas": ["shm"], "failure_kinds": ["nccl-error"]}, limit=50)
    assert all(tuple(map(int, f.version.split("."))) > (2, 18, 3) for f in after)
    assert not any("shared memory creation fails" in f.text for f in after)  # shipped in 2.18.3 itself
    newest = kb.release_notes["nccl"].releases[-1].version
    assert later_nccl_fixes(kb, {"nccl_version": newest, "nccl_areas": ["ib", "shm", "socket"], "failure_kinds": ["nccl-error", "timeout"]}) == []


def test_a_version_with_a_local_part_reads_as_its_release(kb):
    # NCCL prints `2.18.3+cuda12.1`, and users answer it so: it is 2.18.3, not 2.18
    after = later_nccl_fixes(kb, {"nccl_version": "2.18.3+cuda12.1", "nccl_areas": ["shm"], "failure_kinds": ["nccl-error"]}, limit=50)
    assert not any("shared memory creation fails" in f.text for f in after)
    before = later_nccl_fixes(kb, {"nccl_version": "2.18.1+cuda12.1", "nccl_areas": ["shm"], "failure_kinds": ["nccl-error"]}, limit=50)
    assert any("shared memory creation fails" in f.text for f in before)


def test_a_range_of_releases_counts_from_its_newest(kb):
    facts = {"nccl_version": ["2.7.8", "2.11.4"], "nccl_areas": ["shm"], "failure_kinds": ["nccl-error"]}
    assert all(tuple(map(int, f.version.split("."))) > (2, 11, 4) for f in later_nccl_fixes(kb, facts))
    assert later_nccl_fixes(kb, facts)


@pytest.mark.parametrize("facts", [
    {"nccl_areas": ["shm"], "failure_kinds": ["nccl-error"]},  # no version
    {"nccl_version": "2.11.4", "failure_kinds": ["nccl-error"]},  # no part of NCCL named
    {"nccl_version": "2.11.4", "nccl_areas": ["init"], "failure_kinds": ["nccl-error"]},  # init.cc only: every trail passes it
    {"nccl_version": "2.11.4", "nccl_areas": ["shm"]},  # no symptom
])
def test_near_misses_show_nothing(kb, facts):
    assert later_nccl_fixes(kb, facts) == []


def test_a_fix_about_another_part_too_is_left_out(kb):
    # 2.27.3's "memory corruption ... failed initialization of a RAS socket connection" is RAS's socket
    fixes = later_nccl_fixes(kb, {"nccl_version": "2.20.5", "nccl_areas": ["socket"], "failure_kinds": ["nccl-error"]}, limit=50)
    assert not any("RAS" in f.text for f in fixes)
    platform = later_nccl_fixes(kb, {"nccl_version": "2.4.8", "nccl_areas": ["ib"], "failure_kinds": ["timeout"]}, limit=50)
    assert not any("GB200" in f.text for f in platform)


def test_the_symptom_must_match(kb):
    hang = later_nccl_fixes(kb, {"nccl_version": "2.18.1", "nccl_areas": ["proxy"], "failure_kinds": ["timeout"]}, limit=50)
    assert hang and all("hang" in f.kinds for f in hang)


BOOTSTRAP_LOG = """\
node1:1234:1300 [0] NCCL INFO NCCL version 2.4.2+cuda10.0
node1:1234:1300 [0] misc/socket.cc:484 NCCL WARN Connect to 10.0.0.2<45678> failed : Connection refused
node1:1234:1300 [0] NCCL INFO bootstrap.cc:95 -> 2
node1:1234:1300 [0] NCCL INFO init.cc:1234 -> 2
RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error, NCCL version 2.4.2
"""


def test_a_log_shows_the_fixes_in_every_front_end_format(kb):
    d = diagnose(DiagnoseRequest(log=BOOTSTRAP_LOG), kb)
    assert d.facts["nccl_areas"] == ["socket", "bootstrap", "init"]
    assert any(f.version == "2.9.8" and "bootstrap" in f.text for f in d.later_fixes)
    text = render_text(d)
    assert "Fixed after NCCL 2.4.2 in what failed here (bootstrap)" in text
    assert "2.9.8: Fix crash in bootstrap error case." in text
    assert "Fixed after NCCL 2.4.2" in render_markdown(d)
    assert d.model_dump(mode="json")["later_fixes"][0]["url"].startswith("https://github.com/NVIDIA/nccl/")


def test_a_newer_nccl_shows_none(kb):
    d = diagnose(DiagnoseRequest(log=BOOTSTRAP_LOG.replace("2.4.2", "2.30.7")), kb)
    assert d.later_fixes == []
    assert "Fixed after NCCL" not in render_text(d)


def test_the_log_and_the_notes_name_the_parts_of_nccl_alike(kb):
    """An area the log side names that the miner never tags could never match a fix."""
    from advisor.facts import _NCCL_AREAS

    assert {area for _, area in _NCCL_AREAS} <= set(nccl_releases.AREAS)
    shipped = {a for r in kb.release_notes["nccl"].releases for f in r.fixes for a in f.areas}
    assert shipped <= set(nccl_releases.AREAS)
