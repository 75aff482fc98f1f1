"""Evaluating a cause's fact rules, as log-likelihood ratios.

A rule's weight says how much more likely its facts are under this cause than under a typical
other cause. For a fact with a finite set of values (the phase, the framework, yes/no facts) the
weights are normalized over those values, so a cause that strongly predicts `phase: save` is also
counted *against* when the phase turns out to be `train`: that is what makes answering a question
informative, and it is the same arithmetic the question chooser uses to look ahead.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from advisor import schema
from advisor.facts import FACTS
from advisor.models import EvidenceFact, Facts
from advisor.versions import parse_version, version_matches

# how much a fact's origin is trusted: an inference from the log can be wrong, an answer is the
# user's word.
ORIGIN_TRUST = {"answer": 1.0, "flag": 1.0, "log": 1.0, "inferred": 0.7}


def condition_holds(name: str, value: Any, cond: Any) -> bool | None:
    """True/False, or None when the fact is unknown (the rule can neither fire nor be refuted)."""
    spec = FACTS.get(name)
    if isinstance(cond, schema.Comparison):
        bounds = [b for b in (cond.lt, cond.le, cond.gt, cond.ge) if b is not None]
        if cond.present is not None:
            present = value is not None and value != [] and value != ""
            if cond.present != present:
                return False
            if value is None or not bounds:
                return True
        if value is None:
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            return False
        checks = [
            (cond.lt, lambda x: number < x), (cond.le, lambda x: number <= x),
            (cond.gt, lambda x: number > x), (cond.ge, lambda x: number >= x),
        ]
        return all(fn(bound) for bound, fn in checks if bound is not None)
    if value is None:
        return None
    if spec is not None and spec.kind == "version" and isinstance(cond, str) and cond[:1] in "<>=!~":
        return version_matches(value, cond)
    if spec is not None and spec.kind == "version" and isinstance(cond, list) and cond and all(
            isinstance(c, str) and c[:1] in "<>=!~" for c in cond):
        # several release ranges (a bug that came back): any one holding is enough
        held = [version_matches(value, c) for c in cond]
        return True if True in held else (False if all(h is False for h in held) else None)
    if isinstance(value, list):
        wanted = cond if isinstance(cond, list) else [cond]
        return any(_same(v, w) for v in value for w in wanted)
    if isinstance(cond, list):
        return any(_same(value, c) for c in cond)
    return _same(value, cond)


def _same(value: Any, cond: Any) -> bool:
    if isinstance(cond, bool) or isinstance(value, bool):
        return _as_bool(value) == _as_bool(cond)
    if isinstance(cond, (int, float)) and not isinstance(value, str):
        return float(value) == float(cond)
    return str(value).strip().lower() == str(cond).strip().lower()


def _as_bool(x: Any) -> bool | None:
    if isinstance(x, bool):
        return x
    s = str(x).strip().lower()
    if s in ("true", "yes", "y", "1"):
        return True
    if s in ("false", "no", "n", "0"):
        return False
    return None


def rule_state(rule: schema.Rule, values: dict[str, Any]) -> bool | None:
    """True when every condition holds, False when one fails, None when some fact is unknown."""
    unknown = False
    for name, cond in rule.when.items():
        held = condition_holds(name, values.get(name), cond)
        if held is False:
            return False
        if held is None:
            unknown = True
    return None if unknown else True


def fact_domain(name: str, kb) -> list[Any] | None:
    """The values a fact can take, when there are few enough to reason over."""
    spec = FACTS.get(name)
    if spec is None:
        return None
    if spec.domain:
        return list(spec.domain)
    if spec.kind == "bool":
        return [True, False]
    if name == "framework":
        return sorted(kb.frameworks) + ["other"]
    question = next((q for q in kb.questions.values() if q.fact == name), None)
    if question is not None and question.kind == "number" and question.bins:
        return bin_points(question.bins, integer=spec.kind == "int")
    return None


def normalized_fact(name: str) -> bool:
    """Categorical facts (phase, framework, storage, ...) are normalized over their values; yes/no
    facts and numbers keep their plain log-odds weights, since their base rates are far from
    uniform (an exception inside framework code is rare, not a coin flip). So does the collective's
    family: most collectives that time out are all-reduces, so a rule against the other families
    must not read as evidence for an all-reduce. And the inference engine: its values are the
    engines whose workers print their own lines, and almost every log comes from none of them, so
    normalizing over the engines alone would cancel a rule that holds for all of them."""
    spec = FACTS.get(name)
    return (spec is not None and spec.kind == "str" and name not in _SKEWED_CATEGORIES
            and (bool(spec.domain) or name == "framework"))


_SKEWED_CATEGORIES = frozenset({"op_family", "inference_engine"})


def bin_points(edges: list[float], integer: bool = False) -> list[float]:
    """One representative value per bin: below the first edge, between edges, above the last.

    Integer facts get whole numbers (1 node, not 0.75), so equality rules see real values."""
    points = [edges[0] / 2]
    points += [(a + b) / 2 for a, b in zip(edges, edges[1:])]
    points.append(edges[-1] * 2)
    if integer:
        return [max(1, int(p)) if i == 0 else int(round(p)) for i, p in enumerate(points)]
    return points


def _rules_on(cause: schema.Cause, name: str) -> list[schema.Rule]:
    return [r for r in cause.rules if name in r.when]


def fact_contribution(cause: schema.Cause, name: str, values: dict[str, Any], domain: list[Any]) -> float:
    """delta(value) - log mean_a exp(delta(a)) for the rules of `cause` that involve `name`."""
    rules = _rules_on(cause, name)
    if not rules:
        return 0.0

    def delta(v: Any) -> float:
        trial = dict(values)
        trial[name] = v
        return sum(r.weight for r in rules if rule_state(r, trial) is True)

    deltas = [delta(a) for a in domain]
    top = max(deltas)
    log_mean = top + math.log(sum(math.exp(d - top) for d in deltas) / len(deltas))
    return delta(values.get(name)) - log_mean


AGAINST_OTHERS_EVIDENCE = 0.5
"""a cause's rules against other values of a fact (no rule for this one) that lift it this much count as
evidence: a rule against every framework but two says the cause needs one of those two; a rule
against one value of ten (`first_failure: network`) lifts every other value by a few hundredths only."""


def score_rules(cause: schema.Cause, facts: Facts, kb) -> tuple[float, list[EvidenceFact]]:
    """Sum of rule weights for known facts (normalized for categorical facts)."""
    values = {k: v.value for k, v in facts.values.items()}
    total = 0.0
    evidence: list[EvidenceFact] = []
    handled: set[int] = set()
    for name in sorted({n for r in cause.rules for n in r.when}):
        fact = facts.values.get(name)
        if fact is None or fact.value is None or not normalized_fact(name):
            continue
        domain = fact_domain(name, kb)
        if domain is None:
            continue
        involved = [i for i, r in enumerate(cause.rules) if name in r.when]
        # a rule over several facts is normalized over the first finite-domain fact it names
        involved = [i for i in involved if i not in handled]
        if not involved:
            continue
        handled.update(involved)
        sub = schema.Cause.model_construct(**{**cause.__dict__, "rules": [cause.rules[i] for i in involved]})
        trust = ORIGIN_TRUST.get(fact.origin, 1.0)
        contribution = trust * fact_contribution(sub, name, values, domain)
        if abs(contribution) < 1e-9:
            continue
        total += contribution
        fired = [cause.rules[i] for i in involved if rule_state(cause.rules[i], values) is True]
        if not fired and 0 < contribution < AGAINST_OTHERS_EVIDENCE:
            continue  # a rule against some other value, normalized: it weighs a little, but it is no evidence
        why = "; ".join(r.why for r in fired) or _against(cause.rules[involved[0]], name)
        evidence.append(EvidenceFact(fact=name, value=_show(fact.value), weight=round(contribution, 2), why=why, line=fact.line))
    for i, rule in enumerate(cause.rules):
        if i in handled:
            continue
        if rule_state(rule, values) is True:
            trust = min(ORIGIN_TRUST.get(facts.values[n].origin, 1.0) for n in rule.when if n in facts.values) if any(n in facts.values for n in rule.when) else 1.0
            total += trust * rule.weight
            first = next(iter(rule.when))
            fact = facts.values.get(first)
            evidence.append(EvidenceFact(
                fact=",".join(rule.when), value=_show(fact.value) if fact else None,
                weight=round(trust * rule.weight, 2), why=rule.why, line=fact.line if fact else None,
            ))
    return total, evidence


def describe_condition(cond: Any) -> str:
    """A condition as a person would write it: `>= 10`, `save or eval`, `present`."""
    if isinstance(cond, schema.Comparison):
        parts = [f"{op} {getattr(cond, key):g}" for key, op in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")) if getattr(cond, key) is not None]
        if cond.present is not None:
            parts.append("present" if cond.present else "absent")
        return " and ".join(parts)
    if isinstance(cond, list):
        return " or ".join(str(c) for c in cond)
    if isinstance(cond, bool):
        return "yes" if cond else "no"
    return str(cond)


def _against(rule: schema.Rule, name: str) -> str:
    return f"this cause expects {name} {describe_condition(rule.when[name])} ({rule.why})"


def _show(value: Any) -> Any:
    if isinstance(value, list) and len(value) > 16:
        return value[:16] + ["..."]
    return value


def version_representatives(specs: Iterable[str]) -> list[str]:
    """Versions that land on each side of every specifier boundary, for looking ahead."""
    points: set[str] = set()
    for spec in specs:
        for part in spec.split(","):
            part = part.strip()
            bound = part.lstrip("<>=!~ ")
            v = parse_version(bound)
            if v is None:
                continue
            rel = list(v.release) + [0, 0]
            points.add(str(v))
            points.add(".".join(str(x) for x in [rel[0], rel[1], rel[2] + 1]))
            if rel[2] > 0:
                points.add(".".join(str(x) for x in [rel[0], rel[1], rel[2] - 1]))
            elif rel[1] > 0:
                points.add(".".join(str(x) for x in [rel[0], rel[1] - 1, 99]))
    return sorted(points, key=lambda s: parse_version(s) or parse_version("0"))
