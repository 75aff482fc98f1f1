"""The knowledge base's file formats, as strict pydantic models.

A KB cause is data plus documentation plus tests, in one YAML file (ruff's one-rule-per-file,
semgrep's rule-with-examples): signatures that find it in a log, rules over facts that raise or
lower it, fixes with version applicability, caveats and references, and example logs that the test
suite ranks. Unknown keys are errors, so a misspelled field never silently does nothing.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

KEBAB = r"^[a-z0-9]+(?:[-.][a-z0-9]+)*$"
SNAKE = r"^[a-z][a-z0-9_]*$"


class Strict(BaseModel):
    # validators are built on first use: a KB served from the compiled cache never needs them
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _check_url(url: str) -> str:
    if not re.match(r"^https://[^\s/]+\.[^\s]+$", url):
        raise ValueError(f"a reference must be an https:// URL, got {url!r}")
    return url


Url = Annotated[str, AfterValidator(_check_url)]


EventKind = Literal[
    "timeout", "heartbeat", "oom", "exception", "killed", "hardware", "network", "nccl-error",
    "store-timeout", "launch", "cascade",
]


class Signature(Strict):
    """A regex over the log that is evidence for a cause.

    Write it for the message *format* (what PyTorch/NCCL/a framework prints), never for one log's
    incidental text. Matching is case-insensitive unless `case_sensitive`; a space matches a line
    wrap too (see advisor.regex). `use` names a shared signature from kb/signatures.yaml instead
    of repeating its regex; the cause still chooses the weight.
    """

    id: str = Field(pattern=KEBAB)
    regex: str | None = Field(default=None, min_length=3)
    use: str | None = Field(default=None, pattern=KEBAB)
    weight: float = Field(ge=-20, le=20)
    case_sensitive: bool = False
    captures: dict[str, str] = Field(default_factory=dict)
    """named group -> fact name: the value the signature reads from the line."""
    event: EventKind | None = None
    """the line reports a failure of this kind; the earliest non-cascade one is the first failure."""
    unless: str | None = Field(default=None, min_length=3)
    """a pattern that, found on the same line, means the line is not this signature's evidence: the
    same words printed by another component for another reason (an errno's text after NCCL's
    UNIX-domain socket is no TCP port). RE2 has no look-arounds, so exclusions are written here."""
    note: str | None = None
    """where the message comes from (file, version) and why the pattern is shaped so."""
    from_message: str | None = None
    """set by the loader, never in a file: the catalogue message this signature stands for (its
    `use`, or a message's `points_to` naming this cause)."""

    @model_validator(mode="after")
    def _regex_or_use(self) -> "Signature":
        if (self.regex is None) == (self.use is None):
            raise ValueError("a signature has exactly one of `regex` or `use`")
        return self


class SharedSignature(Strict):
    id: str = Field(pattern=KEBAB)
    regex: str = Field(min_length=3)
    case_sensitive: bool = False
    event: EventKind | None = None
    note: str = Field(min_length=10)


class SharedSignatures(Strict):
    signatures: list[SharedSignature] = Field(min_length=1)


class Comparison(Strict):
    lt: float | None = None
    le: float | None = None
    gt: float | None = None
    ge: float | None = None
    present: bool | None = None


Scalar = Union[bool, int, float, str]
Condition = Union[Comparison, Scalar, list[Scalar]]


class Rule(Strict):
    """A fact-based adjustment: every condition in `when` must hold for `weight` to apply.

    Weights are log-likelihood ratios: +2 means "this fact is about e^2 = 7 times more likely
    under this cause than under a typical other cause".
    """

    when: dict[str, Condition] = Field(min_length=1)
    weight: float = Field(ge=-20, le=20)
    why: str = Field(min_length=8)


class Calc(Strict):
    """A number computed from the user's facts by a named calculator in advisor.tuning."""

    calc: str = Field(pattern=SNAKE)


class Setting(Strict):
    """One knob a fix sets. `knob` is an abstract setting that each framework file maps to its
    native key; `env` is an environment variable, renamed by torch version where it has an old
    name. Exactly one of them."""

    knob: str | None = Field(default=None, pattern=SNAKE)
    env: str | None = Field(default=None, pattern=r"^[A-Z][A-Z0-9_]*$")
    value: Scalar | Calc
    placeholder: bool = False
    """the value is an example the user must replace (an interface name, a path)."""
    from_fact: str | None = Field(default=None, pattern=SNAKE)
    """use this fact's value when it is known (then it is no placeholder), e.g. nodes -> num_nodes."""

    @model_validator(mode="after")
    def _one_target(self) -> "Setting":
        if (self.knob is None) == (self.env is None):
            raise ValueError("a setting names exactly one of `knob` or `env`")
        return self


class Applies(Strict):
    """Version applicability of a fix (PEP 440 specifiers); unknown versions never exclude."""

    torch: str | None = None
    nccl: str | None = None
    frameworks: list[str] = Field(default_factory=list)
    framework_version: str | None = None
    interconnect: list[Literal["nvlink", "pcie", "infiniband", "roce", "ethernet", "efa"]] = Field(default_factory=list)
    """the fabrics a fix is for (EFA's security groups mean nothing on InfiniBand); unknown never excludes."""
    engines: list[Literal["vllm", "sglang"]] = Field(default_factory=list)
    """the inference engines a fix is for (an engine's own setting); a log no engine printed excludes it,
    since a training job runs none."""


FixKind = Literal["infra", "code", "upgrade", "config", "env", "diagnostic"]


class Fix(Strict):
    id: str = Field(pattern=KEBAB)
    kind: FixKind
    title: str = Field(min_length=5)
    steps: str = Field(min_length=10)
    """what to do, in plain words (markdown)."""
    mitigation: bool = False
    """true when it hides the symptom rather than removing the cause: needs a caveat."""
    caveat: str | None = None
    settings: list[Setting] = Field(default_factory=list)
    applies: Applies = Field(default_factory=Applies)
    references: list[Url] = Field(min_length=1)


    @model_validator(mode="after")
    def _caveat_for_mitigations(self) -> "Fix":
        if (self.mitigation or self.kind == "env") and not self.caveat:
            raise ValueError("a mitigation (or env-var fix) needs a `caveat`: its cost, and when to remove it")
        return self


class Example(Strict):
    name: str = Field(min_length=3)
    log: str = ""
    recorded: str | None = Field(default=None, pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*--[a-z0-9]+(?:-[a-z0-9]+)*$")
    """a reproduction's log in kb/recorded (`<scenario>--<run>`), printed by the real software,
    instead of `log`: the loader reads it in."""
    answers: dict[str, str] = Field(default_factory=dict)
    rank: int = Field(default=1, ge=1, le=10)
    """positives: the cause must rank at or above this position."""
    expect_top: str | None = None
    """negatives: the cause id that should rank first instead (optional)."""
    source: str | None = None
    """where the text comes from: a message format, a reproduced run, an issue thread."""


    @model_validator(mode="after")
    def _one_text(self) -> "Example":
        if bool(self.log) == bool(self.recorded):
            raise ValueError("give the example's text in `log`, or name a recorded run in `recorded` (one of the two)")
        return self


class Examples(Strict):
    positive: list[Example] = Field(min_length=1)
    negative: list[Example] = Field(min_length=1)


class Symptoms(Strict):
    en: list[str] = Field(default_factory=list)
    zh: list[str] = Field(default_factory=list)


class Cause(Strict):
    id: str = Field(pattern=KEBAB)
    code: str = Field(pattern=KEBAB)
    title: str = Field(min_length=8)
    summary: str = Field(min_length=8)
    """the one-line diagnosis; may use {fact} placeholders."""
    explanation: str = Field(min_length=40)
    benign: bool = False
    """harmless noise: shown as such, never ranked above a real cause, and its lines are not
    evidence for anything else."""
    prior: float = Field(default=0.0, ge=-5, le=5)
    signatures: list[Signature] = Field(default_factory=list)
    symptoms: Symptoms = Field(default_factory=Symptoms)
    rules: list[Rule] = Field(default_factory=list)
    requires: dict[str, Condition] = Field(default_factory=dict)
    """conditions without which this cause cannot be the answer (a version bug needs the buggy
    version). One that fails rules the cause out; while one is unknown the cause may be listed
    but not win: it ranks below every cause that needs no unknown fact, and is never "diagnosed"."""
    needs_wait: bool = False
    """the cause explains ranks that waited for a slow one (a timeout, a hang): it is never
    "diagnosed" from a log that shows no wait, e.g. a save-path traceback that ends in an exception."""
    fixes: list[Fix] = Field(min_length=1)
    references: list[Url] = Field(min_length=1)
    examples: Examples


    @model_validator(mode="after")
    def _has_evidence(self) -> "Cause":
        if not self.signatures and not self.rules and not (self.symptoms.en or self.symptoms.zh):
            raise ValueError("a cause needs at least one signature, rule or symptom phrase")
        return self


# --- the message catalogue ---------------------------------------------------------------------

MessageLevel = Literal["error", "warn", "info"]
MessageRole = Literal["cause", "context", "benign"]
MESSAGE_ID = r"^[a-z0-9]+(?:-[a-z0-9]+)*\.[a-z0-9]+(?:-[a-z0-9]+)*$"


class Wording(Strict):
    """Another wording of the same message, printed by other versions."""

    text: str = Field(min_length=3)
    versions: str = Field(min_length=1)
    """PEP 440 specifier over the component's software versions that print this wording."""


class PointsTo(Strict):
    """A cause the message is evidence for, with the log-odds weight it adds (see kb/README.md)."""

    cause: str = Field(pattern=KEBAB)
    weight: float = Field(ge=-20, le=20)


class Message(Strict):
    """One message the software prints, as its source or binary spells it.

    `text` is the wording in the artifact (a printf/fmt format or a Python f-string, placeholders
    kept); `pattern` is the linear-time regex that finds it in a log. What it points to decides how
    it counts: `cause` messages add their weights to the causes named, `context` messages only give
    facts (captures) and explain a line, `benign` ones are harmless noise.
    """

    id: str = Field(pattern=MESSAGE_ID)
    level: MessageLevel
    text: str = Field(min_length=3)
    pattern: str = Field(min_length=3)
    case_sensitive: bool = False
    source: str = Field(min_length=3)
    """the file in the software's source tree that prints it (as in the mined release)."""
    versions: str = ""
    """PEP 440 specifier over the software's versions whose artifacts hold `text`; '' = every mined one."""
    wording: list[Wording] = Field(default_factory=list)
    meaning: str = Field(min_length=15)
    """what it means, in plain words."""
    role: MessageRole = "cause"
    points_to: list[PointsTo] = Field(default_factory=list)
    captures: dict[str, str] = Field(default_factory=dict)
    """named group -> fact name."""
    sets: dict[str, Scalar] = Field(default_factory=dict)
    """facts the message establishes by being printed at all, e.g. `{peer_lost: true}`."""
    event: EventKind | None = None
    refines: list[str] = Field(default_factory=list)
    """ids of messages whose general format this one is an instance of (NCCL's `Cuda failure '%s'`
    with one CUDA error string): it matches lines they match too, and says what they leave open."""
    sample: str | None = None
    """a printed instance of `text` when the placeholders need realistic values to match `pattern`."""
    examples: list[str] = Field(default_factory=list)
    """lines as printed in real logs (reproductions, issue threads): each must match `pattern`."""
    near_misses: list[str] = Field(default_factory=list)
    """lines that look alike but are another message: none may match `pattern`."""

    @model_validator(mode="after")
    def _role_and_targets(self) -> "Message":
        if self.role == "cause" and not self.points_to:
            raise ValueError("a message with role `cause` names at least one cause in `points_to`")
        if self.role == "context" and self.points_to:
            raise ValueError("a `context` message points to no cause (use role `cause`)")
        return self


class MinedFrom(Strict):
    """An artifact the messages of a file were read from."""

    artifact: str = Field(min_length=5)
    """package and version and the file inside it, e.g. `nvidia-nccl-cu12==2.21.5 libnccl.so.2 (strings)`."""
    url: Url


class MessageFile(Strict):
    """kb/messages/<component>.yaml: every message one component of one software prints."""

    component: str = Field(pattern=KEBAB)
    software: Literal[
        "nccl", "aws-ofi-nccl", "libfabric", "torch", "gloo", "deepspeed", "accelerate", "transformers", "lightning", "trl", "vllm",
        "torchtitan", "llama-factory", "open-r1", "linux", "slurm", "cuda", "libstdc++", "glibc", "python", "bash", "open-mpi",
        "nccl-tests", "sglang",
    ]
    title: str = Field(min_length=8)
    mined_from: list[MinedFrom] = Field(min_length=1)
    defaults: list[PointsTo] = Field(default_factory=list)
    """what a warning or error of this component points to when its entry says no more (`context`,
    not a cascade): the subsystem that printed it is itself a hint (an IB transport warning hints
    at the fabric). Keep these weights low (1-2.5): a symptom, not a verdict."""
    messages: list[Message] = Field(min_length=1)


# --- frameworks -------------------------------------------------------------------------------


class Detector(Strict):
    regex: str = Field(min_length=3)
    weight: float = Field(ge=0, le=20)
    case_sensitive: bool = False
    note: str | None = None


class VersionProbe(Strict):
    regex: str = Field(min_length=3)
    """must have a named group `version`."""
    case_sensitive: bool = False
    note: str | None = None


SnippetFormat = Literal[
    "llamafactory-yaml",
    "trl-yaml",
    "hf-cli",
    "openr1-yaml",
    "torchtitan-toml",
    "torchtitan-python",
    "lightning-python",
    "lightningcli-yaml",
    "accelerate-python",
    "accelerate-yaml",
    "deepspeed-env",
    "torch-python",
    "hf-python",
    "hf-json",
    "shell",
]


class Knob(Strict):
    """How a framework spells an abstract setting."""

    key: str
    unit: Literal["s", "min", "ms", "timedelta", "bool", "int", "str"]
    formats: list[SnippetFormat] = Field(min_length=1)
    """native formats to emit, first is preferred."""
    keys_by_format: dict[str, str] = Field(default_factory=dict)
    """a different key in some formats (torchtitan's `profiling` section became `profiler`)."""
    default: Scalar | None = None
    default_note: str | None = None
    references: list[Url] = Field(min_length=1)



class FormatWindow(Strict):
    """A snippet format that only some releases read (torchtitan TOML up to 0.2.2)."""

    format: SnippetFormat
    versions: str
    note: str


class Framework(Strict):
    id: str = Field(pattern=KEBAB)
    name: str
    aliases: list[str] = Field(default_factory=list)
    builds_on: list[str] = Field(default_factory=list)
    """frameworks it runs on top of (LLaMA-Factory on transformers): a more specific detection wins."""
    description: str = Field(min_length=20)
    detect: list[Detector] = Field(default_factory=list)
    versions: list[VersionProbe] = Field(default_factory=list)
    knobs: dict[str, Knob] = Field(default_factory=dict)
    format_windows: list[FormatWindow] = Field(default_factory=list)
    launch: str | None = None
    """how a run is launched, for snippet comments."""
    references: list[Url] = Field(min_length=1)



# --- phases and questions ---------------------------------------------------------------------

Phase = Literal["init", "first-step", "train", "save", "eval", "data-prep", "end-of-epoch"]
PHASES: tuple[str, ...] = ("init", "first-step", "train", "save", "eval", "data-prep", "end-of-epoch")


class PhaseCue(Strict):
    phase: Phase
    regex: str = Field(min_length=3)
    case_sensitive: bool = False
    note: str | None = None


class PhaseCues(Strict):
    cues: list[PhaseCue] = Field(min_length=1)


class Choice(Strict):
    value: str
    label: str


class Question(Strict):
    id: str = Field(pattern=SNAKE)
    text: str = Field(min_length=8)
    kind: Literal["choice", "number", "version", "yes_no"]
    fact: str = Field(pattern=SNAKE)
    choices: list[Choice] = Field(default_factory=list)
    bins: list[float] = Field(default_factory=list)
    """numbers: bin edges used to reason about the answer before it is given."""
    unit: str | None = None
    help: str | None = None
    max: float | None = None
    """numbers: the largest plausible answer; a bigger one is refused as a typo (and would overflow
    the calculators that scale timeouts with it)."""
    ask_when: dict[str, Condition] = Field(default_factory=dict)
    """facts that must hold for the question to make sense (it presumes them), e.g. a lost peer."""

    @model_validator(mode="after")
    def _shape(self) -> "Question":
        if self.kind == "choice" and len(self.choices) < 2:
            raise ValueError("a choice question needs at least two choices")
        if self.kind == "number" and not self.bins:
            raise ValueError("a number question needs `bins`")
        if self.kind == "number" and self.max is None:
            raise ValueError("a number question needs `max`, the largest plausible answer")
        return self


class Questions(Strict):
    questions: list[Question] = Field(min_length=1)


class Codes(Strict):
    causes: dict[str, str] = Field(min_length=1)


def describe_field(loc: tuple[Any, ...]) -> str:
    """`('fixes', 0, 'caveat')` -> `fixes[0].caveat`, the way a user reads a YAML path."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


# --- timers: every clock that can end or stall a distributed job (kb/timers.yaml) -------------

TimerUnit = Literal["s", "ms", "min", "exponent", "count"]


class TimerFired(Strict):
    """A message format that shows this clock fired. RE2, matched against a failure line; a named
    group `value` reads the printed duration (in `unit`, or in a named group `unit`: ms or s)."""

    regex: str = Field(min_length=3)
    unit: Literal["s", "ms", "min", "hms"] = "s"
    """`hms` reads a Python timedelta as printed: `0:30:00`."""
    case_sensitive: bool = False
    note: str | None = None


class TimerValue(Strict):
    """One default of a clock or a setting and the versions (PEP 440) it holds for; a version that
    is not named does not decide it."""

    value: float | None
    """None: this layer sets nothing, the layer below decides (e.g. torch's own default)."""
    unit: TimerUnit = "s"
    torch: str | None = None
    nccl: str | None = None
    framework_version: str | None = None
    """a setting's own framework version (the timer's `framework`)."""
    backend: str | None = None
    forwarded: bool = True
    """false: this default never reaches the clock (accelerate drops its class default)."""
    note: str | None = None
    references: list[Url] = Field(min_length=1)


class TimerTrap(Strict):
    """Why raising a setting may not change the clock that fired (or changes it differently)."""

    id: str = Field(pattern=KEBAB)
    title: str = Field(min_length=8)
    text: str = Field(min_length=40)
    applies: Applies = Field(default_factory=Applies)
    """the versions it holds for (listed by `advisor kb facts`; the decision is in advisor.timers)."""
    references: list[Url] = Field(min_length=1)


class TimerExample(Strict):
    """A log (and answers) in which this clock fired; `advisor kb check` runs it."""

    name: str = Field(min_length=3)
    log: str = Field(min_length=1)
    answers: dict[str, str] = Field(default_factory=dict)
    seconds: float | None = None
    """the value the timeout object must report."""
    reachable: bool | None = None
    """the reachability it must report (checked when given)."""
    value_from: str | None = Field(default=None, pattern=KEBAB)
    """the timer whose value must be in force (default: this timer)."""


class Timer(Strict):
    """A clock that can end or stall a job (kind `clock`), or a framework's setting that gives a
    clock its value (kind `setting`, `feeds` that clock)."""

    id: str = Field(pattern=KEBAB)
    name: str = Field(min_length=8)
    kind: Literal["clock", "setting"]
    layer: Literal["torch", "nccl", "gloo", "launcher", "framework"]
    what: str = Field(min_length=40)
    """what it guards and what happens when it runs out, in plain words."""
    unit: TimerUnit = "s"
    framework: str | None = None
    """a setting's framework (a kb/frameworks id); frameworks built on it inherit it."""
    feeds: str | None = None
    """a setting: the clock it gives its value to."""
    follows: str | None = None
    """a clock that takes another clock's value where the job creates it (the TCPStore that
    init_process_group builds takes the process-group timeout)."""
    knob: str | None = Field(default=None, pattern=SNAKE)
    """the abstract knob (kb/frameworks/*.yaml) that sets it in a framework's own format."""
    env: str | None = Field(default=None, pattern=r"^[A-Z][A-Z0-9_]*$")
    key: str = Field(min_length=3)
    """the native name of its value (`ddp_timeout`, `--rdzv-conf join_timeout`, `NCCL_IB_TIMEOUT`)."""
    set: str = Field(min_length=8)
    """how to set it natively."""
    messages: list[str] = Field(default_factory=list)
    """ids of the message formats that show it fired (see advisor.knowledge.message_ids)."""
    fired: list[TimerFired] = Field(default_factory=list)
    """the patterns that decide that this clock, and not another one sharing a message, fired."""
    value_fact: str | None = Field(default=None, pattern=SNAKE)
    """the fact holding the printed value when the line itself does not carry it."""
    value_fact_unit: Literal["s", "ms"] = "s"
    defaults: list[TimerValue] = Field(default_factory=list)
    traps: list[TimerTrap] = Field(default_factory=list)
    next: str | None = None
    """the clock that fires next if this one is raised (None: nothing inside the job)."""
    next_note: str | None = None
    references: list[Url] = Field(min_length=1)
    examples: list[TimerExample] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shape(self) -> "Timer":
        if self.kind == "setting" and not self.feeds:
            raise ValueError("a setting names the clock it `feeds`")
        if self.kind == "clock" and self.feeds:
            raise ValueError("only a setting `feeds` a clock")
        if not self.defaults and not self.follows:
            raise ValueError("a timer needs `defaults`, or `follows` another clock")
        if self.fired and not self.messages:
            raise ValueError("a timer that can be seen firing names its `messages`")
        return self


class Timers(Strict):
    timers: list[Timer] = Field(min_length=1)


class ReleaseFixNote(Strict):
    """One fix a release note names, in the software's own words (kb/releases/, mined by
    tools/mine/nccl_releases.py): what it is about is derived from those words."""

    text: str = Field(min_length=4)
    kinds: list[Literal["hang", "crash", "corruption", "error", "leak", "perf"]] = Field(default_factory=list)
    areas: list[str] = Field(default_factory=list)
    issues: list[int] = Field(default_factory=list)
    prs: list[int] = Field(default_factory=list)


class ReleaseNotes(Strict):
    version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    tag: str
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$")
    fixes: list[ReleaseFixNote] = Field(min_length=1)


class SoftwareReleases(Strict):
    """kb/releases/<software>.yaml: the fixes each release shipped, oldest release first."""

    software: Literal["nccl"]
    source: str = Field(pattern=r"^https://")
    mined_by: str
    note: str = ""
    releases: list[ReleaseNotes] = Field(min_length=1)
