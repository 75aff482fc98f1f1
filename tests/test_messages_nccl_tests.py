"""nccl-tests' own failure lines (kb/messages/nccl-tests.yaml, checked by tools/mine/nccl_tests.py):
the CUDA, NCCL and relay failures of its check macros, and its summary of wrong results."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisor.diagnose import diagnose, read_log
from advisor.models import DiagnoseRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "mine"))
import nccl_tests  # noqa: E402

NCCL_FAILURE = ("gpu-node-3: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '\n"
                " .. gpu-node-3 pid 81234: Test failure common.cu:951\n"
                " .. gpu-node-3 pid 81234: Test failure common.cu:1086\n")


@pytest.mark.parametrize("line, message", [
    ("node1: Test CUDA failure common.cu:892 'out of memory'", "nccl-tests.test-cuda-failure"),
    ("gpu-node-3: Test NCCL failure common.cu:1005 'unhandled system error / '", "nccl-tests.test-nccl-failure"),
    ("gpu-node-3: Test NCCL failure common.cu:393 'unhandled cuda error'", "nccl-tests.test-nccl-failure"),
    (" .. gpu-node-3 pid 81234: Test failure common.cu:951", "nccl-tests.test-failure-trace"),
    (" .. gpu-node-3: Test failure common.cu:951", "nccl-tests.test-failure-trace"),
    ("# Out of bounds values : 237858 FAILED", "nccl-tests.out-of-bounds-values"),
    ("rank=3 #wrong=1024", "nccl-tests.rank-wrong"),
])
def test_each_line_is_recognised(kb, line, message):
    assert message in read_log(kb, line + "\n").signatures.messages


@pytest.mark.parametrize("line", ["# Out of bounds values : 0 OK", "rank=3 #wrong=0", "CUDA failure 'invalid argument'"])
def test_a_passing_summary_and_lookalikes_are_not_failures(kb, line):
    found = read_log(kb, line + "\n").signatures.messages
    assert not [m for m in found if m.startswith("nccl-tests.")]
    assert "wrong_results" not in read_log(kb, line + "\n").facts.values


def test_wrong_results_set_their_fact(kb):
    assert read_log(kb, "# Out of bounds values : 12 FAILED\n").facts.values["wrong_results"].value is True


def test_the_first_nccl_failure_is_the_failure_and_the_relay_a_cascade(kb):
    d = diagnose(DiagnoseRequest(log=NCCL_FAILURE), kb)
    assert d.facts["first_failure"] == "nccl-error"
    assert d.causes  # the NCCL error string inside it is evidence as well


def test_the_checker_joins_adjacent_literals_and_reads_labelled_forms():
    source = ('#define NCCLCHECK(cmd) do { \\\n    printf("%s: Test NCCL failure %s:%d "           \\\n'
              '           "\'%s / %s\'\\n",  hostname); } while (0)\n'
              'PRINT("# %-20s : %d %s\\n", "Out of bounds values", errors[0], errors[0] ? "FAILED" : "OK");\n')
    strings = nccl_tests.c_strings(source)
    assert "%s: Test NCCL failure %s:%d '%s / %s'" in strings
    assert nccl_tests.holds("# Out of bounds values : %d %s", strings)
    assert not nccl_tests.holds("rank=%d #wrong=%d", strings)


def test_a_cuda_failure_names_its_error_and_is_no_python_exception(kb):
    """The quoted CUDA error becomes `cuda_error`; a C program's failed CUDA call is not a rank's exception."""
    line = "compute00000R: Test CUDA failure common.cu:732 'invalid device ordinal'\n"
    assert read_log(kb, line).facts.values["cuda_error"].value == "invalid device ordinal"
    d = diagnose(DiagnoseRequest(log=line), kb)
    assert "user_exception" not in d.facts and d.facts.get("first_failure") != "exception"


@pytest.mark.parametrize("code, version", [(22703, "2.27.3"), (21905, "2.19.5"), (2804, "2.8.4"), (30007, "3.0.7"), (999, None)])
def test_nccls_version_code_reads_as_a_release(code, version):
    from advisor.facts import nccl_version_from_code

    assert nccl_version_from_code(code) == version


def test_the_nccl_tests_header_dates_the_nccl_that_ran(kb):
    """From nccl-tests 2.18.5 its header prints NCCL_VERSION_CODE and ncclGetVersion: the library's is the one that ran."""
    log = "# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22105\n" + NCCL_FAILURE
    fact = read_log(kb, log).facts.values["nccl_version"]
    assert fact.value == "2.21.5" and fact.line == 1
