"""The project's own labelled corpus (benchmarks/cases/): schema, canonical codes, ids, split, sources.

See benchmarks/cases/README.md for the fields, the labelling rule and the split rule."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "benchmarks" / "cases"
SPLITS = ("dev", "heldout")
SHARED_CASES = REPO.parent / "shared" / "cases"
CODES = set(yaml.safe_load((REPO / "kb" / "codes.yaml").read_text(encoding="utf-8"))["causes"])

FIELDS = {
    "id", "source", "framework", "framework_version", "torch_version", "nccl_version", "nodes",
    "gpus_per_node", "model_size_b", "phase", "cause", "also_acceptable", "fix_keys",
    "label_confidence", "summary", "log",
}
FRAMEWORKS = {
    "llama-factory", "open-r1", "trl", "transformers", "accelerate", "deepspeed", "torchtitan",
    "lightning", "pytorch", "other",
}
PHASES = {"init", "first-step", "train", "save", "eval", "data-prep", "end-of-epoch", "unknown"}
CONFIDENCE = {"high", "medium"}
MAX_LOG_LINES = 130

FILES = sorted(p for split in SPLITS for p in (CORPUS / split).glob("*.yaml"))


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


CASES = {path: load(path) for path in FILES}


def split_of(case_id: str) -> str:
    return "heldout" if int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % 2 == 1 else "dev"


def test_both_splits_have_cases():
    for split in SPLITS:
        assert list((CORPUS / split).glob("*.yaml")), f"no cases in benchmarks/cases/{split}"


def test_no_stray_files():
    """Case files live only in dev/ and heldout/, and only as .yaml."""
    stray = [
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name != "README.md" and not (p.parent.name in SPLITS and p.suffix == ".yaml")
    ]
    assert not stray


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_schema(path):
    case = CASES[path]
    assert isinstance(case, dict)
    assert set(case) == FIELDS, f"missing {FIELDS - set(case)}, unknown {set(case) - FIELDS}"
    for key in ("id", "source", "framework", "phase", "cause", "label_confidence", "summary", "log"):
        assert isinstance(case[key], str) and case[key].strip(), key
    for key in ("framework_version", "torch_version", "nccl_version"):
        assert case[key] is None or (isinstance(case[key], str) and case[key].strip()), key
    for key in ("nodes", "gpus_per_node"):
        value = case[key]
        assert value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0), key
    size = case["model_size_b"]
    assert size is None or (isinstance(size, (int, float)) and not isinstance(size, bool) and size > 0)
    assert case["framework"] in FRAMEWORKS
    assert case["phase"] in PHASES
    assert case["label_confidence"] in CONFIDENCE
    assert isinstance(case["fix_keys"], list) and all(isinstance(k, str) and k.strip() for k in case["fix_keys"])
    assert isinstance(case["also_acceptable"], list)
    assert 0 < len(case["log"].splitlines()) <= MAX_LOG_LINES


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_codes_are_canonical(path):
    case = CASES[path]
    assert case["cause"] in CODES, case["cause"]
    extra = case["also_acceptable"]
    assert set(extra) <= CODES, set(extra) - CODES
    assert case["cause"] not in extra
    assert len(extra) == len(set(extra))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_id_matches_file_and_split(path):
    case_id = CASES[path]["id"]
    assert path.stem == case_id
    assert path.parent.name == split_of(case_id), f"{case_id} belongs in {split_of(case_id)}/"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_source_is_https(path):
    source = CASES[path]["source"]
    assert source.startswith("https://") and " " not in source


def test_ids_are_unique():
    ids = [case["id"] for case in CASES.values()]
    assert len(ids) == len(set(ids))


def test_sources_are_unique():
    sources = [case["source"] for case in CASES.values()]
    duplicates = {s for s in sources if sources.count(s) > 1}
    assert not duplicates


def test_no_source_shared_with_the_development_cases():
    if not SHARED_CASES.is_dir():
        pytest.skip("../shared/cases not available")
    shared = {
        (load(p) or {}).get("source")
        for p in SHARED_CASES.glob("*.yaml")
    }
    shared.discard(None)
    overlap = sorted({case["source"] for case in CASES.values()} & shared)
    assert not overlap


def test_split_rule_examples():
    """The rule itself, pinned to known answers so that a change to it cannot reshuffle the corpus."""
    assert split_of("pytorch-141069") == "heldout"
    assert split_of("nccl-667") == "heldout"
    assert split_of("dust3r-192") == "dev"
