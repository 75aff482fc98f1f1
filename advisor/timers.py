"""Which clock fired, where its value came from, whether the user's setting reaches it, and which
clock fires next: the `timeout` object of every timeout diagnosis.

A job has a dozen clocks (kb/timers.yaml): the process-group watchdog, the heartbeat monitor, the
rendezvous store, torchrun's rendezvous, gloo, vLLM's weight-sync store, NCCL's InfiniBand timer,
each with its own default per version and its own knob per framework. "I raised the timeout and
nothing changed" usually means the user raised a setting that never reached the clock that fired.

Pure: a function of the KB's timer table and the facts (versions, framework, the printed value),
so every front end shows the same answer. Defaults, knobs, trap texts and references come from the
table; this module decides which of them apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from advisor import schema
from advisor.models import Facts, TimeoutReach, TimeoutReport, fact_text
from advisor.regex import compile_pattern
from advisor.versions import version_matches

# failure kinds a clock can be behind; IB retry exhaustion is reported as a network failure
CLOCK_EVENTS = ("timeout", "heartbeat", "store-timeout", "network", "nccl-error")
# when no pattern names the clock, the kind of the failure still does
KIND_CLOCK = {"heartbeat": "heartbeat-monitor", "timeout": "pg-collective", "store-timeout": "init-store"}
HF_SETTING = "hf-ddp-timeout"
PG = "pg-collective"
MAX_VALUE_CHARS = 24  # a printed duration longer than this is junk (a hostile line), not a value
STORE_DEFAULT_S = 300
IB_UNIT_S = 4.096e-6
# which process group a watchdog line is about (torch 2.6+ / 2.3-2.5 prefixes)
PG_GUID = r"\[PG ID (\d+) PG GUID [^\s(\]]*\(([^)\]]*)\)"
PG_RANK = r"\[PG (\d+) Rank \d+\]"


@dataclass
class Firing:
    """A clock seen firing: the timer, the value (printed, or None), and where."""

    timer: schema.Timer
    seconds: float | None
    line: int | None = None
    text: str = ""


@dataclass
class Context:
    """The facts that decide a clock's value, read once."""

    facts: Facts
    chain: list[str] = field(default_factory=list)

    def get(self, name: str):
        return self.facts.get(name)

    @property
    def framework(self) -> str | None:
        return self.facts.get("framework")

    def version(self, package: str) -> str | list[str] | None:
        """A package's version: its own fact, or the framework version when it is the framework."""
        own = self.facts.get(f"{package.replace('-', '_')}_version")
        if own:
            return own  # a string, or the list of releases traceback frames fit
        if self.framework == package and self.facts.get("framework_version"):
            return str(self.facts.get("framework_version"))
        return None

    def holds(self, package: str, spec: str | None) -> bool | None:
        if not spec:
            return True
        if package == "torch":
            version = self.get("torch_version")
        elif package == "nccl":
            version = self.get("nccl_version")
        else:
            version = self.version(package)
        return version_matches(version, spec) if version else None


# --- which clock fired --------------------------------------------------------------------------


def _clocks(kb) -> list[schema.Timer]:
    """Clocks with patterns, the most specific first: a framework's store (vLLM's weight sync)
    before the generic TCPStore it shares a message with."""
    order = {"framework": 0, "nccl": 1, "launcher": 2, "gloo": 3, "torch": 4}
    clocks = [t for t in kb.timers.values() if t.kind == "clock" and t.fired]
    return sorted(clocks, key=lambda t: order[t.layer])


def _to_seconds(text: str | None, unit: str) -> float | None:
    """A printed duration in seconds; None when there is none or it cannot be a real one."""
    if not text or len(text) > MAX_VALUE_CHARS:
        return None
    try:
        if unit == "hms":
            parts = [float(p) for p in text.split(":")]
            seconds = 0.0
            for part in parts:
                seconds = seconds * 60 + part
            return seconds
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value / 1000 if unit == "ms" else value * 60 if unit == "min" else value


def _match(timer: schema.Timer, text: str) -> tuple[bool, float | None]:
    for fired in timer.fired:
        m = compile_pattern(fired.regex, not fired.case_sensitive).search(text)
        if m is None:
            continue
        groups = m.groupdict()
        unit = groups.get("unit") or fired.unit
        return True, _to_seconds(groups.get("value"), unit)
    return False, None


def _fact_seconds(timer: schema.Timer, facts: Facts) -> float | None:
    if not timer.value_fact or not facts.known(timer.value_fact):
        return None
    try:
        value = float(facts.get(timer.value_fact))
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value / 1000 if timer.value_fact_unit == "ms" else value


def which_clock(kb, facts: Facts) -> Firing | None:
    """The first clock that fired: the earliest failure line a clock's pattern names (or whose
    kind says which clock it was); without one, the printed value a fact holds."""
    clocks = _clocks(kb)
    for event in facts.events:
        if event.kind not in CLOCK_EVENTS:
            continue
        for timer in clocks:
            hit, seconds = _match(timer, event.text)
            if hit:
                if seconds is None:
                    seconds = _fact_seconds(timer, facts)
                return Firing(timer, seconds, event.line, event.text)
        fallback = KIND_CLOCK.get(event.kind)
        if fallback in kb.timers:
            timer = kb.timers[fallback]
            if fallback == PG and facts.get("backend") == "gloo" and "gloo-op" in kb.timers:
                timer = kb.timers["gloo-op"]
            return Firing(timer, _fact_seconds(timer, facts) or _fact_seconds(kb.timers[fallback], facts), event.line, event.text)
    for fact, timer_id in (("heartbeat_timeout_s", "heartbeat-monitor"), ("timeout_ms", PG), ("store_timeout_s", "init-store")):
        if facts.known(fact) and timer_id in kb.timers:
            timer = kb.timers[timer_id]
            src = facts.values[fact]
            return Firing(timer, _fact_seconds(timer, facts), src.line, src.text or "")
    return None


# --- where the value came from ------------------------------------------------------------------


def _num(seconds: float | None) -> float | int | None:
    if seconds is None:
        return None
    return int(seconds) if float(seconds).is_integer() else round(seconds, 1)


def _s(seconds: float | None) -> str:
    return "?" if seconds is None else f"{_num(seconds)} s"


def find_trap(kb, trap_id: str) -> schema.TimerTrap | None:
    for timer in kb.timers.values():
        for trap in timer.traps:
            if trap.id == trap_id:
                return trap
    return None


def defaults_for(timer: schema.Timer, ctx: Context, backend: str | None = None) -> list[schema.TimerValue]:
    """The timer's defaults that may hold here: an unknown version keeps every candidate."""
    out = []
    for value in timer.defaults:
        if ctx.holds("torch", value.torch) is False or ctx.holds("nccl", value.nccl) is False:
            continue
        if value.framework_version and timer.framework and ctx.holds(timer.framework, value.framework_version) is False:
            continue
        if value.backend and backend and value.backend != backend:
            continue
        out.append(value)
    return out


def _seconds_of(value: schema.TimerValue) -> float | None:
    if value.value is None:
        return None
    return value.value * 60 if value.unit == "min" else value.value


def value_versions(value: schema.TimerValue, framework: str | None = None, sep: str = ", ", backend_word: str = "") -> str:
    """The versions (and backend) a timer value applies to, e.g. "torch >=2.2, nccl"."""
    parts = []
    if value.torch:
        parts.append(f"torch {value.torch}")
    if value.nccl:
        parts.append(f"NCCL {value.nccl}")
    if value.framework_version:
        parts.append(f"{framework or 'framework'} {value.framework_version}")
    if value.backend:
        parts.append(backend_word + value.backend)
    return sep.join(parts)




def user_setting(kb, ctx: Context, clock: str = PG) -> schema.Timer | None:
    """The framework setting that feeds `clock` for the user's framework (the closest one in the
    chain of frameworks it builds on), or None for plain PyTorch or an unknown framework."""
    for fw in ctx.chain:
        for timer in kb.timers.values():
            if timer.kind == "setting" and timer.feeds == clock and timer.framework == fw:
                if fw == "torchtitan" and timer.knob != "collective_timeout":
                    continue  # the train timeout is the one users raise; the init one is decided below
                return timer
    return None


@dataclass
class Verdict:
    origin: str
    source: str | None
    reach: TimeoutReach


def _torch_note(ctx: Context) -> str:
    """`; you have torch 2.6` (and how we know, when it was inferred)."""
    fact = ctx.facts.values.get("torch_version")
    if fact is None or not fact.value:
        return ""
    how = ""
    if fact.origin == "inferred" and fact.basis:
        how = f" (inferred from the {fact.basis})"
    return f"; you have torch {fact_text(fact.value)}{how}"


def _torch_default_text(kb, ctx: Context, backend: str, seconds: float | None = None) -> tuple[str, list[float]]:
    """`600 s (torch >=2.2, nccl)` for the value in force, and every value torch's default can be
    here (both 600 and 1800 when the torch version is not known)."""
    values = defaults_for(kb.timers[PG], ctx, backend)
    candidates = sorted({_seconds_of(v) for v in values if _seconds_of(v) is not None})
    match = next((v for v in values if _seconds_of(v) == seconds), None)
    if match is not None:
        text = f"{_s(seconds)} ({value_versions(match) or 'every torch version'})"
    else:
        text = "600 s for NCCL from torch 2.2, 1800 s before 2.2 and for gloo"
    return text + _torch_note(ctx), candidates


def _pg_verdict(kb, ctx: Context, seconds: float | None, backend: str, pg_desc: str | None) -> Verdict:
    """Where a process-group timeout came from, and whether the user's setting reaches it."""
    setting = user_setting(kb, ctx)
    torch_text, torch_values = _torch_default_text(kb, ctx, backend, seconds)
    own = kb.timers[PG]
    how = setting.set if setting else own.set
    sid = setting.id if setting else None
    group = f" of process group {pg_desc}" if pg_desc else ""
    side_group = bool(pg_desc) and not pg_desc.startswith("0") and "default_pg" not in pg_desc

    def verdict(origin: str, source: str | None, value: bool | None, why: str, trap: str | None = None,
                setting_id: str | None = sid, how_text: str | None = how) -> Verdict:
        return Verdict(origin, source, TimeoutReach(value=value, setting=setting_id, how=how_text, trap=trap, why=why))

    if seconds is None:
        return verdict(f"not known: the log does not print the timeout{group}; {torch_text}", None, True if setting is None else None,
                       "the value in force is not printed; raising the setting below changes it unless a trap applies")
    if side_group and seconds in torch_values and setting is not None:
        framework_value = _setting_seconds(setting, ctx, backend)
        if framework_value is not None and framework_value != seconds:
            trap = find_trap(kb, "new-group-own-timeout")
            return verdict(f"torch default: {torch_text}, for a group created without timeout={group}",
                           PG, False, _trap_text(trap), "new-group-own-timeout", how_text=own.set)
    if setting is None:
        guesses = _framework_guesses(kb, seconds) if ctx.framework != "pytorch" else ""
        if seconds in torch_values and not guesses:
            return verdict(f"torch default: {torch_text}", PG, True if ctx.framework == "pytorch" else None,
                           "init_process_group(timeout=...) sets it" + ("" if ctx.framework == "pytorch" else
                                                                         "; if a framework creates the group, answer framework=... to know its setting"))
        if guesses:
            also = f"torch's own default ({torch_text.split('(', 1)[1]} or " if seconds in torch_values else ""
            return verdict(f"not known: {_s(seconds)} is {also}{guesses}: answer framework=... to decide", None, None,
                           "which setting reaches it depends on the framework that creates the group")
        return verdict(f"explicit setting: {_s(seconds)}, passed where the group was created (init_process_group(timeout=...) or a framework)",
                       None, True if ctx.framework == "pytorch" else None,
                       "an explicit value reached the group: raising that value changes it")
    handler = _FRAMEWORK_VERDICTS.get(setting.id, _setting_verdict)
    return handler(kb, ctx, seconds, backend, setting, torch_text, torch_values, verdict)


def _setting_seconds(setting: schema.Timer, ctx: Context, backend: str) -> float | None:
    """The value the setting gives the clock when the user leaves it alone (None: several, or none)."""
    values = [v for v in defaults_for(setting, ctx, backend) if v.forwarded and not (v.backend and v.backend != backend)]
    seconds = {_seconds_of(v) for v in values}
    return seconds.pop() if len(seconds) == 1 else None


def _trap_text(trap: schema.TimerTrap | None) -> str:
    return " ".join(trap.text.split()) if trap else ""


def _framework_guesses(kb, seconds: float) -> str:
    """`the default of A or of B`: the framework settings whose default is this value."""
    names = [t.name for t in kb.timers.values()
             if t.kind == "setting" and t.feeds == PG and any(v.forwarded and _seconds_of(v) == seconds for v in t.defaults)]
    return ("the default of " + " or of ".join(names)) if names else ""


def _setting_verdict(kb, ctx, seconds, backend, setting, torch_text, torch_values, verdict) -> Verdict:
    """A framework setting with no special path: its default, torch's, or an explicit value."""
    values = [v for v in defaults_for(setting, ctx, backend) if v.forwarded]
    fw_values = [v for v in values if _seconds_of(v) is not None]
    if any(_seconds_of(v) == seconds for v in fw_values):
        v = next(v for v in fw_values if _seconds_of(v) == seconds)
        versions = value_versions(v, setting.framework)
        return verdict(f"framework default: {setting.name} = {_s(seconds)}" + (f" ({versions})" if versions else ""),
                       setting.id, True, f"{setting.name} reaches this clock")
    if seconds in torch_values and (not fw_values or all(v.value is None for v in values)):
        return verdict(f"torch default: {torch_text}; {setting.name} sets nothing in this version", PG, True,
                       f"{setting.name} is not set, so torch's default applies; setting it changes this clock")
    return verdict(f"explicit setting: {_s(seconds)} ({setting.name}, or init_process_group(timeout=...))", setting.id, True,
                   f"{setting.name} reaches this clock")


def _hf_verdict(kb, ctx, seconds, backend, setting, torch_text, torch_values, verdict) -> Verdict:
    """HF TrainingArguments.ddp_timeout, and the paths on which it is not passed."""
    tv = ctx.version("transformers")
    deepspeed = ctx.get("uses_deepspeed")
    tv_note = f"transformers {fact_text(tv)}" if tv else "transformers version not known"

    def bypassed(reason: str, trap_id: str | None, why: str, on: str = backend) -> Verdict:
        """ddp_timeout was not passed: torch's default is in force, or a value set elsewhere."""
        text, values = _torch_default_text(kb, ctx, on, seconds)
        if seconds in values:
            return verdict(f"torch default: {text}; {reason}", PG, False, why, trap_id)
        return verdict(f"explicit setting: {_s(seconds)}, passed where the group was created, not by ddp_timeout; {reason}",
                       None, False, why, trap_id)

    if ctx.holds("transformers", "<4.22") is True:
        return bypassed(f"{tv_note} has no ddp_timeout", None, "ddp_timeout exists from transformers 4.22; before it Trainer passed no timeout")
    if ctx.get("use_cpu") is True and ctx.holds("transformers", ">=4.29") is not False:
        return bypassed(f"gloo on CPU; {tv_note}", "hf-use-cpu", _trap_text(find_trap(kb, "hf-use-cpu")), "gloo")
    if deepspeed is True and ctx.holds("transformers", ">=4.22,<4.25") is True:
        trap = find_trap(kb, "hf-deepspeed-before-425")
        kind = "framework default: DeepSpeed's DEEPSPEED_TIMEOUT, 30 min" if seconds == 1800 else \
            f"explicit setting: DEEPSPEED_TIMEOUT={_num(seconds / 60)} (minutes)"
        return verdict(f"{kind}; {tv_note} does not pass ddp_timeout to DeepSpeed", "deepspeed-timeout", False,
                       _trap_text(trap), "hf-deepspeed-before-425")
    if deepspeed is not True and ctx.holds("transformers", ">=4.29,<4.31") is True:
        return bypassed(f"{tv_note} does not pass ddp_timeout", "hf-plain-path-429-430",
                        _trap_text(find_trap(kb, "hf-plain-path-429-430")))
    if seconds == 1800:
        return verdict(f"framework default: TrainingArguments.ddp_timeout = 1800 s (transformers >= 4.22; {tv_note})",
                       setting.id, True, "ddp_timeout reaches this clock: raise it (in seconds)")
    if seconds in torch_values:
        trap = find_trap(kb, "hf-pg-created-early")
        why = _trap_text(trap)
        if tv is None:
            why += " transformers 4.29-4.30 also dropped it on the plain path; 4.31+ passes it."
        return verdict(f"torch default: {torch_text}; ddp_timeout (1800 s unless set) did not reach this group",
                       PG, False, why.strip(), "hf-pg-created-early")
    return verdict(f"explicit setting: ddp_timeout = {_s(seconds)} (or a timeout passed where the group was created)",
                   setting.id, True, "ddp_timeout reaches this clock: raise it (in seconds)")


def _accelerate_verdict(kb, ctx, seconds, backend, setting, torch_text, torch_values, verdict) -> Verdict:
    """accelerate forwards only non-default InitProcessGroupKwargs values; DeepSpeed's own default
    applies on its path."""
    av = ctx.version("accelerate")
    av_note = f"accelerate {fact_text(av)}" if av else "accelerate version not known"
    if ctx.get("uses_deepspeed") is True:
        trap = find_trap(kb, "accelerate-deepspeed-path")
        if seconds == 1800:
            return verdict(f"framework default: DeepSpeed's DEEPSPEED_TIMEOUT, 30 min: accelerate forwarded no timeout ({av_note})",
                           "deepspeed-timeout", True, _trap_text(trap), "accelerate-deepspeed-path")
        return verdict(f"explicit setting: {_s(seconds)} (InitProcessGroupKwargs(timeout=...) or DEEPSPEED_TIMEOUT={_num(seconds / 60)} min)",
                       setting.id, True, _trap_text(trap), "accelerate-deepspeed-path")
    trap = find_trap(kb, "accelerate-dropped-default")
    if seconds in torch_values:
        return verdict(f"torch default: {torch_text}: accelerate passed no timeout (no InitProcessGroupKwargs, or one equal "
                       f"to its class default: 1800 s up to 0.30, the backend default from 0.31; {av_note})",
                       PG, True, _trap_text(trap), "accelerate-dropped-default")
    return verdict(f"explicit setting: InitProcessGroupKwargs(timeout={_s(seconds)}) ({av_note})", setting.id, True,
                   _trap_text(trap), "accelerate-dropped-default")


def _deepspeed_verdict(kb, ctx, seconds, backend, setting, torch_text, torch_values, verdict) -> Verdict:
    trap = find_trap(kb, "deepspeed-minutes")
    minutes = _num(seconds / 60)
    if seconds == 1800:
        return verdict("framework default: DEEPSPEED_TIMEOUT unset, 30 minutes (an environment variable from DeepSpeed 0.11.2, "
                       "fixed before)", setting.id, True, _trap_text(trap), "deepspeed-minutes")
    return verdict(f"explicit setting: DEEPSPEED_TIMEOUT={minutes} (minutes) or init_distributed(timeout=...)", setting.id, True,
                   _trap_text(trap), "deepspeed-minutes")


def _lightning_verdict(kb, ctx, seconds, backend, setting, torch_text, torch_values, verdict) -> Verdict:
    if ctx.get("uses_deepspeed") is True and ctx.holds("lightning", "<2.5") is not False:
        trap = find_trap(kb, "lightning-deepspeed-before-25")
        origin = ("framework default: DeepSpeed's DEEPSPEED_TIMEOUT, 30 min" if seconds == 1800
                  else f"explicit setting: {_s(seconds)} (DEEPSPEED_TIMEOUT in minutes)")
        value = False if ctx.holds("lightning", "<2.5") else None
        return verdict(origin + " (Lightning's DeepSpeedStrategy passes its timeout from 2.5.0)", "deepspeed-timeout", value,
                       _trap_text(trap), "lightning-deepspeed-before-25")
    return _setting_verdict(kb, ctx, seconds, backend, setting, torch_text, torch_values, verdict)


def _torchtitan_verdict(kb, ctx, seconds, backend, setting, torch_text, torch_values, verdict) -> Verdict:
    """torchtitan: init_timeout_seconds until step 1, train_timeout_seconds after (<= 0.2.2: not on
    resumed runs)."""
    init = kb.timers["torchtitan-init-timeout"]
    train = setting
    init_s, train_s = _setting_seconds(init, ctx, backend), _setting_seconds(train, ctx, backend)
    early = ctx.get("phase") in ("init", "first-step")
    old = ctx.holds("torchtitan", "<=0.2.2")
    trap = find_trap(kb, "torchtitan-resumed-022")
    if seconds == train_s:
        return verdict(f"framework default: comm.train_timeout_seconds = {_s(seconds)}, applied to every group after the first step",
                       train.id, True, "comm.train_timeout_seconds reaches this clock")
    if seconds == init_s:
        if early:
            return verdict(f"framework default: comm.init_timeout_seconds = {_s(seconds)}, in force until the first step ends",
                           init.id, True, "comm.init_timeout_seconds reaches this clock", setting_id=init.id, how_text=init.set)
        if old is False:
            return verdict(f"framework default: comm.init_timeout_seconds = {_s(seconds)}, still in force: torchtitan "
                           f"{fact_text(ctx.version('torchtitan'))} switches to train_timeout_seconds after the first step, even when "
                           "resumed, so this group was not switched (or the failure came before the first step ended)",
                           init.id, True, "comm.init_timeout_seconds reaches this clock", setting_id=init.id, how_text=init.set)
        if ctx.get("resumed") is False:
            return verdict(f"framework default: comm.init_timeout_seconds = {_s(seconds)}: the run had not finished its first step",
                           init.id, True, "comm.init_timeout_seconds reaches this clock", setting_id=init.id, how_text=init.set)
        if ctx.get("resumed") is True:
            return verdict(f"framework default: comm.init_timeout_seconds = {_s(seconds)}: a resumed run on torchtitan <= 0.2.2 never "
                           "switches to train_timeout_seconds", init.id, False, _trap_text(trap), "torchtitan-resumed-022")
        return verdict(f"framework default: comm.init_timeout_seconds = {_s(seconds)}, still in force after the first step",
                       init.id, None, _trap_text(trap) + " If this run did not resume, answer resumed=no.", "torchtitan-resumed-022")
    which = init if early else train
    return verdict(f"explicit setting: {_s(seconds)} ({which.name})", which.id, True, f"{which.name} reaches this clock",
                   setting_id=which.id, how_text=which.set)


_FRAMEWORK_VERDICTS = {
    HF_SETTING: _hf_verdict,
    "accelerate-init-kwargs": _accelerate_verdict,
    "deepspeed-timeout": _deepspeed_verdict,
    "lightning-strategy-timeout": _lightning_verdict,
    "torchtitan-train-timeout": _torchtitan_verdict,
}


# --- per clock ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    clock: schema.Timer
    origin: str
    source: str | None
    reach: TimeoutReach
    seconds: float | None
    inferred: bool = False


def _pg_desc(text: str) -> str | None:
    """`0 (default_pg)` from `[PG ID 0 PG GUID 0(default_pg) Rank 7]`, `3` from `[PG 3 Rank 1]`."""
    m = compile_pattern(PG_GUID, False, False).search(text)
    if m:
        return f"{m.group(1)} ({m.group(2)})"
    m = compile_pattern(PG_RANK, False, False).search(text)
    return m.group(1) if m else None


def _report_pg(kb, ctx: Context, firing: Firing) -> Outcome:
    v = _pg_verdict(kb, ctx, firing.seconds, "nccl", _pg_desc(firing.text))
    return Outcome(firing.timer, v.origin, v.source, v.reach, firing.seconds)


def _report_follows(kb, ctx: Context, firing: Firing) -> Outcome:
    """A clock that takes the process-group timeout where the job creates it: the init store, the
    store-based barrier, gloo's operations."""
    timer = firing.timer
    if timer.id == "init-store" and firing.seconds == STORE_DEFAULT_S:
        if (ctx.get("uses_vllm") or ctx.framework in ("trl", "open-r1")) and "vllm-weight-sync-store" in kb.timers:
            return _report_default_clock(kb, ctx, Firing(kb.timers["vllm-weight-sync-store"], firing.seconds, firing.line, firing.text))
        setting = user_setting(kb, ctx)
        pg_300 = [t for t in kb.timers.values() if t.kind == "setting" and t.feeds == PG and t.framework in ctx.chain
                  and _setting_seconds(t, ctx, "nccl") == STORE_DEFAULT_S]  # torchtitan's init_timeout_seconds
        if not pg_300:
            trap = find_trap(kb, "store-follows-pg-timeout")
            store = ("the Store default of a TCPStore built without a timeout (vLLM's weight-sync group, a hand-made store; "
                     "the store init_process_group builds takes the process-group timeout instead)")
            if ctx.framework is None:
                return Outcome(timer, f"not known: 300 s is {store}, or a process-group timeout of 300 s set where the group "
                               "was created", None, TimeoutReach(value=None, how=timer.set, trap="store-follows-pg-timeout",
                                                                 why=_trap_text(trap)), firing.seconds)
            return Outcome(timer, f"torch default: 300 s, {store}", timer.id,
                           TimeoutReach(value=False, setting=setting.id if setting else None, how="pass timeout= where that store is built",
                                        trap="store-follows-pg-timeout", why=_trap_text(trap)), firing.seconds)
    backend = "gloo" if timer.id == "gloo-op" or ctx.get("backend") == "gloo" else "nccl"
    v = _pg_verdict(kb, ctx, firing.seconds, backend, None)
    kind, _, rest = v.origin.partition(": ")
    lead = "the gloo group's timeout" if timer.id == "gloo-op" else "it follows the process-group timeout"
    reach = v.reach
    if timer.id == "init-store" and reach.trap is None:
        trap = find_trap(kb, "store-follows-pg-timeout")
        reach = reach.model_copy(update={"trap": "store-follows-pg-timeout", "why": " ".join(x for x in (reach.why + ".", _trap_text(trap)) if x != ".")})
    return Outcome(timer, f"{kind}: {lead}, {rest}", v.source, reach, firing.seconds)


def _report_heartbeat(kb, ctx: Context, firing: Firing) -> Outcome:
    timer = firing.timer
    values = defaults_for(timer, ctx)
    seconds, inferred = firing.seconds, False
    if seconds is None and len({_seconds_of(v) for v in values}) == 1:
        seconds, inferred = _seconds_of(values[0]), True
    match = next((v for v in values if _seconds_of(v) == seconds), None)
    if match is not None:
        origin = f"torch default: TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC unset, {_s(seconds)} ({value_versions(match)})"
    elif seconds is None:
        origin = "torch default: TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC unset, 600 s in torch 2.3-2.4, 480 s from 2.5 (not printed)"
    else:
        origin = f"explicit setting: TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC={_num(seconds)}"
    origin += _torch_note(ctx)
    setting = user_setting(kb, ctx)
    trap = find_trap(kb, "heartbeat-independent")
    reach = TimeoutReach(value=False, setting=setting.id if setting else None, how=timer.set, trap="heartbeat-independent",
                         why=_trap_text(trap))
    return Outcome(timer, origin, timer.id, reach, seconds, inferred)


def _report_default_clock(kb, ctx: Context, firing: Firing) -> Outcome:
    """A clock with its own default and knob that no framework timeout reaches (torchrun's
    rendezvous, vLLM's weight-sync store): the printed value, or its default."""
    timer = firing.timer
    values = defaults_for(timer, ctx)
    seconds, inferred = firing.seconds, False
    if seconds is None and values and len({_seconds_of(v) for v in values}) == 1:
        seconds, inferred = _seconds_of(values[0]), True
    match = next((v for v in values if _seconds_of(v) == seconds), None)
    if match is not None:
        versions = value_versions(match, timer.framework)
        layer = "framework" if timer.layer == "framework" else "torch"
        origin = f"{layer} default: {timer.name}, {_s(seconds)}" + (f" ({versions})" if versions else "")
        if inferred:
            origin += "; the message prints no value, so this is the default unless you set it"
    else:
        origin = f"explicit setting: {timer.name} = {_s(seconds)}"
    setting = user_setting(kb, ctx)
    trap = timer.traps[0] if timer.traps else None
    reach = TimeoutReach(value=False, setting=setting.id if setting else None, how=timer.set, trap=trap.id if trap else None,
                         why=_trap_text(trap) or f"no framework timeout reaches it; only this does: {timer.set}")
    return Outcome(timer, origin, timer.id, reach, seconds, inferred)


def _report_vllm_server(kb, ctx: Context, firing: Firing) -> Outcome:
    timer = firing.timer
    match = next((v for v in defaults_for(timer, ctx) if _seconds_of(v) == firing.seconds), None)
    if match is not None:
        origin = f"framework default: vllm_server_timeout = {_s(firing.seconds)} (TRL {match.framework_version})"
    else:
        origin = f"explicit setting: vllm_server_timeout = {_s(firing.seconds)}"
    reach = TimeoutReach(value=True, setting=timer.id, how=timer.set,
                         why="vllm_server_timeout reaches this clock; a server that is down stays down however long the wait")
    return Outcome(timer, origin, timer.id, reach, firing.seconds)


def _report_ib(kb, ctx: Context, firing: Firing) -> Outcome:
    """NCCL_IB_TIMEOUT is an exponent: the whole wait is (retries + 1) x 4.096 us x 2^timeout."""
    timer = firing.timer
    values = defaults_for(timer, ctx)
    retry = kb.timers.get("nccl-ib-retry-cnt")
    retries = int(retry.defaults[0].value) if retry and retry.defaults and retry.defaults[0].value is not None else 7
    exponents = sorted({int(v.value) for v in values if v.value is not None})
    if len(exponents) == 1:
        t = exponents[0]
        per = IB_UNIT_S * 2**t
        seconds = per * (retries + 1)
        origin = (f"NCCL default: NCCL_IB_TIMEOUT={t} ({value_versions(next(v for v in values if v.value == t))}): 4.096 us x 2^{t} "
                  f"= {per:.2f} s per attempt, x {retries + 1} attempts (NCCL_IB_RETRY_CNT={retries}) = {seconds:.1f} s, inferred")
    else:
        seconds = None
        origin = ("NCCL default: NCCL_IB_TIMEOUT=20 from NCCL 2.23, 18 from 2.14, 14 before: an exponent, 4.096 us x 2^value "
                  f"per attempt, {retries + 1} attempts")
    if ctx.get("nccl_version"):
        origin += f"; you have NCCL {ctx.get('nccl_version')}"
    setting = user_setting(kb, ctx)
    trap = find_trap(kb, "ib-timeout-exponent")
    reach = TimeoutReach(value=False, setting=setting.id if setting else None, how=timer.set, trap="ib-timeout-exponent",
                         why=_trap_text(trap))
    return Outcome(timer, origin, timer.id, reach, seconds, inferred=True)


_REPORTS = {
    PG: _report_pg,
    "heartbeat-monitor": _report_heartbeat,
    "init-store": _report_follows,
    "store-based-barrier": _report_follows,
    "gloo-op": _report_follows,
    "vllm-server-wait": _report_vllm_server,
    "nccl-ib-timeout": _report_ib,
}


def framework_chain(kb, framework: str | None) -> list[str]:
    """The framework and those it builds on, closest first (open-r1 -> trl -> transformers -> ...)."""
    chain: list[str] = []
    todo = [framework] if framework else []
    while todo:
        fw = todo.pop(0)
        if fw in kb.frameworks and fw not in chain:
            chain.append(fw)
            todo.extend(kb.frameworks[fw].builds_on)
    return chain


def explain_timeout(kb, facts: Facts) -> TimeoutReport | None:
    """The `timeout` object of a diagnosis; None when no clock is seen firing."""
    if not getattr(kb, "timers", None):
        return None
    firing = which_clock(kb, facts)
    if firing is None:
        return None
    ctx = Context(facts, framework_chain(kb, facts.get("framework")))
    out = _REPORTS.get(firing.timer.id, _report_default_clock)(kb, ctx, firing)
    clock = out.clock
    source = kb.timers.get(out.source) if out.source else None
    refs = clock.references + _trap_refs(kb, out.reach.trap) + (source.references if source else [])
    return TimeoutReport(
        clock=clock.id, seconds=_num(out.seconds), origin=out.origin, reachable=out.reach, next_clock=clock.next,
        title=clock.name, source=out.source, inferred=out.inferred, line=firing.line, next_note=_next_note(kb, clock, ctx),
        references=list(dict.fromkeys(refs))[:6],
    )


def _trap_refs(kb, trap_id: str | None) -> list[str]:
    trap = find_trap(kb, trap_id) if trap_id else None
    return list(trap.references) if trap else []


def _next_note(kb, clock: schema.Timer, ctx: Context) -> str | None:
    if clock.next is None:
        return " ".join(clock.next_note.split()) if clock.next_note else None
    nxt = kb.timers[clock.next]
    values = defaults_for(nxt, ctx)
    seconds = sorted({_seconds_of(v) for v in values if _seconds_of(v) is not None})
    value = f", {_s(seconds[0])}" if len(seconds) == 1 else ""
    note = f"{nxt.name}{value}"
    if clock.next_note:
        note += ": " + " ".join(clock.next_note.split())
    return note
