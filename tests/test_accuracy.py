"""Accuracy on the shared labelled cases, through the CLI contract (benchmarks/accuracy.py).

Every case in ../shared/cases is run with the log alone and with its metadata as answers; the
targets are the ones the diagnosis core was accepted on.
"""

from __future__ import annotations


import pytest

from helpers import CASES, benchmark_module, case_paths

accuracy = benchmark_module("accuracy")


@pytest.fixture(scope="module")
def report():
    if not case_paths():
        pytest.skip(f"no shared cases at {CASES}")
    return accuracy.evaluate(CASES)


def test_every_case_is_evaluated(report):
    assert {r["id"] for r in report["cases"]} == {p.stem for p in case_paths()}


def test_top1_with_answers_target(report):
    assert report["summary"]["with_answers"]["top1"] >= 0.90


def test_top3_from_the_log_alone_target(report):
    assert report["summary"]["log_alone"]["top3"] >= 0.90


def test_answers_never_make_a_case_worse(report):
    for row in report["cases"]:
        if row["log"]["top1"]:
            assert row["answers"]["top1"], row["id"]
