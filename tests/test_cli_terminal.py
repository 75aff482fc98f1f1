"""The CLI on a real terminal (a pseudo-terminal) and in pipes: where answers come from, how typed
input ends, colour, and a reader that leaves early."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest

from helpers import read_to_end, read_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

LINE = ("[rank1]:[E101 01:00:00.100 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=522, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, Timeout(ms)=1800000) ran for 1800021 milliseconds before timing out.")
ESCAPE = re.compile(rb"\x1b\[[0-9;]*m")


def spawn(argv: list[str], cwd, env: dict | None = None) -> tuple[int, int]:
    """Run `argv` with a pseudo-terminal as its controlling terminal; return (pid, fd)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.chdir(cwd)  # away from the source tree, so the installed package is what runs
        os.environ.pop("NO_COLOR", None)
        os.environ.update(env or {})
        os.execv(argv[0], argv)
    return pid, fd


def finish(pid: int, fd: int) -> tuple[bytes, int]:
    try:
        rest = read_to_end(fd)
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    return rest, os.waitstatus_to_exitcode(status)


def test_piped_log_with_interactive_reads_the_answers_from_the_terminal(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(LINE + "\n")
    cmd = f"cat {log} | {sys.executable} -m advisor suggest - --interactive --color never"
    pid, fd = spawn(["/bin/sh", "-c", cmd], tmp_path)
    asked = read_until(fd, b"> ")
    assert b"What was the job doing" in asked and b"Traceback" not in asked
    os.write(fd, b"5\r")  # saving a checkpoint
    read_until(fd, b"> ")
    os.write(fd, b"q\r")
    rest, code = finish(pid, fd)
    assert b"[checkpoint-save-straggler]" in rest and code in (0, 1)


def test_interactive_without_a_terminal_is_a_one_line_usage_error(tmp_path):
    for argv, stdin in ((["suggest", "-", "--interactive"], LINE.encode()), (["suggest", "--error", LINE, "-i"], b"")):
        r = subprocess.run([sys.executable, "-m", "advisor", *argv], input=stdin, capture_output=True, cwd=tmp_path,
                           start_new_session=True, timeout=60)  # a new session has no controlling terminal
        assert r.returncode == 2, r.stderr
        err = r.stderr.decode()
        assert err.count("\n") == 1 and "--interactive needs a terminal" in err and "--answer" in err and "Traceback" not in err


def test_typed_log_on_a_terminal_gets_a_prompt_and_one_ctrl_d_ends_it(tmp_path):
    pid, fd = spawn([sys.executable, "-m", "advisor", "suggest", "-", "--color", "never"], tmp_path)
    assert b"ctrl+D" in read_until(fd, b"ctrl+D")
    os.write(fd, LINE.encode() + b"\n")
    os.write(fd, b"\x04")  # one end-of-input, as `cat` needs
    rest, code = finish(pid, fd)
    assert b"Watchdog" in rest or b"collective" in rest
    assert code == 1  # the lone watchdog line: no confident diagnosis, the questions are listed


def test_color_never_is_honoured_by_the_interactive_prompts(tmp_path):
    pid, fd = spawn([sys.executable, "-m", "advisor", "suggest", "--error", LINE, "--interactive", "--color", "never"],
                    tmp_path, env={"TERM": "xterm-256color"})
    first = read_until(fd, b"> ")
    os.write(fd, b"\r")  # an empty Enter is not taken as "don't know": it says what to type
    again = read_until(fd, b"> ")
    assert b"type an answer" in again
    os.write(fd, b"q\r")
    rest, _ = finish(pid, fd)
    assert not ESCAPE.search(first + again + rest)


def test_color_always_colours_the_interactive_prompts(tmp_path):
    """The counterpart: the same run with --color always does colour (so the test above can fail)."""
    pid, fd = spawn([sys.executable, "-m", "advisor", "suggest", "--error", LINE, "--interactive", "--color", "always"], tmp_path)
    first = read_until(fd, b"> ")
    os.write(fd, b"q\r")
    finish(pid, fd)
    assert ESCAPE.search(first)


@pytest.mark.parametrize("argv", [
    ["suggest", "--error", LINE, "--json"],
    ["suggest", "--error", LINE],
    ["kb", "list", "--json"],
    ["kb", "list"],
    ["kb", "show", "nccl-heartbeat-monitor"],
])
def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path, argv):
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)
    for reader in ("head -c 10", "true"):  # `true` leaves before the first write: a broken pipe for sure
        r = subprocess.run(["/bin/sh", "-c", f"{sys.executable} -m advisor {quoted} | {reader}; exit 0"],
                           capture_output=True, cwd=tmp_path, timeout=60)
        assert len(r.stdout) == (10 if reader.startswith("head") else 0)
        assert b"Traceback" not in r.stderr and b"BrokenPipe" not in r.stderr and b"Exception" not in r.stderr, r.stderr.decode()
