"""SGLang's own lines (kb/messages/sglang.yaml, mined by tools/mine/frameworks.py from SGLang
0.3.0-0.5.23): a process's exception, the SIGQUIT a failing child sends, a scheduler's death; each
names the engine, whose processes issue their own collectives."""

from __future__ import annotations

import pytest

from advisor.diagnose import diagnose, read_log
from advisor.models import DiagnoseRequest


@pytest.mark.parametrize("line, message", [
    ("[2025-03-02 10:24:09 TP1] Scheduler hit an exception: Traceback (most recent call last):", "sglang.process-hit-exception"),
    ("[2025-03-02 10:24:09] DetokenizerManager hit an exception: Traceback (most recent call last):", "sglang.process-hit-exception"),
    ("[2025-03-02 10:24:10] Received sigquit from a child process. It usually means the child failed.", "sglang.sigquit-from-child"),
    ("[2026-01-02 10:24:10] SIGQUIT received. signum=3, frame=None. It usually means one child failed.", "sglang.sigquit-one-child-failed"),
    ("Rank 1 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer.",
     "sglang.scheduler-died-during-init"),
    ("[2025-03-02 10:24:10] Scheduler or DataParallelController 4211 terminated with -6", "sglang.scheduler-terminated"),
])
def test_sglang_lines_are_recognised_and_name_the_engine(kb, line, message):
    reading = read_log(kb, line + "\n")
    assert message in reading.signatures.messages
    assert reading.facts.values["inference_engine"].value == "sglang"


def test_a_scheduler_killed_at_start_carries_its_exit_code(kb):
    d = diagnose(DiagnoseRequest(log="Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), "
                                     "a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.\n"), kb)
    assert d.facts["exit_code"] == -9 and d.facts["first_failure"] == "killed"
    assert d.causes[0].code == "host-oom-or-killed"


def test_the_child_sigquit_is_a_consequence(kb):
    """The main process's SIGQUIT line follows a child's failure: it is not the first failure."""
    log = ("[2025-03-02 10:24:09 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
           "RuntimeError: CUDA error: an illegal memory access was encountered\n"
           "[2025-03-02 10:24:10] Received sigquit from a child process. It usually means the child failed.\n")
    d = diagnose(DiagnoseRequest(log=log), kb)
    assert d.facts["first_failure"] == "exception" and d.fact_sources["first_failure"].line == 2
    assert "sglang.sigquit-from-child" in [m.id for m in d.messages]


@pytest.mark.parametrize("line", [
    "worker hit an exception while loading",                  # another program's words
    "Received sigquit from the shell",
])
def test_lookalikes_name_no_engine(kb, line):
    assert "inference_engine" not in read_log(kb, line + "\n").facts.values
