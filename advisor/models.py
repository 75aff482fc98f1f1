"""The diagnosis as data: what every front end (CLI, HTTP, TUI) receives from the core.

`Diagnosis.model_dump(mode="json")` is the stable JSON contract documented in the README:
`causes` best first, `facts`, `questions` best first, `fix`, plus `status`, `notices`,
`fact_sources` and `ranks`. Add fields, never rename or remove them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.fr_models import FlightRecorderSummary
from advisor.envfile import EnvSnapshot


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FailureEvent(Model):
    """A line the KB declared to be a failure of some kind (timeout, oom, exception, ...)."""

    kind: str
    line: int
    rank: int | None = None
    text: str = ""
    timestamp: tuple[int, int, int] | None = None
    signature: str | None = None


class FactValue(Model):
    value: Any
    origin: Literal["log", "answer", "inferred", "flag", "dump", "env"] = "log"
    line: int | None = None
    text: str | None = None
    detail: str | None = None
    # what an inferred release was read from, so explanations can say how it is known
    basis: Literal["message wording", "traceback frames", "NCCL source lines"] | None = None


def fact_text(value: Any) -> str:
    """A fact's value as people read it: a version range inferred from traceback frames or message
    wordings (a list of releases) reads `4.38.0 .. 4.38.2`."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v[:1].isdigit() for v in value):
        return value[0] if len(value) == 1 else f"{value[0]} .. {value[-1]}"
    return str(value)


class Facts(Model):
    values: dict[str, FactValue] = Field(default_factory=dict)
    events: list[FailureEvent] = Field(default_factory=list)

    def get(self, name: str, default: Any = None) -> Any:
        fact = self.values.get(name)
        return default if fact is None else fact.value

    def known(self, name: str) -> bool:
        return name in self.values and self.values[name].value is not None


class EvidenceLine(Model):
    line: int
    text: str
    signature: str
    weight: float
    rank: int | None = None


class EvidenceFact(Model):
    fact: str
    value: Any
    weight: float
    why: str
    line: int | None = None


class RankedCause(Model):
    code: str
    id: str
    title: str
    score: float = Field(description="probability-like confidence in [0, 1], best first")
    raw_score: float = Field(description="sum of the log-likelihood weights behind `score`")
    summary: str
    benign: bool = False
    basis: Literal["evidence", "similar-text"] = Field(
        default="evidence",
        description="`evidence`: ranked on what the log shows; `similar-text`: a low-confidence candidate whose known "
        "messages or examples read like the log's error lines, listed when nothing specific matched")
    unconfirmed: list[str] = Field(
        default_factory=list, description="facts this cause requires that are still unknown (answer them to confirm it)")
    held_back_score: float | None = Field(
        default=None, description="for a cause with `unconfirmed` facts: the raw score it would have once they hold")
    evidence: dict[str, list[Any]] = Field(
        default_factory=lambda: {"lines": [], "facts": [], "symptoms": []},
        description="`lines`: matched log lines (line numbers 1-based); `facts`: facts used with weights; "
        "`symptoms`: fuzzy matches of the free-text description",
    )


class QuestionOut(Model):
    id: str
    text: str
    kind: str
    choices: list[dict[str, str]] | None = None
    unit: str | None = None
    help: str | None = None
    gain: float = Field(description="expected information gain in bits, or the value of the fix parameter")
    reason: str


class Snippet(Model):
    framework: str
    format: str
    language: str
    title: str
    content: str


class FixStep(Model):
    id: str
    kind: str
    title: str
    steps: str
    mitigation: bool = False
    caveat: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    derivations: list[str] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    applies: bool = True
    applies_note: str | None = None


class Fix(Model):
    cause_id: str | None
    summary: str
    explanation: str
    actions: list[FixStep] = Field(default_factory=list)
    snippets: list[Snippet] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    next_run: list[str] = Field(default_factory=list, description="what to turn on to see more next time")


class Notice(Model):
    """A harmless line of the log (`kind` "harmless": its cause and line), or something about the
    request itself the user should know (`kind` "input": an answer that was not understood; line 0)."""

    line: int
    text: str
    cause_id: str
    title: str
    kind: Literal["harmless", "input"] = "harmless"


class RankRow(Model):
    rank: int
    state: Literal["timed-out", "failed", "silent", "printed"]
    seq: int | None = None
    op: str | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    last_collective: str | None = Field(default=None, description="its last collective in the Flight Recorder dumps")
    flight_recorder: Literal["waiting", "behind", "mismatch", "in-step", "no-dump", "unknown"] | None = None


class LaterFix(Model):
    """A fix a later release of the software shipped, in the part of it that failed in this log:
    the release note's own words, the release, and the issues it cites."""

    software: str
    version: str
    text: str
    kinds: list[str] = Field(default_factory=list)
    areas: list[str] = Field(default_factory=list, description="the parts of the software the fix and the log's failure share")
    url: str = Field(description="the release's tag, or the first issue the note cites")


class RecognisedMessage(Model):
    """A catalogued message found in the log, with what it means."""

    id: str
    component: str
    level: str
    role: str
    line: int
    count: int
    text: str
    meaning: str
    points_to: list[str] = Field(default_factory=list)
    source: str = ""
    rank: int | None = None


class TimeoutReach(Model):
    """Whether the user's own framework setting reaches the clock that fired."""

    value: bool | None = Field(description="true: raising that setting changes this clock; false: it cannot (see `trap`); null: not known yet")
    setting: str | None = Field(default=None, description="timer id of the user's setting for this clock (kb/timers.yaml)")
    how: str | None = Field(default=None, description="how to set the knob that does reach this clock")
    trap: str | None = Field(default=None, description="id of the trap that explains a setting that does not reach it, or a value dropped on the way")
    why: str = ""


class TimeoutReport(Model):
    """Which clock fired, where its value came from, and what raising it would do."""

    clock: str = Field(description="timer id of the clock that fired (kb/timers.yaml)")
    seconds: float | int | None = Field(description="its value, as printed or (when nothing is printed) inferred")
    origin: str = Field(description="where the value came from: `torch default: ...`, `framework default: ...`, "
                                    "`explicit setting: ...` or `not known: ...`, with the versions that decide it")
    reachable: TimeoutReach
    next_clock: str | None = Field(description="the clock that fires next if this one is raised (null: nothing inside the job)")
    title: str = ""
    source: str | None = Field(default=None, description="timer id whose value is in force (a framework setting, or the clock's own default)")
    inferred: bool = Field(default=False, description="`seconds` is not printed in the log but inferred from defaults")
    line: int | None = None
    next_note: str | None = None
    references: list[str] = Field(default_factory=list)


class Diagnosis(Model):
    status: Literal["diagnosed", "uncertain", "no-match"]
    headline: str
    causes: list[RankedCause]
    facts: dict[str, Any]
    fact_sources: dict[str, FactValue]
    questions: list[QuestionOut]
    fix: Fix
    notices: list[Notice] = Field(default_factory=list)
    ranks: list[RankRow] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)
    messages: list[RecognisedMessage] = Field(
        default_factory=list,
        description="catalogued messages in the log (errors first, then by line), each with its plain meaning")
    redactions: int = 0
    version: str = "1"
    timeout: TimeoutReport | None = Field(default=None, description="in a timeout diagnosis: which clock fired and where its value came from")
    flight_recorder: FlightRecorderSummary | None = Field(default=None, description="what the Flight Recorder dumps show (--dumps)")
    later_fixes: list[LaterFix] = Field(
        default_factory=list,
        description="fixes later NCCL releases shipped in the parts of NCCL this log's warnings and error trail come from")


class DiagnoseRequest(Model):
    """What a front end asks the core: the log and whatever the user already answered."""

    log: str | bytes | None = None
    description: str | None = Field(default=None, description="free-text description of the failure, any language")
    answers: dict[str, str] = Field(default_factory=dict)
    framework: str | None = None
    mask_hosts: bool = Field(default=False, description="also mask host names and IP addresses in the output")
    max_causes: int = Field(default=5, ge=1, le=50)
    max_questions: int = Field(default=3, ge=0, le=20)
    env: list[EnvSnapshot] = Field(default_factory=list, max_length=1024,
                                   description="env snapshots (`advisor env --json`): they answer what the machine knows")
