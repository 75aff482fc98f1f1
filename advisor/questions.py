"""Choosing the next question: the one whose answer is expected to teach the most.

For each open question we look ahead at every answer it could get, using the same rule weights
the matcher uses as likelihoods: P(answer | cause) is proportional to exp(weight of the cause's rules
that the answer would fire). Expected information gain = entropy of the current belief over causes
minus the expected entropy after the answer. A question whose answer cannot move the belief is not
asked; once one cause is clear, only the facts its fix still needs are asked (e.g. the model size
for a checkpoint timeout), and never a fact the log already gave.
"""

from __future__ import annotations

import math
from typing import Any

from advisor import schema
from advisor.facts import FACTS
from advisor.matcher import probabilities
from advisor.models import Facts, QuestionOut, RankedCause
from advisor.rules import bin_points, condition_holds, fact_domain, rule_state, version_representatives
from advisor.tuning import CALCULATORS

MIN_GAIN = 0.08
CLEAR = 0.8


def answer_domain(kb, question: schema.Question) -> list[Any]:
    if question.kind == "choice":
        values: list[Any] = [c.value for c in question.choices]
        return values
    if question.kind == "yes_no":
        return [True, False]
    if question.kind == "number":
        return bin_points(question.bins, integer=FACTS[question.fact].kind == "int")
    specs = [str(r.when[question.fact]) for c in kb.causes.values() for r in c.rules
             if question.fact in r.when and isinstance(r.when[question.fact], str)]
    return version_representatives(specs)


def _entropy(ps: list[float]) -> float:
    return -sum(p * math.log2(p) for p in ps if p > 0)


def _softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    z = sum(exps)
    return [e / z for e in exps]


def information_gain(kb, question: schema.Question, raw: dict[str, float], facts: Facts) -> float:
    """Expected reduction in entropy (bits) over causes + "none of these"."""
    domain = answer_domain(kb, question)
    if len(domain) < 2:
        return 0.0
    values = {k: v.value for k, v in facts.values.items()}
    ids = list(raw)
    probs = probabilities(raw)
    prior = [probs[i] for i in ids] + [probs[""]]
    likelihoods: list[list[float]] = []  # per cause (and none), P(answer) for each answer
    for cid in ids:
        rules = [r for r in kb.causes[cid].rules if question.fact in r.when]
        if not rules:
            likelihoods.append([1 / len(domain)] * len(domain))
            continue
        deltas = []
        for a in domain:
            trial = dict(values)
            trial[question.fact] = a
            deltas.append(sum(r.weight for r in rules if rule_state(r, trial) is True))
        likelihoods.append(_softmax(deltas))
    likelihoods.append([1 / len(domain)] * len(domain))
    h0 = _entropy(prior)
    expected = 0.0
    for j in range(len(domain)):
        joint = [prior[i] * likelihoods[i][j] for i in range(len(prior))]
        p_answer = sum(joint)
        if p_answer <= 0:
            continue
        expected += p_answer * _entropy([x / p_answer for x in joint])
    return max(h0 - expected, 0.0)


def _asked_already(question: schema.Question, facts: Facts, answered: set[str], kb, candidates: set[str] | None = None) -> bool:
    known = facts.known(question.fact) and not _range_undecided(kb, question.fact, facts.get(question.fact), candidates)
    return question.id in answered or known or not _makes_sense(question, facts)


def _range_undecided(kb, name: str, value, candidates: set[str] | None = None) -> bool:
    """Several releases that traceback frames or NCCL's warning lines fit (advisor.frames): the
    version is still worth asking where the range straddles a bound some candidate cause's condition
    draws (a cause with no evidence in the log is no reason to ask)."""
    if not (isinstance(value, list) and len(value) > 1):
        return False
    for cause in kb.causes.values():
        if candidates is not None and cause.id not in candidates:
            continue
        conds = [cause.requires.get(name)] + [r.when.get(name) for r in cause.rules]
        if any(c is not None and condition_holds(name, value, c) is None for c in conds):
            return True
    return False


def _makes_sense(question: schema.Question, facts: Facts) -> bool:
    """A question that presumes something (`ask_when`) is asked only once the log shows it."""
    from advisor.rules import condition_holds

    return all(condition_holds(name, facts.get(name), cond) is True for name, cond in question.ask_when.items())


def choose_questions(kb, causes: list[RankedCause], raw: dict[str, float], facts: Facts, answered: set[str], limit: int) -> list[QuestionOut]:
    if limit <= 0:
        return []
    real = [c for c in causes if not c.benign]
    top = real[0] if real else None
    clear = top is not None and top.score >= CLEAR
    scored: list[tuple[float, schema.Question, str]] = []
    # belief over the causes with any standing: the log's own evidence for them (once two have some).
    # Causes with none share the rest alike, and a question that only reshuffles them (the phase,
    # for an NCCL system error that the node count or the container decides) teaches nothing.
    ranked = sorted(raw.items(), key=lambda kv: -kv[1])
    standing = [kv for kv in ranked if kv[1] > 0]
    shortlist = dict(standing[:12] if len(standing) >= 2 else ranked[:12])
    listed = {c.id for c in causes}
    for question in kb.questions.values():
        if _asked_already(question, facts, answered, kb, listed) or _package_not_in_use(kb, question, facts):
            continue
        if not clear:
            gain = information_gain(kb, question, shortlist, facts)
            if gain >= MIN_GAIN:
                scored.append((gain, question, "its answer is expected to narrow the causes down"))
    if top is not None and top.score >= 0.3:
        for qid, reason in {**_fix_needs(kb, top, facts), **_version_needs(kb, top, facts), **_requirement_needs(kb, top)}.items():
            question = kb.questions.get(qid)
            if question is None or _asked_already(question, facts, answered, kb, listed) or _package_not_in_use(kb, question, facts):
                continue
            _add_reason(scored, question, 0.1 + 0.3 * top.score, reason)
    for value, needs in ((HELD_BACK_NEED, _held_back_needs(kb, real, top)), (WORLD_NEED, _world_needs(facts))):
        for qid, reason in needs.items():
            question = kb.questions.get(qid)
            if question is None or _asked_already(question, facts, answered, kb, listed) or _package_not_in_use(kb, question, facts):
                continue
            _add_reason(scored, question, value, reason)
    scored.sort(key=lambda t: (-t[0], t[1].id))
    return [_out(q, gain, why, question_text(kb, q, facts)) for gain, q, why in scored[:limit]]


def _add_reason(scored: list[tuple[float, schema.Question, str]], question: schema.Question, value: float, reason: str) -> None:
    """Score a question for one more reason: a question asked for several adds their worth, and the
    user reads every reason."""
    existing = next((i for i, s in enumerate(scored) if s[1].id == question.id), None)
    if existing is None:
        scored.append((value, question, reason))
    elif reason not in scored[existing][2]:
        gain, q, why = scored[existing]
        scored[existing] = (gain + value, q, why + "; " + reason)


YES_NO = [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}]


def question_text(kb, q: schema.Question, facts: Facts) -> str:
    """The question in words, naming what the log or the answers already told (`{framework|...}`)."""
    from advisor.matcher import render_summary

    if "{" not in q.text:
        return q.text
    framework = facts.get("framework")
    if framework in kb.frameworks:  # its display name, as the user knows it
        facts = facts.model_copy(update={"values": {**facts.values, "framework": facts.values["framework"].model_copy(update={"value": kb.frameworks[framework].name})}})
    return render_summary(q.text, facts)


def _fix_needs(kb, top: RankedCause, facts: Facts) -> dict[str, str]:
    """Facts the top cause's fix would use to tailor its numbers or its snippet format."""
    needs: dict[str, str] = {}
    cause = kb.causes[top.id]
    has_knobs = False
    for fix in cause.fixes:
        for setting in fix.settings:
            if setting.knob:
                has_knobs = True
            if isinstance(setting.value, schema.Calc):
                for fact in CALCULATORS[setting.value.calc](facts).missing:
                    needs.setdefault(fact, "the fix's numbers are computed from it")
    if has_knobs and not facts.known("framework"):
        needs["framework"] = "the fix is written in your framework's own config format"
    return needs


def _package_not_in_use(kb, question: schema.Question, facts: Facts) -> bool:
    """A package's version (`trl_version`) is asked only of a run whose framework builds on that
    package (TRL, Open-R1); with the framework unknown, the framework question comes first."""
    from advisor.answers import PACKAGE_VERSION_FACTS
    from advisor.timers import framework_chain

    package = next((p for p, fact in PACKAGE_VERSION_FACTS.items() if fact == question.fact), None)
    return package is not None and package not in framework_chain(kb, facts.get("framework"))


VERSION_PIN = 4.0
"""a rule this strong on a version pins the cause to some releases: the version must be asked."""


def _version_needs(kb, top: RankedCause, facts: Facts) -> dict[str, str]:
    """Versions the top cause exists in only some releases of (TRL 0.15.0's SFT gather): asked even
    when the cause looks clear, since the version alone can rule it out. Under Open-R1, which has no
    releases, this asks for the TRL version."""
    values = {k: v.value for k, v in facts.values.items()}
    needs: dict[str, str] = {}
    for rule in kb.causes[top.id].rules:
        if rule.weight < VERSION_PIN or rule_state(rule, values) is False:
            continue
        for name in rule.when:
            spec = FACTS.get(name)
            if spec is None or spec.kind != "version" or condition_holds(name, facts.get(name), rule.when[name]) is not None:
                continue
            question = next((q for q in kb.questions.values() if q.fact == name), None)
            if question is not None:
                needs.setdefault(question.id, f"the cause exists only in some releases: {rule.why}")
    return needs


def _requirement_needs(kb, cause: RankedCause, verb: str = "holds only") -> dict[str, str]:
    """The facts a cause `requires` that are still unknown (the leading cause's: without them it
    cannot be the diagnosis, so they are asked first), each with the question that sets it."""
    needs: dict[str, str] = {}
    for name in cause.unconfirmed:
        question = next((q for q in kb.questions.values() if q.fact == name), None)
        if question is not None:
            needs.setdefault(question.id, f"{cause.title} {verb} if {name.replace('_', ' ')} is confirmed")
    return needs


HELD_BACK_NEED = 0.45
"""what a required fact is worth when only its being unknown keeps a cause from leading."""


def _held_back_needs(kb, real: list[RankedCause], top: RankedCause | None) -> dict[str, str]:
    """Facts a cause `requires` that are unknown while its evidence alone would put it first: the
    cause may not win on an unconfirmed requirement, so the requirement must be asked, or the
    best-supported answer is never reached."""
    needs: dict[str, str] = {}
    for cause in real[1:] if top is not None else []:
        if cause.unconfirmed and cause.held_back_score is not None and cause.held_back_score > top.raw_score:
            for qid, reason in _requirement_needs(kb, cause, "would lead").items():
                needs.setdefault(qid, reason)
    return needs


WORLD_NEED = 0.5
"""what knowing the world is worth when the store waits for a given rank: it decides whether that
rank can exist at all (a misconfigured world) or is merely late (a slow start)."""


def _world_needs(facts: Facts) -> dict[str, str]:
    """The node count and GPUs per node, when the store waits for a rank and the log does not say
    how many ranks the world has (nodes x GPUs tells a rank that cannot exist from a late one), or
    when only part of the store's world joined (is that world what was started?)."""
    if facts.known("clients_joined") and facts.known("world_size") and not facts.known("world_as_launched"):
        joined, world = facts.get("clients_joined"), facts.get("world_size")
        reason = (f"nodes x GPUs per node says whether the store's world of {world} ({joined} joined) is what was "
                  "started: if so the rest did not arrive, if not the sizes disagree")
        return {"nodes": reason, "gpus_per_node": reason}
    if not facts.known("awaited_rank") or facts.known("world_size"):
        return {}
    rank = facts.get("awaited_rank")
    reason = f"nodes x GPUs per node says whether rank {rank}, which the store waits for, can exist"
    return {"nodes": reason, "gpus_per_node": reason}


def _out(q: schema.Question, gain: float, reason: str, text: str) -> QuestionOut:
    return QuestionOut(
        id=q.id, text=text, kind=q.kind,
        choices=[{"value": c.value, "label": c.label} for c in q.choices] or (YES_NO if q.kind == "yes_no" else None),
        unit=q.unit, help=q.help, gain=round(gain, 3), reason=reason,
    )
