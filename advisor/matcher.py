"""Ranking causes: signatures + fact rules + fuzzy symptom phrases, as one log-likelihood score.

score(cause) = prior + sum(weights of its signatures seen in the log, each counted once)
             + rule contributions over facts (see advisor.rules) + fuzzy symptom similarity.
Scores become probabilities with a softmax that includes a "none of these" alternative, so a log
with nothing recognisable reads as "no confident match" instead of a forced guess.

Benign causes (harmless lines) are listed after every real cause with any evidence: a harmless
line can be the answer only when it is all there is.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

from advisor import schema
from advisor.facts import FactCollector, hit_line, near_hit, timestamp_of
from advisor.models import EvidenceLine, Facts, FailureEvent, RankedCause
from advisor.regex import compile_pattern
from advisor.rules import score_rules
from advisor.scan import LineHit

NONE_SCORE = 2.0
"""the raw score of "none of these causes": a cause needs more than this to be more likely than not."""
SCALE = 1.2
"""softmax temperature, fitted (with NONE_SCORE) for calibration on the labelled cases and KB
examples: see benchmarks/README.md."""
DIAGNOSED = 0.5
FUZZY_MIN = 82.0
FUZZY_WEIGHT = 4.0
FUZZY_FULL_TEXT = 60
"""characters of description (a CJK character counts two) for a symptom match to carry its full
weight: eight characters that happen to equal a phrase are a hint, not near-certain evidence."""
_KEEP_LINES = 6


@dataclass
class _SigHits:
    signature: schema.Signature
    count: int = 0
    lines: list[EvidenceLine] = field(default_factory=list)


@dataclass
class MessageHit:
    id: str
    line: int
    text: str
    rank: int | None
    count: int = 1


class SignatureCollector:
    """Listens to the scanner for KB signature hits; reports failure events to the facts."""

    def __init__(self, facts: FactCollector):
        self.facts = facts
        self.by_cause: dict[str, dict[str, _SigHits]] = defaultdict(dict)
        self.benign_lines: dict[int, set[str]] = {}  # line -> the harmless messages (or signatures) found on it
        self.notices: list[tuple[int, str, str]] = []  # line, text, cause id
        self._stamped: tuple[int, tuple[int, int, int] | None] = (-1, None)  # (line, its timestamp)
        self.messages: dict[str, MessageHit] = {}  # catalogue message id -> where it was first seen

    def on_hit(self, hit: LineHit) -> None:
        if hit.probe.kind not in ("signature", "benign", "message"):
            return
        message: schema.Message | None = None
        if hit.probe.id.startswith("msg:"):
            message, owners = hit.probe.payload
            self._on_message(message, hit)
        else:
            owners = hit.probe.payload
        if hit.probe.kind == "benign":
            self.benign_lines.setdefault(hit.line_no, set()).add(message.id if message is not None else hit.probe.id)
            if owners and len(self.notices) < 50 and all(n[0] != hit.line_no for n in self.notices[-3:]):
                self.notices.append((hit.line_no, hit_line(hit), owners[0][0]))
        elif hit.line_no in self.benign_lines:
            if message is None or not self.benign_lines[hit.line_no] & set(message.refines):
                return  # harmless lines are evidence for nothing else
            # a refinement says what the harmless format leaves open (a plugin that is there but cannot load)
            self.notices = [n for n in self.notices if n[0] != hit.line_no]
        text = None
        event = message.event if message is not None else None
        for cause_id, sig in owners:
            if sig.unless is not None and compile_pattern(sig.unless, not sig.case_sensitive).search(text or (text := hit_line(hit))):
                continue  # the same words from another component, for another reason
            slot = self.by_cause[cause_id].get(sig.id)
            if slot is None:
                slot = self.by_cause[cause_id][sig.id] = _SigHits(sig)
            slot.count += 1
            if len(slot.lines) < _KEEP_LINES or slot.count % 64 == 0:
                text = text or hit_line(hit)
                line = EvidenceLine(line=hit.line_no, text=text, signature=sig.id, weight=sig.weight, rank=hit.rank)
                if len(slot.lines) < _KEEP_LINES:
                    slot.lines.append(line)
                else:
                    slot.lines[-1] = line
            for group, fact in sig.captures.items():
                value = hit.group(group)
                if value is not None and fact not in self.facts.values:
                    self.facts.capture(fact, value, hit)
            event = event or sig.event
        if event and hit.probe.kind != "benign":
            self.facts.on_event(FailureEvent(
                kind=event, line=hit.line_no, rank=hit.rank, text=text or hit_line(hit),
                timestamp=self._timestamp(hit), signature=hit.probe.id,
            ))
            if event != "cascade" and hit.rank is not None and event in ("timeout", "oom", "exception", "killed", "heartbeat", "nccl-error", "hardware"):
                self.facts._report(hit.rank)

    def _on_message(self, message: schema.Message, hit: LineHit) -> None:
        """Remember which catalogue messages the log holds (their first line) and the facts a
        context message carries, which no cause signature would capture."""
        seen = self.messages.get(message.id)
        if seen is None:
            self.messages[message.id] = MessageHit(message.id, hit.line_no, hit_line(hit), hit.rank)
            if message.versions or message.wording:
                from advisor.dating import printed_specs

                specs = printed_specs(message, near_hit(hit))
                if specs:
                    self.facts.date_message(message.id.split(".", 1)[0], message.id, specs, hit)
        else:
            seen.count += 1
        for group, fact in message.captures.items():
            value = hit.group(group)
            if value is not None and fact not in self.facts.values:
                self.facts.capture(fact, value, hit)
        for fact, value in message.sets.items():
            self.facts.establish(fact, value, hit)
        if message.role == "cause" and any(p.cause != _OWN_EXCEPTION for p in message.points_to if p.weight > 0):
            self.facts.on_cause_message(hit)

    def _timestamp(self, hit: LineHit) -> tuple[int, int, int] | None:
        """The timestamp of the hit's line, read once per line (a giant line can hold a million hits)."""
        if self._stamped[0] != hit.line_no:
            self._stamped = (hit.line_no, timestamp_of(hit.text))
        return self._stamped[1]


# the cause that reads a rank's exception as the failure: a message pointing only there says no
# more than "a rank raised", so it does not make the exception a catalogued one
_OWN_EXCEPTION = "python-exception-on-rank"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_LOG_SYNTAX = re.compile(
    r"^\s*(?:[\[{(<#]|\d|[IWEF]\d{3,4}\b|[\w.-]+:\d+:\d+|File \"|Traceback|(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b"
    r"|(?:INFO|WARN(?:ING)?|ERROR|DEBUG|CRITICAL|FATAL)\b|NCCL\b)"
)
# `\b` before `\w+\(\)`: each word is tried from its start only (without it, a 4000-letter word
# made the search quadratic); a match is found exactly when one was found before
_CODE_SYNTAX = re.compile(r"[=_/\\|{}<>]|\w\.\w+\(|::|\b\w+\(\)")


def prose(text: str, limit: int = 4000) -> str:
    """The lines of `text` that read like a person's description rather than log output: any
    line with CJK text, or several words with few digits and no log or code syntax. Fuzzy
    symptom matching runs on these only, so a log line never 'fuzzily' matches a symptom."""
    keep: list[str] = []
    size = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if _CJK.search(line):
            ok = True
        else:
            words = re.findall(r"[A-Za-z]{2,}", line)
            digits = sum(ch.isdigit() for ch in line)
            ok = len(words) >= 3 and digits <= len(line) * 0.08 and not _LOG_SYNTAX.match(line) and not _CODE_SYNTAX.search(line)
        if ok:
            keep.append(line)
            size += len(line)
            if size >= limit:
                break
    return "\n".join(keep)


def fuzzy_scores(kb, text: str) -> dict[str, tuple[float, str, float]]:
    """Best symptom-phrase similarity per cause for the prose in `text`, 0-100, with the share of
    the full weight that much prose can carry."""
    text = prose(text)
    if not text:
        return {}
    share = min(1.0, (len(text) + len(_CJK.findall(text))) / FUZZY_FULL_TEXT)
    from rapidfuzz import fuzz  # imported only when there is prose to compare

    lowered = text.lower()
    best: dict[str, tuple[float, str, float]] = {}
    for cause in kb.causes.values():
        for phrase in (*cause.symptoms.en, *cause.symptoms.zh):
            p = phrase.lower()
            if len(p) > len(lowered) + 10:
                continue
            ratio = fuzz.partial_ratio(p, lowered) if len(p) <= len(lowered) else fuzz.ratio(p, lowered)
            if ratio >= FUZZY_MIN and ratio > best.get(cause.id, (0, ""))[0]:
                best[cause.id] = (ratio, phrase, share)
    return best


def rank_causes(kb, hits: SignatureCollector, facts: Facts, fuzzy: dict[str, tuple[float, str, float]]) -> tuple[list[RankedCause], dict[str, float]]:
    """Causes with any evidence, best first, and the raw score of every real cause."""
    scored: list[tuple[float, schema.Cause, dict]] = []
    for cause in kb.causes.values():
        raw = cause.prior
        lines: list[EvidenceLine] = []
        slots = hits.by_cause.get(cause.id, {})
        own_weight: dict[int, float] = {}  # per line, the strongest of the cause's own signatures on it
        for slot in slots.values():
            if not slot.signature.from_message:
                for e in slot.lines:
                    own_weight[e.line] = max(own_weight.get(e.line, slot.signature.weight), slot.signature.weight)
        for slot in slots.values():
            if slot.signature.from_message and all(e.line in own_weight for e in slot.lines):
                # the cause's own signature already counted these lines: one line, one vote, the
                # stronger of the two (a weak generic regex must not mute the catalogue's entry)
                raw += max(0.0, slot.signature.weight - max(own_weight[e.line] for e in slot.lines))
                continue
            raw += slot.signature.weight
            lines.extend(slot.lines)
        rule_score, fact_evidence = score_rules(cause, facts, kb)
        raw += rule_score
        symptoms = []
        if cause.id in fuzzy:
            ratio, phrase, share = fuzzy[cause.id]
            add = (FUZZY_WEIGHT * (ratio - FUZZY_MIN) / (100 - FUZZY_MIN) + 1.0) * share
            raw += add
            symptoms.append({"phrase": phrase, "similarity": round(ratio, 1), "weight": round(add, 2)})
        has_evidence = bool(lines or symptoms or any(e.weight > 0 for e in fact_evidence))
        lines.sort(key=lambda e: e.line)
        unknown = requirements(cause, facts)
        if unknown is None:
            continue  # a requirement is known to fail: this cause cannot be the answer
        scored.append((raw, cause, {"lines": lines, "facts": fact_evidence, "symptoms": symptoms, "any": has_evidence,
                                    "unconfirmed": unknown}))

    # a cause that needs an unknown fact may be listed, but not win that way over a cause that
    # stands on evidence of its own (it may still lead causes that only share the symptoms)
    settled = [raw for raw, c, ev in scored if not c.benign and ev["any"] and not ev["unconfirmed"]
               and stands_alone([e.weight for e in ev["lines"]], [(f.fact, f.weight) for f in ev["facts"]])]
    # each unknown requirement costs what a coin flip would: whether the run is on the one release
    # (or framework) the cause needs is not known, and most runs are not
    uncapped = {c.id: raw for raw, c, ev in scored if ev["unconfirmed"]}
    scored = [(raw - UNCONFIRMED_COST * len(ev["unconfirmed"]), c, ev) for raw, c, ev in scored]
    if settled:
        ceiling = max(settled) - 0.05
        scored = [(min(raw, ceiling) if ev["unconfirmed"] else raw, c, ev) for raw, c, ev in scored]

    real = [(raw, c, ev) for raw, c, ev in scored if not c.benign]
    benign = [(raw, c, ev) for raw, c, ev in scored if c.benign]
    probs = probabilities({c.id: raw for raw, c, _ in real})
    out: list[RankedCause] = []

    def make(raw: float, cause: schema.Cause, ev: dict, p: float) -> RankedCause:
        return RankedCause(
            code=cause.code, id=cause.id, title=cause.title, score=round(p, 4), raw_score=round(raw, 3),
            summary=render_summary(cause.summary, facts), benign=cause.benign, unconfirmed=ev["unconfirmed"],
            held_back_score=round(uncapped[cause.id], 3) if cause.id in uncapped else None,
            evidence={
                "lines": [e.model_dump() for e in ev["lines"][:12]],
                "facts": [f.model_dump() for f in sorted(ev["facts"], key=lambda f: -abs(f.weight))[:8]],
                "symptoms": ev["symptoms"],
            },
        )

    for raw, cause, ev in sorted(real, key=lambda t: (-t[0], t[1].id)):
        if not ev["any"]:
            continue
        out.append(make(raw, cause, ev, probs[cause.id]))
    for raw, cause, ev in sorted(benign, key=lambda t: (-t[0], t[1].id)):
        if not ev["lines"] and not ev["symptoms"]:
            continue
        out.append(make(raw, cause, ev, probabilities({cause.id: raw})[cause.id]))
    real_strong = [c for c in out if not c.benign and c.score >= 0.15]
    if not real_strong and not facts.events:
        # nothing real stands out and nothing failed: the harmless lines explain what the user saw
        # (a log with a timeout, an exception or a dead rank failed, which no harmless line explains)
        out.sort(key=lambda c: (not c.benign, -c.score))
    elif not any(c.evidence["lines"] or c.evidence["symptoms"] for c in out if not c.benign):
        # the real causes stand on facts alone (a quiet log read as a hang) while the lines the log
        # does print are harmless: the same log is a hang or a healthy run with noisy warnings, so
        # the harmless reading comes right after the leading one, not below every guess
        harmless = next((c for c in out if c.benign and c.evidence["lines"]), None)
        if harmless is not None:
            out.remove(harmless)
            out.insert(1, harmless)
    return out, {c.id: raw for raw, c, _ in real}


UNCONFIRMED_COST = 0.5
"""log-odds taken off a cause per required fact that is still unknown."""
SPECIFIC_LINE = 5.0
"""a log line whose weight says it names the cause (kb/README.md: 7-10 names it, 3-6 a strong hint)."""
SPECIFIC_FACTS = 1.0
"""or observed facts (a phase, a mismatch, how a peer died: not numbers, which many causes explain)
that favour the cause this much in all (over a rival, when one is given)."""


def stands_alone(line_weights: list[float], facts: list[tuple[str, float]], rival_facts: dict[str, float] | None = None) -> bool:
    """Whether a cause rests on evidence of its own, not only on symptoms many causes share: a line
    that names it, or observed facts that favour it (over the rival's weight on the same facts: a
    phase both expect, such as `init` for every start-up cause, counts only by the difference)."""
    from advisor.facts import FACTS

    if any(w >= SPECIFIC_LINE for w in line_weights):
        return True
    theirs = rival_facts or {}
    favour = 0.0
    for name, weight in facts:
        spec = FACTS.get(name.split(",", 1)[0])
        if weight <= 0 or spec is None or spec.kind in ("int", "float", "version"):
            continue
        favour += max(0.0, weight - max(theirs.get(name, 0.0), 0.0))
    return favour >= SPECIFIC_FACTS


def requirements(cause: schema.Cause, facts: Facts) -> list[str] | None:
    """The facts a cause still needs (its `requires` conditions whose fact is unknown), or None when
    one of them is known to fail."""
    from advisor.rules import condition_holds

    unknown = []
    for name, cond in cause.requires.items():
        held = condition_holds(name, facts.get(name), cond)
        if held is False:
            return None
        if held is None:
            unknown.append(name)
    return unknown


def probabilities(raw: dict[str, float]) -> dict[str, float]:
    """Softmax over the causes plus "none of these"; the none share is under key ''."""
    top = max([NONE_SCORE, *raw.values()]) * SCALE
    exps = {k: math.exp(min(v, 60) * SCALE - top) for k, v in raw.items()}
    exps[""] = math.exp(NONE_SCORE * SCALE - top)
    z = sum(exps.values())
    return {k: v / z for k, v in exps.items()}


def render_summary(template: str, facts: Facts) -> str:
    """Fill `{fact}` placeholders; a placeholder whose fact is unknown leaves the sentence general:
    `{fact|words}` reads `words` instead, and a parenthesis holding an unknown `{fact}` is dropped."""

    def value(m: "re.Match[str]") -> str:
        name = m.group(1)
        if not facts.known(name):
            return m.group(2) if m.group(2) is not None else "?"
        v = facts.get(name)
        if name == "timeout_ms":
            return _duration_ms(v)
        return str(v)

    text = re.sub(r"\{([a-z_]+)(?:\|([^{}|]*))?\}", value, template)
    return re.sub(r"\s*\([^()]*\?[^()]*\)", "", text)


def _duration_ms(ms: int) -> str:
    seconds = int(ms) / 1000
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
