"""The Textual wizard: Pilot-driven walks through a founding scenario, and snapshots of each step.

Snapshots (pytest-textual-snapshot) pin every step at 80x24; update them deliberately with
`pytest tests/test_tui.py --snapshot-update` and review the SVG diff.
"""

from __future__ import annotations

import pytest

from advisor.tui.app import AdvisorApp
from helpers import load_case

SIZE = (80, 24)


def openr1_log() -> str:
    return load_case("seed-openr1-save-allgather")["log"]


async def paste_and_diagnose(app: AdvisorApp, pilot, log: str) -> None:
    app.query_one("#paste").text = log
    await pilot.press("ctrl+g")
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def answer_all(app: AdvisorApp, pilot, answers: dict[str, str]) -> list[str]:
    """Answer each question the wizard asks: from `answers` (by choice or typing), else don't know."""
    asked = []
    while app.question is not None and len(asked) < 10:
        q = app.question
        asked.append(q.id)
        value = answers.get(q.id)
        if q.choices:
            ids = [c["value"] for c in q.choices] + ["__unknown__"]
            target = ids.index(value) if value in ids else len(ids) - 1
            for _ in range(target):
                await pilot.press("down")
            await pilot.press("enter")
        else:
            app.query_one("#answer").value = value or ""
            await pilot.press("enter")
        await pilot.pause()
    return asked


async def test_walk_from_paste_to_copied_snippet(kb, tmp_path):
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        assert app.diagnosis.causes[0].code == "checkpoint-save-straggler"
        assert "checkpoint-save-straggler" in str(app.query_one("#causes").render())  # side panel is live
        asked = await answer_all(app, pilot, {"storage": "network-fs", "saves_optimizer": "yes", "framework_version": "0.16.0"})
        assert "storage" in asked
        assert app.answers["storage"] == "network-fs"
        assert app.query("#final")  # the final answer is on screen
        openr1 = [i for i, s in enumerate(app.diagnosis.fix.snippets) if s.format == "openr1-yaml" and "ddp_timeout" in s.content][0]
        for _ in range(openr1):
            await pilot.press("down")
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert "ddp_timeout: 3600" in app.clipboard
        await pilot.press("ctrl+s")
        await pilot.pause()
        saved = tmp_path / "advisor-fix-openr1-yaml.yaml"
        assert saved.read_text() == app.clipboard


async def test_back_takes_back_the_last_answer(kb, tmp_path):
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        first = app.question.id
        await answer_all(app, pilot, {})
        last = app.history[-1]
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert last not in app.answers and app.question.id == last
        assert not app.query("#final")
        while app.history:
            await pilot.press("ctrl+b")
            await pilot.pause()
        assert app.question.id == first and app.answers == {}


async def test_typed_answers_and_dont_know(kb, tmp_path):
    log = ("[rank1]:[E101 01:00:00.100 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=52, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.")
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, log)
        assert app.question.id == "phase"
        await answer_all(app, pilot, {"phase": "save"})
        assert app.answers["phase"] == "save"
        # a number question answered by typing; a bad value is refused with a message, not accepted
        if app.question is not None and app.question.kind == "number":
            app.query_one("#answer").value = "lots"
            await pilot.press("enter")
            await pilot.pause()
            assert app.question is not None and app.question.id not in app.answers
        await answer_all(app, pilot, {"model_size_b": "7"})
        assert app.diagnosis.causes[0].code == "checkpoint-save-straggler"


async def test_restart_and_file_path_input(kb, tmp_path):
    log_file = tmp_path / "train.log"
    log_file.write_text(openr1_log())
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, str(log_file))  # a path typed in the paste area
        assert app.diagnosis is not None and app.diagnosis.causes[0].code == "checkpoint-save-straggler"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.diagnosis is None and app.answers == {} and app.query_one("#paste").text == ""


async def test_unreadable_input_is_explained(kb, tmp_path):
    junk = tmp_path / "core.bin"
    junk.write_bytes(bytes(range(256)) * 300)
    app = AdvisorApp(kb, log_path=str(junk), save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.diagnosis is None
        messages = " ".join(str(m.render()) for m in app.query("ChatMessage"))
        assert "binary" in messages


async def test_keyboard_only_and_theme_and_panel(kb, tmp_path):
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        assert app.focused.id == "paste"
        await pilot.press("ctrl+t")
        assert app.theme == "textual-light"
        await pilot.press("f2")
        assert not app.query_one("#panel").display
        bindings = {b.key for b in app.BINDINGS}
        assert {"ctrl+g", "ctrl+b", "ctrl+r", "ctrl+o", "ctrl+s", "ctrl+q"} <= bindings


# --- snapshots of each step -----------------------------------------------------------------------


def app_factory(kb, tmp_path):
    return AdvisorApp(kb, save_dir=tmp_path)


async def no_blink(pilot) -> None:
    """A blinking cursor would make the snapshots depend on timing."""
    for widget in pilot.app.query("Input, TextArea"):
        widget.cursor_blink = False
    await pilot.pause()


def test_snapshot_start(snap_compare, kb, tmp_path):
    assert snap_compare(app_factory(kb, tmp_path), terminal_size=SIZE, run_before=no_blink)


def test_snapshot_first_question(snap_compare, kb, tmp_path):
    log = openr1_log()  # outside the app: a skip raised inside run_before would hang the app

    async def run_before(pilot):
        await no_blink(pilot)
        await paste_and_diagnose(pilot.app, pilot, log)

    assert snap_compare(app_factory(kb, tmp_path), terminal_size=SIZE, run_before=run_before)


def after_final_answer(*keys: str):
    """A run_before that pastes the Open-R1 log, answers every question, then presses `keys`."""
    log = openr1_log()  # outside the app: a skip raised inside run_before would hang the app

    async def run_before(pilot):
        await no_blink(pilot)
        await paste_and_diagnose(pilot.app, pilot, log)
        await answer_all(pilot.app, pilot, {"storage": "network-fs"})
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return run_before


def test_snapshot_final_answer(snap_compare, kb, tmp_path):
    assert snap_compare(app_factory(kb, tmp_path), terminal_size=SIZE, run_before=after_final_answer())


def test_snapshot_final_answer_light_theme(snap_compare, kb, tmp_path):
    assert snap_compare(app_factory(kb, tmp_path), terminal_size=SIZE, run_before=after_final_answer("ctrl+t"))


def test_snapshot_after_back(snap_compare, kb, tmp_path):
    assert snap_compare(app_factory(kb, tmp_path), terminal_size=SIZE, run_before=after_final_answer("ctrl+b"))


def test_runs_in_a_real_terminal_at_80x24(tmp_path):
    """Start `advisor tui` on a pseudo-terminal of 80x24, see it render, and quit with ctrl+q."""
    import fcntl
    import os
    import pty
    import re
    import select
    import signal
    import struct
    import sys
    import termios
    import time

    log = tmp_path / "train.log"
    log.write_text(openr1_log())
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(TERM="xterm-256color")
        os.chdir(tmp_path)  # away from the source tree, so the installed package is what runs
        os.execv(sys.executable, [sys.executable, "-m", "advisor", "tui", "--log", str(log)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    seen = b""
    try:
        deadline = time.time() + 60
        while True:
            plain = re.sub(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][AB0]|\x1b\][^\x07]*\x07", b"", seen)
            if b"Causes" in plain and b"checkpoint" in plain:
                break
            assert time.time() < deadline, plain[-2000:]
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                try:
                    seen += os.read(fd, 65536)
                except OSError:  # the child closed the terminal: it exited before rendering
                    raise AssertionError(f"advisor tui exited early:\n{plain[-2000:].decode(errors='replace')}") from None
        os.write(fd, b"\x11")  # ctrl+q
        deadline = time.time() + 30
        while time.time() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            try:  # keep draining, so the app is never blocked writing to the terminal
                if select.select([fd], [], [], 0.2)[0]:
                    os.read(fd, 65536)
            except OSError:
                pass
        assert done and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        pid = 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        try:
            os.close(fd)
        except OSError:
            pass
