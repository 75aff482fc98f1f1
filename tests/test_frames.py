"""Traceback frames date the package that printed them (advisor/frames.py, kb/frames/*.json)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from advisor.diagnose import diagnose, read_log
from advisor.frames import Frame, version_range
from advisor.models import DiagnoseRequest, Facts, FactValue, fact_text
from advisor.questions import _asked_already
from advisor.rules import condition_holds
from advisor.versions import parse_version

ROOT = Path(__file__).resolve().parents[1]
TABLES = sorted((ROOT / "kb" / "frames").glob("*.json"))
sys.path.insert(0, str(ROOT / "tools" / "mine"))
import frames as miner  # noqa: E402  (tools/mine/frames.py)

# transformers 4.38.1 under LLaMA-Factory, failing in the staging-folder clean-up (our dev corpus,
# https://github.com/hiyouga/LlamaFactory/issues/2593)
CASE = yaml.safe_load((ROOT / "benchmarks" / "cases" / "dev" / "llamafactory-2593.yaml").read_text())["log"]
FRAME = re.compile(r'(File "[^"]*/transformers/trainer\.py", line )(\d+)(, in )(\w+)')


def _table(package: str) -> dict:
    return json.loads((ROOT / "kb" / "frames" / f"{package}.json").read_text())


def _span_at(package: str, file: str, func: str, version: str) -> tuple[int, int]:
    table = _table(package)
    index = table["versions"].index(version)
    for span, ranges in table["files"][file][func].items():
        for part in ranges.split(","):
            a, _, b = part.partition("-")
            if int(a) <= index <= int(b or a):
                start, _, end = span.partition("-")
                return int(start), int(end)
    raise AssertionError(f"{func} not in {file} {version}")


def _renumbered(log: str, version: str) -> str:
    """The same traceback as the given release would number it (each frame one line into its function)."""
    return FRAME.sub(lambda m: f"{m[1]}{_span_at('transformers', 'transformers/trainer.py', m[4], version)[0] + 1}{m[3]}{m[4]}", log)


def run(kb, log: str, **answers):
    return diagnose(DiagnoseRequest(log=log, answers={k: str(v) for k, v in answers.items()}), kb)


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_tables_are_well_formed(path):
    table = json.loads(path.read_text())
    versions = [parse_version(v) for v in table["versions"]]
    assert None not in versions and versions == sorted(versions) and len(set(versions)) == len(versions)
    if path.stem == "nccl":  # WARN call sites per release tag (tools/mine/nccl_sites.py)
        assert table["mined_with"] == "tools/mine/nccl_sites.py" and "github.com/NVIDIA/nccl" in table["source"]
        assert table["sites"] and table["trail_sites"]  # WARN calls, and the checks that print the error trail
        for lines in [*table["sites"].values(), *table["trail_sites"].values()]:
            for line, ranges in lines.items():
                assert int(line) > 0
                for part in ranges.split(","):
                    a, _, b = part.partition("-")
                    assert 0 <= int(a) <= int(b or a) < len(versions)
        return
    assert table["package"] == path.stem and table["mined_with"] == "tools/mine/frames.py" and "PyPI" in table["source"]
    assert set(table["files"]) <= set(miner.PACKAGES[path.stem][0])
    for funcs in table["files"].values():
        for by_span in funcs.values():
            for span, ranges in by_span.items():
                start, end = map(int, span.split("-"))
                assert 0 < start <= end
                for part in ranges.split(","):
                    a, _, b = part.partition("-")
                    assert 0 <= int(a) <= int(b or a) < len(versions)


def test_the_staging_cleanup_traceback_dates_transformers_4_38(kb):
    facts = read_log(kb, CASE).facts
    fact = facts.values["transformers_version"]
    assert fact.value == ["4.38.0", "4.38.1", "4.38.2"] and fact.origin == "inferred"
    assert "trainer.py line" in fact.detail and "4.38.0 .. 4.38.2" in fact.detail
    assert fact.basis == "traceback frames"
    d = run(kb, CASE)
    assert d.causes[0].id == "transformers-staging-cleanup-race"


def test_the_same_traceback_numbered_as_4_39_is_not_the_4_38_bug(kb):
    log = _renumbered(CASE, "4.39.0")
    fact = read_log(kb, log).facts.values["transformers_version"]
    assert "4.39.0" in fact.value and not any(v.startswith("4.38.") for v in fact.value)
    assert "transformers-staging-cleanup-race" not in [c.id for c in run(kb, log).causes]


def test_frames_that_contradict_each_other_date_nothing(kb):
    """An edited install or two versions' tracebacks in one log: no version rather than a wrong one."""
    mixed = FRAME.sub(lambda m: f"{m[1]}{m[2] if m[4] != 'train' else 5}{m[3]}{m[4]}", CASE)
    assert "transformers_version" not in read_log(kb, mixed).facts.values


def test_frames_of_unknown_functions_and_other_packages_are_ignored(kb):
    log = ('Traceback (most recent call last):\n'
           '  File "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2555, in my_patched_save\n'
           '  File "/home/me/transformers/examples/train.py", line 12, in main\n'
           'RuntimeError: boom\n')
    assert "transformers_version" not in read_log(kb, log).facts.values


def test_a_printed_version_wins_over_the_frames(kb):
    fact = read_log(kb, "- `transformers` version: 4.36.2\n" + CASE).facts.values["transformers_version"]
    assert fact.value == "4.36.2" and fact.origin == "log"


def test_rich_frames_date_the_package_too(kb):
    rich = "\n".join(f"│ /usr/local/lib/python3.10/dist-packages/transformers/trainer.py:{line} in {func:<30} │"
                     for line, func in re.findall(r"trainer\.py\", line (\d+), in (\w+)", CASE))
    assert read_log(kb, rich).facts.values["transformers_version"].value == ["4.38.0", "4.38.1", "4.38.2"]


@pytest.mark.parametrize("package", [p.stem for p in TABLES if p.stem != "nccl"])
def test_every_release_fits_frames_it_could_print(package):
    """Frames built from one release's own spans always keep that release in the range."""
    table = _table(package)
    for index in range(0, len(table["versions"]), 7):
        version = table["versions"][index]
        frames = []
        for file, funcs in table["files"].items():
            for func in ("train", "_save_checkpoint", "_inner_training_loop", "compute_loss", "training_step", "__init__"):
                if func in funcs:
                    try:
                        start, end = _span_at(package, file, func, version)
                    except AssertionError:
                        continue
                    frames.append(Frame(package, file, (start + end) // 2, func))
        found = version_range(frames)
        assert found is None or version in found.versions, (version, found)


@pytest.mark.parametrize("package, marker", [("transformers", "/transformers/trainer.py"), ("accelerate", "/accelerate/accelerator.py")])
def test_recorded_hf_logs_are_dated_to_the_release_that_printed_them(kb, package, marker):
    """Logs printed by the real Trainer and accelerate (repro/, versions as in the manifest) fit their release."""
    manifest = yaml.safe_load((ROOT / "kb" / "recorded" / "manifest.yaml").read_text())
    dated = 0
    for run_ in manifest["runs"]:
        text = (ROOT / "kb" / "recorded" / run_["log"]).read_text(errors="replace")
        if marker not in text:
            continue
        printed = run_.get("recorded_with", manifest["recorded_with"])[package]  # a run of another stack has its own
        fact = read_log(kb, text).facts.values.get(f"{package}_version")
        assert fact is not None and printed in fact.value, (run_["id"], fact)
        dated += 1
    assert dated >= 5


@pytest.mark.parametrize("spec, held", [(">=4.38.0,<4.39.0", True), (">=4.39.0", False), (">=4.38.1", None)])
def test_a_release_range_holds_only_when_every_release_agrees(spec, held):
    assert condition_holds("transformers_version", ["4.38.0", "4.38.1", "4.38.2"], spec) is held


def test_a_range_that_straddles_a_bound_is_still_asked(kb):
    question = kb.questions["transformers_version"]
    wide = Facts(values={"transformers_version": FactValue(value=["4.37.2", "4.38.0"], origin="inferred")})
    one = Facts(values={"transformers_version": FactValue(value=["4.38.1"], origin="inferred")})
    inside = Facts(values={"transformers_version": FactValue(value=["4.38.0", "4.38.2"], origin="inferred")})
    assert not _asked_already(question, wide, set(), kb)  # 4.38.0 is a bound the KB draws
    assert _asked_already(question, one, set(), kb)
    assert _asked_already(question, inside, set(), kb)  # no cause's condition tells 4.38.0 from 4.38.2


def test_a_range_reads_as_a_range():
    assert fact_text(["4.38.0", "4.38.1", "4.38.2"]) == "4.38.0 .. 4.38.2"
    assert fact_text(["5.23.0"]) == "5.23.0" and fact_text(True) == "True" and fact_text("2.4") == "2.4"


def test_the_miner_reads_spans_and_writes_ranges():
    source = "def a():\n    pass\n\nclass K:\n    def a(self):\n        def inner():\n            return 1\n        return inner\n"
    assert miner.spans(source) == {"a": [(1, 2), (5, 8)], "inner": [(6, 7)]}
    assert miner._ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


def test_recorded_logs_are_dated_to_the_torch_that_printed_them(kb):
    """Every recorded run went through torch.distributed: its frames must keep the torch it ran."""
    manifest = yaml.safe_load((ROOT / "kb" / "recorded" / "manifest.yaml").read_text())
    dated = 0
    for run_ in manifest["runs"]:
        printed = run_.get("recorded_with", manifest["recorded_with"])["torch"].split("+")[0]
        fact = read_log(kb, (ROOT / "kb" / "recorded" / run_["log"]).read_text(errors="replace")).facts.values.get("torch_version")
        if fact is not None and fact.origin == "inferred" and isinstance(fact.value, list):
            assert printed in fact.value, (run_["id"], fact.value)
            dated += 1
    assert dated >= 50


def test_a_torch_range_drives_the_version_dependent_advice():
    """A range reads as unknown where its releases disagree, and decides where they agree."""
    from advisor.tuning import default_heartbeat_s
    from advisor.versions import version_matches

    assert version_matches(["2.4.0", "2.4.1"], "<2.5") is True
    assert version_matches(["2.4.1", "2.5.0"], ">=2.5") is None
    assert default_heartbeat_s(["2.6.0", "2.7.0"]) == default_heartbeat_s("2.6.0")


TRUNCATED = "compute-2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n"
# a configuration warning whose WARN call sits at transport/shm.cc:433 in 2.19.1-2.20.5 only
SHM_LOCALITY = "compute-2:4827:6901 [4] transport/shm.cc:433 NCCL WARN Ignoring SHM locality, must be 1 (sender side) or 2 (receiver side, default)\n"


def test_nccl_warning_lines_date_nccl(kb):
    """bootstrap.cc:77 holds a WARN in 2.19.1-2.22.3: that straddles the tag-reuse bug (fixed in
    2.21.5), so the version is still asked; with shm.cc:433 (2.19.1-2.20.5) the bug's releases are certain."""
    fact = read_log(kb, TRUNCATED).facts.values["nccl_version"]
    assert fact.value[0] == "2.19.1" and fact.value[-1] == "2.22.3" and "bootstrap.cc:77" in fact.detail
    assert fact.basis == "NCCL source lines"
    d = run(kb, TRUNCATED)
    assert "nccl_version" in [q.id for q in d.questions]
    both = SHM_LOCALITY + TRUNCATED
    assert read_log(kb, both).facts.values["nccl_version"].value[-1] == "2.20.5"
    d = run(kb, both)
    assert d.causes[0].id == "nccl-bootstrap-tag-reuse" and "nccl_version" not in [q.id for q in d.questions]


def test_nccl_sites_that_fit_nothing_or_the_oldest_release_date_nothing(kb):
    # a known file whose line holds no WARN in any mined release (a patched build)
    assert "nccl_version" not in read_log(kb, "h:1:1 [0] bootstrap.cc:3 NCCL WARN whatever\n").facts.values
    # include/shm.h:48 is a WARN from 2.4.2, the oldest mined, to 2.11.4: older builds may fit as well
    old = "h:1:1 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-6c6b-0-1-0 (size 9637888)\n"
    assert "nccl_version" not in read_log(kb, old).facts.values
    # misc/ibvwrap.cc:63 is a WARN from 2.4.6 to 2.10.3, not in 2.4.2: that bounds it on both sides
    ibv = "h:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
    assert read_log(kb, ibv).facts.values["nccl_version"].value[0] == "2.4.6"
    # a network plugin's own file is not NCCL's
    assert "nccl_version" not in read_log(kb, "h:1:1 [0] nccl_ofi_net.c:412 NCCL WARN NET/OFI oops\n").facts.values
    # the banner wins
    banner = "h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" + TRUNCATED
    assert read_log(kb, banner).facts.values["nccl_version"].value == "2.21.5"


# NCCL 2.25.1's bootstrap failing an accept (src/misc/socket.cc and src/bootstrap.cc at v2.25.1-1):
# the WARN at socket.cc:71 sits there in 2.24.3 .. 2.29.7; the checks the error passes on its way up
# (NCCLCHECK at socket.cc:80/474/628, bootstrap.cc:701, NCCLCHECKGOTO at init.cc:1402) fit 2.25.1 only
ACCEPT_TRAIL = """\
node1:1234:1290 [0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.0.0.9<36138>
node1:1234:1290 [0] NCCL INFO misc/socket.cc:80 -> 6
node1:1234:1290 [0] NCCL INFO misc/socket.cc:474 -> 6
node1:1234:1290 [0] NCCL INFO misc/socket.cc:628 -> 6
node1:1234:1290 [0] NCCL INFO bootstrap.cc:701 -> 6
node1:1234:1290 [0] NCCL INFO init.cc:1402 -> 6
"""


def test_an_nccl_error_trail_dates_nccl(kb):
    warn_only = read_log(kb, ACCEPT_TRAIL.splitlines()[0] + "\n").facts.values["nccl_version"].value
    assert warn_only[0] == "2.24.3" and len(warn_only) > 5
    fact = read_log(kb, ACCEPT_TRAIL).facts.values["nccl_version"]
    assert fact.value == ["2.25.1"] and fact.basis == "NCCL source lines" and "(error trail)" in fact.detail
    # with the version known, the bootstrap bug fixed in 2.27.3 is no longer held back for it
    d = run(kb, ACCEPT_TRAIL)
    stray = next(c for c in d.causes if c.id == "nccl-bootstrap-stray-connection")
    assert not stray.unconfirmed
    # a trail line where no release has a check dates nothing
    assert "nccl_version" not in read_log(kb, "h:1:1 [0] NCCL INFO bootstrap.cc:2 -> 6\n").facts.values
