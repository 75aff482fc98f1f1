"""The Textual wizard: Pilot-driven walks through a founding scenario, and snapshots of each step.

Snapshots (pytest-textual-snapshot) pin every step at 80x24; update them deliberately with
`pytest tests/test_tui.py --snapshot-update` and review the SVG diff.
"""

from __future__ import annotations

import pytest
from textual.widgets import Static

from advisor.tui.app import AdvisorApp
from helpers import scenario

SIZE = (80, 24)


OPENR1_LOG = scenario("openr1-save-allgather")["log"]  # read here, never inside the app's event loop


def openr1_log() -> str:
    return OPENR1_LOG


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
            app.query_one("#answer").value = value or "unknown"
            await pilot.press("enter")
        await pilot.pause()
    return asked


async def test_walk_from_paste_to_copied_snippet(kb, tmp_path, monkeypatch):
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("STY", raising=False)
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        assert app.diagnosis.causes[0].code == "checkpoint-save-straggler"
        assert "checkpoint-save-straggler" in str(app.query_one("#causes").render()).replace("-\n      ", "-")  # side panel is live
        asked = await answer_all(app, pilot, {"framework": "open-r1", "storage": "network-fs", "saves_optimizer": "yes", "framework_version": "0.16.0"})
        assert "storage" in asked
        assert app.answers["storage"] == "network-fs"
        assert app.query("#final")  # the final answer is on screen
        timeout = app.query_one("#timeout")  # which clock fired, folded like the evidence
        assert timeout.title == "Timeout: pg-collective" and timeout.collapsed
        body = [str(w.render()) for w in timeout.query(Static) if w.id == "timeout-lines"]
        assert body and "origin:" in body[0] and "if raised, next:" in body[0]
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


def chat_text(app: AdvisorApp) -> str:
    return "\n".join(str(m.render()) for m in app.query("ChatMessage"))


def notes(app: AdvisorApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


class SlowRead:
    """Stands in for the core's read_log: many slow blocks (a big log), reporting progress and
    stopping when the TUI says so, then the real reading."""

    def __init__(self, blocks: int = 400, delay: float = 0.02):
        import threading

        from advisor.diagnose import read_log

        self.real = read_log
        self.blocks = blocks
        self.delay = delay
        self.done_blocks = 0
        self.finished = threading.Event()

    def __call__(self, kb, source, description=None, on_progress=None):
        import time

        size = len(source) if isinstance(source, str) else 1 << 30
        try:
            for i in range(1, self.blocks + 1):
                time.sleep(self.delay)
                self.done_blocks = i
                if on_progress is not None:
                    on_progress(size * i // self.blocks)
            return self.real(kb, source, description)
        finally:
            self.finished.set()


async def test_paste_box_names_a_missing_file_or_a_directory(kb, tmp_path):
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, str(tmp_path / "no-such-run" / "train.log"))
        assert app.diagnosis is None and "no such file" in chat_text(app)
        app.query_one("#paste").text = str(tmp_path)
        await pilot.press("ctrl+g")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.diagnosis is None and "is a directory" in chat_text(app)
        assert app.focused is app.query_one("#paste")


async def test_log_option_with_a_bad_path_says_so_once_and_keeps_the_keys(kb, tmp_path):
    missing = str(tmp_path / "trian.log")
    app = AdvisorApp(kb, log_path=missing, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        said = chat_text(app)
        assert "no such file" in said and said.count("check the path") == 1
        paste = app.query_one("#paste")
        assert app.focused is paste and paste.text == missing  # ready to correct, and typed keys land there
        await pilot.press("x")
        assert paste.text != missing


async def test_start_over_while_reading_drops_the_old_read(kb, tmp_path, monkeypatch):
    slow = SlowRead()
    monkeypatch.setattr("advisor.tui.app.read_log", slow)
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#paste").text = openr1_log()
        await pilot.press("ctrl+g")
        await pilot.pause(0.2)
        assert app.reading_now
        await pilot.press("ctrl+r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert slow.finished.wait(10) and slow.done_blocks < slow.blocks  # it stopped, it did not run on
        assert app.diagnosis is None and app.question is None and app.reading is None
        assert "Diagnosis" not in chat_text(app) and app.query_one("#composer").current == "paste-mode"


async def test_diagnose_pressed_twice_reads_once_and_asks_once(kb, tmp_path, monkeypatch):
    slow = SlowRead(blocks=20)
    monkeypatch.setattr("advisor.tui.app.read_log", slow)
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#paste").text = openr1_log()
        await pilot.press("ctrl+g")
        await pilot.press("ctrl+g")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.question is not None
        assert chat_text(app).count(app.question.text) == 1
        assert len(app.query("ChatMessage.user")) == 1  # one read of the paste
        assert any("Still reading" in n for n in notes(app))


async def test_reading_shows_progress(kb, tmp_path, monkeypatch):
    slow = SlowRead(blocks=40, delay=0.05)
    monkeypatch.setattr("advisor.tui.app.read_log", slow)
    big = tmp_path / "train.log"
    big.write_text(openr1_log() + "step 1 loss 0.1\n" * 70_000)  # 1.1 MB
    app = AdvisorApp(kb, log_path=str(big), save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        seen = set()
        while app.reading_now or not seen:
            await pilot.pause(0.05)
            seen.add(str(app._progress.render()) if app._progress is not None else "")
        assert any("%" in s and "Reading the log" in s for s in seen), seen
        await app.workers.wait_for_complete()


async def test_quit_while_reading_stops_the_read(kb, tmp_path, monkeypatch):
    slow = SlowRead(blocks=2000)  # ~40 s if it ran on
    monkeypatch.setattr("advisor.tui.app.read_log", slow)
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#paste").text = openr1_log()
        await pilot.press("ctrl+g")
        await pilot.pause(0.2)
        await pilot.press("ctrl+q")
    assert slow.finished.wait(10) and slow.done_blocks < slow.blocks
    assert app.return_code in (0, None)


async def test_save_never_overwrites_and_shows_the_full_path(kb, tmp_path, monkeypatch):
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("STY", raising=False)
    mine = tmp_path / "advisor-fix-openr1-yaml.yaml"
    mine.write_text("my own file\n")
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        await answer_all(app, pilot, {"framework": "open-r1", "storage": "network-fs"})
        first = app.diagnosis.fix.snippets[0]
        await pilot.press("ctrl+s")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert mine.read_text() == "my own file\n"
        saved = sorted(tmp_path.glob(f"advisor-fix-{first.format}*"))
        assert len(saved) == 3 and all(p == mine or p.read_text() == first.content for p in saved)
        said = [n for n in notes(app) if n.startswith("Saved ")]
        assert len(said) == 2 and all(n.split(" ", 1)[1].startswith(str(tmp_path.resolve())) for n in said)


@pytest.mark.parametrize("multiplexer", [None, "TMUX"])
async def test_copy_says_where_the_snippet_went(kb, tmp_path, monkeypatch, multiplexer):
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("STY", raising=False)
    if multiplexer:
        monkeypatch.setenv(multiplexer, "/tmp/tmux-0/default,1,0")
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        await answer_all(app, pilot, {"framework": "open-r1", "storage": "network-fs"})
        await pilot.press("ctrl+o")
        await pilot.pause()
        [said] = [n for n in notes(app) if "OSC 52" in n]
        assert "Copied" not in said
        if multiplexer:  # tmux often drops the escape: the snippet is saved as well, and the file named
            assert "set-clipboard" in said and "Also saved to" in said and list(tmp_path.glob("advisor-fix-*"))
        else:
            assert "ctrl+s" in said and not list(tmp_path.glob("advisor-fix-*"))


async def test_only_harmless_lines_show_no_confidence(kb, tmp_path):
    plugin = ("gpu-a01:4410:4410 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: "
              "No such file or directory No plugin found (libnccl-net.so), using internal implementation")
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, plugin)
        said = chat_text(app)
        assert "harmless" in said and "confidence" not in said and "%" not in said


async def test_an_empty_enter_is_not_an_answer(kb, tmp_path):
    from advisor.models import QuestionOut

    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        q = kb.questions["model_size_b"]
        app.ask(QuestionOut(id=q.id, text=q.text, kind=q.kind, unit=q.unit, gain=1.0, reason="the fix needs it"))
        await pilot.pause()
        app.query_one("#answer").value = "  "
        await pilot.press("enter")
        await pilot.pause()
        assert app.question is not None and app.question.id == "model_size_b" and "model_size_b" not in app.answers
        assert any("Type an answer" in n for n in notes(app))


async def test_yes_no_questions_are_choices(kb, tmp_path):
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        for _ in range(10):
            if app.question is None or app.question.kind == "yes_no":
                break
            await answer_all_one(app, pilot)
        assert app.question is not None and app.question.kind == "yes_no"
        assert app.query_one("#composer").current == "choices"
        options = app.query_one("#choices")
        assert [options.get_option_at_index(i).id for i in range(options.option_count)] == ["yes", "no", "__unknown__"]


async def answer_all_one(app: AdvisorApp, pilot) -> None:
    """Answer the current question with its first choice, or "unknown"."""
    if app.question.choices:
        await pilot.press("enter")
    else:
        app.query_one("#answer").value = "unknown"
        await pilot.press("enter")
    await pilot.pause()


# --- the layout at 80x24 --------------------------------------------------------------------------


async def test_layout_at_80x24_keeps_every_key_and_code_and_room_for_the_answer(kb, tmp_path):
    from textual.widgets._footer import FooterKey

    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        await answer_all(app, pilot, {"framework": "open-r1", "storage": "network-fs"})
        await pilot.pause()
        keys = {k.key: k for k in app.query(FooterKey)}
        assert {"ctrl+g", "ctrl+b", "ctrl+r", "ctrl+o", "ctrl+s", "ctrl+t", "f2", "ctrl+q"} <= set(keys)
        assert all(0 < k.region.width and k.region.right <= SIZE[0] for k in keys.values())
        shown = str(app.query_one("#causes").render()).replace("-\n      ", "-")
        for cause in app.diagnosis.causes[:5]:
            assert cause.code in shown  # whole, never cut with an ellipsis
        chat = app.query_one("#chat")
        snippets = app.query_one("#snippets")
        assert chat.region.height >= 14 and snippets.region.height <= 6
        assert app.query_one("#final").region.y <= chat.region.y + 1  # the final answer is read from its headline
        # one snippet: its one row is shown whole, between the list's borders
        d = app.diagnosis
        app.diagnosis = d.model_copy(update={"fix": d.fix.model_copy(update={"snippets": d.fix.snippets[:1]})})
        await app.query_one("#final").remove()
        app.finish()
        await pilot.pause()
        assert snippets.option_count == 1 and snippets.region.height == 3


async def test_snippets_scroll_sideways_instead_of_wrapping(kb, tmp_path):
    from advisor.models import Snippet
    from advisor.tui.widgets import SnippetView

    long = "export TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=1200 TORCH_NCCL_ENABLE_MONITORING=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET\n"
    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        view = SnippetView(Snippet(framework="any", format="shell", language="bash", title="t", content=long + "echo ok\n"), 0)
        await app.query_one("#chat").mount(view)
        await pilot.pause()
        code = view.query_one(".code")
        assert code.region.height == 2  # two lines, not wrapped
        assert code.virtual_region.width >= len(long.strip()) > view.region.width  # wider than the view: it scrolls


async def test_two_causes_of_one_code_show_their_titles(kb, tmp_path):
    from advisor.tui.widgets import SidePanel

    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, openr1_log())
        d = app.diagnosis
        twin = d.causes[1].model_copy(update={"code": d.causes[0].code})
        app.query_one(SidePanel).show(d.model_copy(update={"causes": [d.causes[0], twin]}))
        await pilot.pause()
        shown = " ".join(str(app.query_one("#causes").render()).split())
        assert " ".join(d.causes[0].title.split()) in shown and " ".join(twin.title.split()) in shown


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
        await answer_all(pilot.app, pilot, {"framework": "open-r1", "storage": "network-fs"})
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


async def test_later_nccl_fixes_are_folded_into_the_final_answer(kb, tmp_path):
    from test_release_fixes import BOOTSTRAP_LOG

    app = AdvisorApp(kb, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await paste_and_diagnose(app, pilot, BOOTSTRAP_LOG)
        await answer_all(app, pilot, {})
        assert app.query("#final")
        fixes = app.query_one("#later-fixes")
        assert fixes.title.startswith("Fixed after NCCL 2.4.2") and fixes.collapsed
        body = "\n".join(str(w.render()) for w in fixes.query(Static))
        assert "2.9.8: Fix crash in bootstrap error case." in body
