"""`advisor tui`: a chat-like walk from a pasted log to a fix you can copy.

Paste a log (or type a file path), answer the questions the advisor asks (choices, numbers, or
"don't know"), and take the fix snippet with you. The side panel shows the facts and the ranked
causes after every answer. No diagnosis logic lives here: the wizard calls the core's `read_log`
and `conclude` and only shows what they return.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.worker import get_current_worker
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, ContentSwitcher, Footer, Header, Input, OptionList, TextArea
from textual.widgets.option_list import Option

from advisor.answers import AnswerError, parse_answer
from advisor.diagnose import LogReading, conclude, read_log
from advisor.inputs import InputError, open_log
from advisor.knowledge import KnowledgeBase, load_kb
from advisor.models import DiagnoseRequest, Diagnosis, QuestionOut
from advisor.render import standing

from .widgets import ChatMessage, FinalAnswer, SidePanel

DONT_KNOW = "__unknown__"
EXTENSIONS = {"yaml": "yaml", "toml": "toml", "python": "py", "bash": "sh"}
LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".json", ".jsonl")


class ReadCancelled(Exception):
    """The read was started over, replaced or the app is quitting: stop at the next block."""


def looks_like_a_path(text: str) -> bool:
    """One word that names a file rather than log text: `/data/run3/train.log`, `~/x.log`, `out.txt`."""
    return (bool(text) and "\n" not in text and len(text) < 4096 and not any(ch.isspace() for ch in text)
            and (text.startswith(("/", "~", "./", "../")) or text.lower().endswith(LOG_SUFFIXES)))


class AdvisorApp(App):
    """The guided wizard. Construct with a KB (tests pass one) and optionally a log file."""

    CSS_PATH = "advisor.tcss"
    TITLE = "nccl-advisor"
    SUB_TITLE = "from a failed job's log to a fix"

    # short labels: all eight fit the footer of an 80-column terminal
    BINDINGS = [
        Binding("ctrl+g", "diagnose", "Go", id="diagnose"),
        Binding("ctrl+b", "back", "Back", id="back"),
        Binding("ctrl+r", "restart", "Restart", id="restart"),
        Binding("ctrl+o", "copy_snippet", "Copy", id="copy"),
        Binding("ctrl+s", "save_snippet", "Save", id="save"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="theme"),
        Binding("f2", "toggle_panel", "Panel", id="panel"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]
    """
    | key | action |
    |---|---|
    | ctrl+g | diagnose what is in the paste area (go) |
    | ctrl+b | take back the last answer |
    | ctrl+r | start over |
    | ctrl+o | copy the selected fix snippet to the clipboard |
    | ctrl+s | save the selected fix snippet to a file |
    | ctrl+t | switch between dark and light themes |
    | f2 | show or hide the side panel |
    """

    def __init__(self, kb: KnowledgeBase | None = None, log_path: str | None = None, save_dir: str | Path = ".",
                 dumps: tuple[list, list[str]] | None = None) -> None:
        super().__init__()
        self.kb = kb or load_kb()
        self.log_path = log_path
        self.dumps = dumps  # Flight Recorder dumps read by the caller (advisor.fr_dumps.read_dumps): (dumps, notes)
        self.save_dir = Path(save_dir)
        self.reading: LogReading | None = None
        self.answers: dict[str, str] = {}
        self.history: list[str] = []  # question ids in the order they were answered
        self.diagnosis: Diagnosis | None = None
        self.question: QuestionOut | None = None
        self.selected_snippet = 0
        self.read_gen = 0  # bumped by every new read, start-over and quit: a stale read is dropped
        self.reading_now = False
        self._progress: ChatMessage | None = None

    # --- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            with Vertical(id="main"):
                yield VerticalScroll(id="chat")
                with ContentSwitcher(initial="paste-mode", id="composer"):
                    with Vertical(id="paste-mode"):
                        yield TextArea(id="paste", placeholder="Paste the error or the log here, or type a log file's path")
                        yield Button("Diagnose  (ctrl+g)", id="go", variant="primary")
                    yield OptionList(id="choices")
                    with Vertical(id="text-mode"):
                        yield Input(id="answer", placeholder="your answer (a number or a version)")
                        yield Button("Don't know", id="dont-know")
                    yield OptionList(id="snippets")
            yield SidePanel(id="panel")
        yield Footer(show_command_palette=False, compact=True)

    def on_mount(self) -> None:
        self.say("Paste the error or the log of the failed job below (or type the path of a log file), "
                 "then press ctrl+g. I will ask only what changes the answer.")
        self.query_one("#paste", TextArea).focus()  # keys typed while a --log file is read are not lost
        if self.dumps:
            self.say(f"I have {len(self.dumps[0])} Flight Recorder dump(s); I read them with the log.")
        if self.log_path:
            self.start(self.log_path, is_path=True)
        elif self.dumps:  # the dumps alone
            self.read_gen += 1
            self.reading_now = True
            self._read("", False, self.read_gen)

    # --- conversation ----------------------------------------------------------------------

    def say(self, text: str | Text, role: str = "advisor") -> None:
        chat = self.query_one("#chat", VerticalScroll)
        chat.mount(ChatMessage(text, role))
        chat.call_after_refresh(chat.scroll_end, animate=False)

    def action_diagnose(self) -> None:
        if self.reading_now:
            self.notify("Still reading the log: wait for it, or ctrl+r to start over.", severity="warning")
            return
        if self.reading is not None:
            return
        text = self.query_one("#paste", TextArea).text
        if not text.strip():
            self.notify("Paste an error or a log first.", severity="warning")
            return
        candidate = text.strip()
        is_path = "\n" not in candidate and len(candidate) < 4096 and (
            Path(candidate).expanduser().exists() or looks_like_a_path(candidate))
        # a path that is missing or a directory goes to open_log too: it says so, as the CLI does
        self.start(str(Path(candidate).expanduser()) if is_path else text, is_path=is_path)

    @on(Button.Pressed, "#go")
    def _go(self) -> None:
        self.action_diagnose()

    def start(self, source: str, is_path: bool) -> None:
        shown = f"log file: {source}" if is_path else _preview(source)
        self.say(Text(shown), role="user")
        self.read_gen += 1
        self.reading_now = True
        self._progress = ChatMessage("Reading the log...", "advisor")
        chat = self.query_one("#chat", VerticalScroll)
        chat.mount(self._progress)
        chat.call_after_refresh(chat.scroll_end, animate=False)
        self._read(source, is_path, self.read_gen)

    @work(thread=True, exclusive=True, group="read")
    def _read(self, source: str, is_path: bool, gen: int) -> None:
        worker = get_current_worker()
        size = None if is_path else len(source)
        shown = {"pct": -1}

        def progress(done: int) -> None:
            if worker.is_cancelled or gen != self.read_gen:
                raise ReadCancelled
            if size:
                pct = min(100, done * 100 // size)
                if pct != shown["pct"] and size >= 1 << 20:
                    shown["pct"] = pct
                    self._from_thread(self._show_progress, gen, f"Reading the log... {pct} % of {size / 2**20:,.0f} MiB")

        try:
            if is_path:
                stream, size = open_log(source)
                with stream:
                    reading = read_log(self.kb, stream, on_progress=progress)
            else:
                reading = read_log(self.kb, source, on_progress=progress)
        except ReadCancelled:
            return
        except InputError as exc:
            self._from_thread(self._read_failed, gen, str(exc), source if is_path else None)
            return
        if self.dumps:
            from advisor.fr_join import attach_dumps

            attach_dumps(reading, *self.dumps)
        self._from_thread(self._read_done, reading, gen)

    def _from_thread(self, callback, *args) -> None:
        try:
            self.call_from_thread(callback, *args)
        except RuntimeError:  # the app is closing: nobody is left to show it to
            pass

    def _show_progress(self, gen: int, text: str) -> None:
        if gen == self.read_gen and self._progress is not None:
            self._progress.update(text)

    def _read_failed(self, gen: int, problem: str, path: str | None) -> None:
        if gen != self.read_gen:
            return
        self.reading_now = False
        self._progress = None
        self.say(f"I cannot read that: {problem}" + ("" if path is None else ". Or paste the log text instead."))
        paste = self.query_one("#paste", TextArea)
        if path is not None and not paste.text.strip():
            paste.text = path  # to correct it in place
        self.query_one("#composer", ContentSwitcher).current = "paste-mode"
        paste.focus()

    def _read_done(self, reading: LogReading, gen: int) -> None:
        if gen != self.read_gen:  # started over, or read again, meanwhile
            return
        self.reading_now = False
        if self._progress is not None:
            self._progress.update("Read the log.")
            self._progress = None
        self.reading = reading
        self.refresh_diagnosis()
        d = self.diagnosis
        if d.flight_recorder is not None:
            from advisor.render import flight_recorder_lines

            self.say(Text("Flight Recorder: " + "\n".join(flight_recorder_lines(d)[:4])))
        top = next((c for c in d.causes if not c.benign), None)
        if d.status == "no-match" and d.causes and d.causes[0].benign:
            self.say(d.headline)  # only harmless lines: says so, with no confidence to show
        elif d.status == "no-match" or top is None:
            self.say("I do not recognise a failure in this text yet. The answers below can still point the way.")
        else:
            self.say(f"{d.headline}\n({standing(d)})")
        self.next_step()

    def refresh_diagnosis(self) -> None:
        self.diagnosis = conclude(self.kb, self.reading, DiagnoseRequest(answers=dict(self.answers)))
        self.query_one(SidePanel).show(self.diagnosis)

    def next_step(self) -> None:
        d = self.diagnosis
        if d.questions:
            self.ask(d.questions[0])
        else:
            self.finish()

    def ask(self, question: QuestionOut) -> None:
        self.question = question
        self.say(f"{question.text}\n(why: {question.reason})")
        switcher = self.query_one("#composer", ContentSwitcher)
        if question.choices:
            options = self.query_one("#choices", OptionList)
            options.clear_options()
            options.add_options([Option(c["label"], id=c["value"]) for c in question.choices])
            options.add_option(Option("Don't know", id=DONT_KNOW))
            switcher.current = "choices"
            options.highlighted = 0
            options.focus()
        else:
            field = self.query_one("#answer", Input)
            field.value = ""
            field.placeholder = {"yes_no": "yes or no", "number": f"a number{' (' + question.unit + ')' if question.unit else ''}",
                                 "version": "a version, e.g. 0.15.0"}.get(question.kind, "your answer")
            switcher.current = "text-mode"
            field.focus()

    @on(OptionList.OptionSelected, "#choices")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.answer(event.option.id if event.option.id != DONT_KNOW else "unknown", str(event.option.prompt))

    @on(Input.Submitted, "#answer")
    def _typed(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        if not value:  # an empty Enter is not an answer
            self.notify("Type an answer, or press the Don't know button.", severity="warning")
            return
        self.answer(value, value)

    @on(Button.Pressed, "#dont-know")
    def _dont_know(self) -> None:
        self.answer("unknown", "Don't know")

    def answer(self, value: str, shown: str) -> None:
        question = self.question
        if question is None:
            return
        try:
            parse_answer(self.kb, self.kb.questions[question.id], value)
        except AnswerError as exc:
            self.notify(exc.reason, severity="error")
            return
        self.question = None
        self.answers[question.id] = value
        self.history.append(question.id)
        self.say(Text(f"{question.id}: {shown}"), role="user")
        self.refresh_diagnosis()
        words = standing(self.diagnosis)
        self.say(words[0].upper() + words[1:])
        self.next_step()

    def finish(self) -> None:
        d = self.diagnosis
        chat = self.query_one("#chat", VerticalScroll)
        for old in self.query(FinalAnswer):
            old.remove()
        final = FinalAnswer(d)
        chat.mount(final)
        options = self.query_one("#snippets", OptionList)
        options.clear_options()
        options.add_options([Option(Text(f"[{i + 1}] {s.format}: {s.title}", no_wrap=True, overflow="ellipsis"), id=str(i))
                             for i, s in enumerate(d.fix.snippets)])
        self.query_one("#composer", ContentSwitcher).current = "snippets"
        if d.fix.snippets:
            options.highlighted = 0
            self.selected_snippet = 0
        options.border_title = "fix snippets: enter/ctrl+o copy, ctrl+s save"
        options.focus()
        self.say("Pick a snippet below and press ctrl+o (or enter) to copy it or ctrl+s to save it; ctrl+b takes back an answer, ctrl+r starts over.")
        # the diagnosis is what to read first: show the final answer from its headline
        chat.call_after_refresh(lambda: chat.scroll_to_widget(final, top=True, animate=False))

    @on(OptionList.OptionHighlighted, "#snippets")
    def _snippet_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is not None:
            self.selected_snippet = int(event.option.id)

    @on(OptionList.OptionSelected, "#snippets")
    def _snippet_selected(self, event: OptionList.OptionSelected) -> None:
        self.selected_snippet = int(event.option.id)
        self.action_copy_snippet()

    # --- actions ---------------------------------------------------------------------------

    def _current_snippet(self):
        if self.diagnosis is None or not self.diagnosis.fix.snippets or self.question is not None:
            return None
        return self.diagnosis.fix.snippets[min(self.selected_snippet, len(self.diagnosis.fix.snippets) - 1)]

    def action_copy_snippet(self) -> None:
        snippet = self._current_snippet()
        if snippet is None:
            self.notify("No fix snippet yet.", severity="warning")
            return
        # the terminal's clipboard escape (OSC 52): no terminal says whether it arrived, so say where
        # it went; tmux and screen often drop it, so there it is saved to a file as well
        self.copy_to_clipboard(snippet.content)
        if os.environ.get("TMUX") or os.environ.get("STY"):
            path = self._save(snippet)
            saved = f" Also saved to {path}." if path else ""
            self.notify(f"Sent the {snippet.format} snippet to the terminal's clipboard (OSC 52); tmux and screen pass it on "
                        f"only with set-clipboard on.{saved}", timeout=8)
        else:
            self.notify(f"Sent the {snippet.format} snippet to the terminal's clipboard (OSC 52). Nothing to paste? "
                        "Your terminal may not allow it: ctrl+s saves it to a file.", timeout=8)

    def action_save_snippet(self) -> None:
        snippet = self._current_snippet()
        if snippet is None:
            self.notify("No fix snippet yet.", severity="warning")
            return
        path = self._save(snippet)
        if path is not None:
            self.notify(f"Saved {path}", timeout=8)

    def _save(self, snippet) -> Path | None:
        """Write the snippet to a new file (never over an existing one); its full path, or None."""
        stem = f"advisor-fix-{snippet.format}"
        suffix = EXTENSIONS.get(snippet.language, "txt")
        for n in range(1, 1000):
            path = (self.save_dir / (f"{stem}.{suffix}" if n == 1 else f"{stem}-{n}.{suffix}")).resolve()
            try:
                with open(path, "x", encoding="utf-8") as handle:
                    handle.write(snippet.content)
                return path
            except FileExistsError:
                continue
            except OSError as exc:
                self.notify(f"Could not save {path}: {exc.strerror or exc}", severity="error")
                return None
        self.notify(f"Could not save: {self.save_dir.resolve()} already holds 999 such files", severity="error")
        return None

    def action_back(self) -> None:
        if not self.history:
            self.notify("Nothing to take back.", severity="warning")
            return
        last = self.history.pop()
        self.answers.pop(last, None)
        for old in self.query(FinalAnswer):
            old.remove()
        self.say(Text(f"(took back {last})"), role="user")
        self.question = None
        self.refresh_diagnosis()
        self.next_step()

    def action_quit(self) -> None:
        """At once, even in the middle of reading a big log (the read stops at its next block)."""
        self.read_gen += 1
        self.workers.cancel_group(self, "read")
        self.exit()

    def action_restart(self) -> None:
        self.read_gen += 1  # a read still going is dropped, and stops at its next block
        self.workers.cancel_group(self, "read")
        self.reading_now = False
        self._progress = None
        self.reading = None
        self.answers.clear()
        self.history.clear()
        self.diagnosis = None
        self.question = None
        self.query_one("#chat", VerticalScroll).remove_children()
        self.query_one(SidePanel).show(None)
        paste = self.query_one("#paste", TextArea)
        paste.text = ""
        self.query_one("#composer", ContentSwitcher).current = "paste-mode"
        paste.focus()
        self.say("Start over: paste the error or the log, then press ctrl+g.")

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    def action_toggle_panel(self) -> None:
        panel = self.query_one(SidePanel)
        panel.display = not panel.display


def _preview(text: str, lines: int = 6, width: int = 200) -> str:
    """The first lines of a paste, as the user's own chat bubble: redacted like every other output."""
    from advisor.redact import Redactor

    body = text.strip()
    rows = body.split("\n", lines)[:lines]
    redactor = Redactor()
    shown = "\n".join(redactor.redact(row[:65536])[:width] for row in rows)
    more = body.count("\n") + 1 - len(rows)
    return shown + (f"\n... ({more} more lines)" if more > 0 else "")


def run_tui(log_path: str | None = None, kb_dirs: list[str] | None = None, dumps: tuple[list, list[str]] | None = None) -> int:
    AdvisorApp(load_kb(kb_dirs or []), log_path=log_path, dumps=dumps).run()
    return 0
