"""The wizard's widgets: chat bubbles, the live side panel, the fix viewer.

Presentation only: every widget renders a `Diagnosis` the core produced.
"""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import HorizontalScroll, Vertical, VerticalScroll
from textual.widgets import Collapsible, Markdown, Static

from advisor.models import Diagnosis, Snippet, fact_text
from advisor.render import paragraphs, rank_picture

SHOWN_FACTS = ("framework", "framework_version", "torch_version", "phase", "op_type", "timeout_ms", "world_size",
               "nodes", "gpus_per_node", "model_size_b", "first_failure", "storage")


class ChatMessage(Static):
    """One turn of the conversation: the advisor's (left) or the user's (right)."""

    DEFAULT_CSS = """
    ChatMessage { width: 1fr; padding: 0 1; margin: 0 0 1 0; }
    ChatMessage.advisor { background: $boost; border-left: thick $primary; }
    ChatMessage.user { background: $panel; border-right: thick $accent; text-align: right; }
    """

    def __init__(self, text: str | Text, role: str = "advisor", **kwargs) -> None:
        super().__init__(text, classes=role, **kwargs)


class SnippetView(Vertical):
    """A fix snippet with syntax highlighting, in the user's framework's own format. Lines are never
    wrapped (a wrapped shell or YAML line breaks when copied with the mouse): wide ones scroll."""

    DEFAULT_CSS = """
    SnippetView { height: auto; margin: 0 0 1 0; border: round $secondary; padding: 0 1; }
    SnippetView .title { color: $text-muted; }
    SnippetView HorizontalScroll { height: auto; scrollbar-size-horizontal: 1; }
    SnippetView .code { width: auto; }
    """

    def __init__(self, snippet: Snippet, index: int) -> None:
        super().__init__(id=f"snippet-{index}")
        self.snippet = snippet
        self.index = index

    def compose(self) -> ComposeResult:
        yield Static(f"[{self.index + 1}] {self.snippet.title}  ({self.snippet.format})", classes="title", markup=False)
        with HorizontalScroll():
            yield Static(Syntax(self.snippet.content.rstrip("\n"), self.snippet.language, theme="ansi_dark",
                                background_color="default", word_wrap=False), classes="code")


class FinalAnswer(Vertical):
    """The diagnosis in one line, the explanation, the evidence (collapsed) and the fix."""

    DEFAULT_CSS = """
    FinalAnswer { height: auto; }
    FinalAnswer .headline { text-style: bold; color: $warning; margin: 0 0 1 0; }
    FinalAnswer Collapsible { height: auto; }
    """

    def __init__(self, diagnosis: Diagnosis) -> None:
        super().__init__(id="final")
        self.diagnosis = diagnosis

    def compose(self) -> ComposeResult:
        d = self.diagnosis
        yield Static(d.headline, classes="headline", markup=False)
        if d.fix.explanation:
            yield Markdown("\n\n".join(p for p in paragraphs(d.fix.explanation) if p))
        top = next((c for c in d.causes if not c.benign), None)
        lines = []
        if top is not None and d.status != "no-match":
            lines += [f"line {e['line']}: {e['text']}" if e["line"] else f"description: {e['text']}" for e in top.evidence["lines"][:8]]
            lines += [f"fact {f['fact']}={fact_text(f['value'])} ({f['weight']:+}): {f['why']}" for f in top.evidence["facts"][:6]]
        lines += rank_picture(d.ranks)
        if lines:
            with Collapsible(title="Evidence", collapsed=True, id="evidence"):
                yield Static("\n".join(lines), markup=False)
        if d.timeout is not None:
            from advisor.render import timeout_lines

            # which clock fired and whether the user's setting reaches it: the trap most fixes fall into
            with Collapsible(title=f"Timeout: {d.timeout.clock}", collapsed=True, id="timeout"):
                yield Static("\n".join(timeout_lines(d.timeout)), markup=False, id="timeout-lines")
        if d.later_fixes:
            from advisor.render import later_fixes_heading

            with Collapsible(title=later_fixes_heading(d), collapsed=True, id="later-fixes"):
                yield Static("\n".join(f"{f.version}: {f.text}\n  {f.url}" for f in d.later_fixes), markup=False)
        if d.fix.actions:
            steps = "\n".join(f"{i}. [{'mitigation' if a.mitigation else a.kind}] {a.title}" + (f" — {a.caveat.split('.')[0]}." if a.caveat else "")
                              for i, a in enumerate(d.fix.actions, 1))
            yield Static(steps, markup=False, id="actions")
        for i, snippet in enumerate(d.fix.snippets):
            yield SnippetView(snippet, i)
        if d.fix.references:
            yield Static("References:\n" + "\n".join(d.fix.references[:5]), markup=False, classes="refs")


class SidePanel(VerticalScroll):
    """Facts read from the log and the ranked causes, refreshed after every answer."""

    DEFAULT_CSS = """
    SidePanel { width: 34%; min-width: 24; max-width: 44; border-left: solid $primary; padding: 0 1; }
    SidePanel .heading { text-style: bold; margin: 1 0 0 0; }
    SidePanel #facts { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def compose(self) -> ComposeResult:
        yield Static("Causes", classes="heading")
        yield Static("(nothing yet)", id="causes", markup=False)
        yield Static("Facts", classes="heading")
        yield Static("(paste a log to start)", id="facts", markup=False)

    def show(self, diagnosis: Diagnosis | None) -> None:
        causes = self.query_one("#causes", Static)
        facts = self.query_one("#facts", Static)
        if diagnosis is None:
            causes.update("(nothing yet)")
            facts.update("(paste a log to start)")
            return
        shown_causes = diagnosis.causes[:5]
        codes = [c.code for c in shown_causes]
        width = max(self.content_region.width, 20)
        rows = Text()
        for i, c in enumerate(shown_causes):
            score = "noise" if c.benign else f"{c.score:.0%}"
            rows.append(("\n" if i else "") + f"{score:>5} ", style="bold" if i == 0 else "")
            rows.append(fit_words(c.code, width - 6, "-", 6), style="bold" if i == 0 else "")
            if codes.count(c.code) > 1:  # two causes of one code: their titles tell them apart
                rows.append("\n" + fit_words(c.title, width - 6, " ", 6), style="dim")
        causes.update(rows if diagnosis.causes else "(no match yet)")
        shown = []
        for name in SHOWN_FACTS:
            if name in diagnosis.facts:
                origin = diagnosis.fact_sources[name].origin
                mark = {"answer": " (you)", "inferred": " (?)"}.get(origin, "")
                shown.append(f"{name}: {fact_text(diagnosis.facts[name])}{mark}")
        facts.update(Text("\n".join(shown), no_wrap=True, overflow="ellipsis") if shown else "(none read yet)")


def fit_words(text: str, width: int, sep: str, indent: int) -> str:
    """`text` broken after `sep` to lines of at most `width` (a cause code at its hyphens), the lines
    after the first indented by `indent`: nothing is cut off."""
    lines, line = [], ""
    for word in text.split(sep):
        piece = word if not line else sep + word if sep != " " else " " + word
        if line and len(line) + len(piece) > width:
            lines.append(line + (sep if sep != " " else ""))
            line = word
        else:
            line += piece
    lines.append(line)
    return ("\n" + " " * indent).join(lines)
