"""`advisor tui`: a chat-like walk from a pasted log to a fix you can copy.

Paste a log (or type a file path), answer the questions the advisor asks (choices, numbers, or
"don't know"), and take the fix snippet with you. The side panel shows the facts and the ranked
causes after every answer. No diagnosis logic lives here: the wizard calls the core's `read_log`
and `conclude` and only shows what they return.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
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

from .widgets import ChatMessage, FinalAnswer, SidePanel

DONT_KNOW = "__unknown__"
EXTENSIONS = {"yaml": "yaml", "toml": "toml", "python": "py", "bash": "sh"}


class AdvisorApp(App):
    """The guided wizard. Construct with a KB (tests pass one) and optionally a log file."""

    CSS_PATH = "advisor.tcss"
    TITLE = "nccl-advisor"
    SUB_TITLE = "from a failed job's log to a fix"

    BINDINGS = [
        Binding("ctrl+g", "diagnose", "Diagnose", id="diagnose"),
        Binding("ctrl+b", "back", "Back", id="back"),
        Binding("ctrl+r", "restart", "Restart", id="restart"),
        Binding("ctrl+o", "copy_snippet", "Copy fix", id="copy"),
        Binding("ctrl+s", "save_snippet", "Save fix", id="save"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="theme"),
        Binding("f2", "toggle_panel", "Panel", id="panel"),
        Binding("ctrl+q", "quit", "Quit", id="quit"),
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

    def __init__(self, kb: KnowledgeBase | None = None, log_path: str | None = None, save_dir: str | Path = ".") -> None:
        super().__init__()
        self.kb = kb or load_kb()
        self.log_path = log_path
        self.save_dir = Path(save_dir)
        self.reading: LogReading | None = None
        self.answers: dict[str, str] = {}
        self.history: list[str] = []  # question ids in the order they were answered
        self.diagnosis: Diagnosis | None = None
        self.question: QuestionOut | None = None
        self.selected_snippet = 0

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
        yield Footer()

    def on_mount(self) -> None:
        self.say("Paste the error or the log of the failed job below (or type the path of a log file), "
                 "then press ctrl+g. I will ask only what changes the answer.")
        if self.log_path:
            self.start(self.log_path, is_path=True)
        else:
            self.query_one("#paste", TextArea).focus()

    # --- conversation ----------------------------------------------------------------------

    def say(self, text: str | Text, role: str = "advisor") -> None:
        chat = self.query_one("#chat", VerticalScroll)
        chat.mount(ChatMessage(text, role))
        chat.call_after_refresh(chat.scroll_end, animate=False)

    def action_diagnose(self) -> None:
        if self.reading is not None:
            return
        text = self.query_one("#paste", TextArea).text
        if not text.strip():
            self.notify("Paste an error or a log first.", severity="warning")
            return
        candidate = text.strip()
        is_path = "\n" not in candidate and len(candidate) < 4096 and Path(candidate).expanduser().is_file()
        self.start(str(Path(candidate).expanduser()) if is_path else text, is_path=is_path)

    @on(Button.Pressed, "#go")
    def _go(self) -> None:
        self.action_diagnose()

    def start(self, source: str, is_path: bool) -> None:
        shown = f"log file: {source}" if is_path else _preview(source)
        self.say(Text(shown), role="user")
        self.say("Reading the log...")
        self._read(source, is_path)

    @work(thread=True, exclusive=True)
    def _read(self, source: str, is_path: bool) -> None:
        try:
            if is_path:
                stream, _ = open_log(source)
                with stream:
                    reading = read_log(self.kb, stream)
            else:
                reading = read_log(self.kb, source)
        except InputError as exc:
            self.call_from_thread(self.say, f"I cannot read that: {exc}. Paste the text instead, or check the path.")
            return
        self.call_from_thread(self._read_done, reading)

    def _read_done(self, reading: LogReading) -> None:
        self.reading = reading
        self.refresh_diagnosis()
        d = self.diagnosis
        if d.status == "no-match":
            self.say("I do not recognise a failure in this text yet. The answers below can still point the way.")
        else:
            top = d.causes[0]
            self.say(f"{d.headline}\n(confidence {top.score:.0%})")
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
        value = event.value.strip() or "unknown"
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
        top = self.diagnosis.causes[0] if self.diagnosis.causes else None
        if top is not None:
            self.say(f"Leading now: {top.title} ({'harmless' if top.benign else f'{top.score:.0%}'})")
        self.next_step()

    def finish(self) -> None:
        d = self.diagnosis
        chat = self.query_one("#chat", VerticalScroll)
        for old in self.query(FinalAnswer):
            old.remove()
        chat.mount(FinalAnswer(d))
        chat.call_after_refresh(chat.scroll_end, animate=False)
        options = self.query_one("#snippets", OptionList)
        options.clear_options()
        options.add_options([Option(f"[{i + 1}] {s.title} ({s.format})", id=str(i)) for i, s in enumerate(d.fix.snippets)])
        self.query_one("#composer", ContentSwitcher).current = "snippets"
        if d.fix.snippets:
            options.highlighted = 0
            self.selected_snippet = 0
        options.focus()
        self.say("Pick a snippet and press ctrl+o (or enter) to copy it or ctrl+s to save it; ctrl+b takes back an answer, ctrl+r starts over.")

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
        self.copy_to_clipboard(snippet.content)
        self.notify(f"Copied the {snippet.format} snippet to the clipboard.")

    def action_save_snippet(self) -> None:
        snippet = self._current_snippet()
        if snippet is None:
            self.notify("No fix snippet yet.", severity="warning")
            return
        path = self.save_dir / f"advisor-fix-{snippet.format}.{EXTENSIONS.get(snippet.language, 'txt')}"
        try:
            path.write_text(snippet.content, encoding="utf-8")
        except OSError as exc:
            self.notify(f"Could not save {path}: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"Saved {path}")

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

    def action_restart(self) -> None:
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


def run_tui(log_path: str | None = None, kb_dirs: list[str] | None = None) -> int:
    AdvisorApp(load_kb(kb_dirs or []), log_path=log_path).run()
    return 0
