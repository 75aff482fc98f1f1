"""Open MPI's crash reports (kb/messages/open-mpi.yaml, checked by tools/mine/open_mpi.py): the
signal handler's block and mpirun's summary name the signal and mark the crash."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisor.diagnose import diagnose, read_log
from advisor.models import DiagnoseRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "mine"))
import open_mpi  # noqa: E402

CRASH = ("[node1:405884] *** Process received signal ***\n"
         "[node1:405884] Signal: Segmentation fault (11)\n"
         "[node1:405884] Signal code: Address not mapped (1)\n"
         "[node1:405884] Failing at address: 0x10\n"
         "[node1:405884] *** End of error message ***\n")


def test_the_signal_handler_block_is_recognised_and_names_the_signal(kb):
    reading = read_log(kb, CRASH)
    found = set(reading.signatures.messages)
    # the block's header carries the failure event, so it is searched for itself on every path; the
    # lines under it are passengers (knowledge.py), explained where a probe's window holds them
    assert "open-mpi.process-received-signal" in found
    assert reading.facts.values["signal"].value == "SIGSEGV"
    d = diagnose(DiagnoseRequest(log=CRASH), kb)
    assert d.facts["first_failure"] == "killed"
    assert d.facts.get("no_error_lines") is not True


@pytest.mark.parametrize("line, signal", [
    ("mpirun noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).", "SIGKILL"),
    ("mpirun noticed that process rank 0 with PID 405884 on node gpu-7 exited on signal 11.", "SIGSEGV"),
    ("[gpu-7:00042] Signal: Bus error (7)", "SIGBUS"),
])
def test_mpirun_and_the_handler_name_the_signal(kb, line, signal):
    assert read_log(kb, line + "\n").facts.values["signal"].value == signal


def test_a_rank_mpirun_saw_killed_points_to_the_killed_rank(kb):
    d = diagnose(DiagnoseRequest(log="mpirun noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).\n"), kb)
    assert d.causes and d.causes[0].code == "host-oom-or-killed"


@pytest.mark.parametrize("line", [
    "*** Process received signal ***",              # no [host:pid] prefix: not Open MPI's handler
    "Signal: Segmentation fault (11)",
    "the process received signal 11 from the kernel",
])
def test_lookalikes_are_not_open_mpis(kb, line):
    # each line alone is a small paste, where every catalogue message is checked by its atoms
    found = set(read_log(kb, line + "\n").signatures.messages)
    assert not any(m.startswith("open-mpi.") for m in found)


def test_the_checker_reads_literals_after_the_host_prefix():
    source = ('#define HOSTFORMAT "[%s:%05d] "\n'
              'ret = snprintf(tmp, size, HOSTFORMAT "Signal: %s (%d)\\n", host, getpid(), strsignal(signo), signo);\n')
    texts = {"stacktrace": open_mpi.c_literals(source)}
    ok = {"id": "a", "text": "[%s:%05d] Signal: %s (%d)", "source": "opal/util/stacktrace.c (x)"}
    wrong = {"id": "b", "text": "[%s:%05d] Signal number: %d", "source": "opal/util/stacktrace.c (x)"}
    assert open_mpi.holds(ok, "stacktrace", texts) and not open_mpi.holds(wrong, "stacktrace", texts)


def test_the_checker_joins_help_text_lines():
    help_file = open_mpi.joined("[orterun:non-zero-exit]\n%s detected that one or more processes exited with non-zero status, thus causing\n"
                                "the job to be terminated. The first process to do so was:\n")
    entry = {"id": "c", "source": "orte/tools/orterun/help-orterun.txt (x)",
             "text": "%s detected that one or more processes exited with non-zero status, thus causing the job to be terminated. "
                     "The first process to do so was:"}
    assert open_mpi.kind_of(entry) == "orterun" and open_mpi.holds(entry, "orterun", {"orterun": help_file})
    assert not open_mpi.holds(entry, "orterun", {})

