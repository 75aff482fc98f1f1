"""How rules on categorical facts count: their weight is normalized over the fact's values, and only
what favours a cause for the value the log shows is listed as evidence for it."""

from __future__ import annotations

from advisor import schema
from advisor.models import FactValue, Facts
from advisor.rules import AGAINST_OTHERS_EVIDENCE, score_rules


def _cause(kb, *rules: dict) -> schema.Cause:
    """A real cause with its rules replaced by these."""
    return kb.causes["nccl-ras-crash"].model_copy(update={
        "rules": [schema.Rule(when=r["when"], weight=r["weight"], why="test rule") for r in rules]})


def _facts(**values) -> Facts:
    return Facts(values={k: FactValue(value=v, origin="log") for k, v in values.items()})


def test_a_rule_against_one_other_value_is_no_evidence(kb):
    """`first_failure: network` -1 lifts a timeout's score a little after normalization; that lift
    must not list the cause as a candidate for every log that did not fail on the network."""
    cause = _cause(kb, {"when": {"first_failure": "network"}, "weight": -1.0})
    total, evidence = score_rules(cause, _facts(first_failure="timeout"), kb)
    assert 0 < total < AGAINST_OTHERS_EVIDENCE
    assert evidence == []


def test_a_rule_against_every_value_but_one_is_evidence_for_that_one(kb):
    """Against every framework but TRL and Open-R1: a log of Open-R1 is real evidence (TRL's own bug)."""
    others = [f for f in sorted(kb.frameworks) if f not in ("trl", "open-r1")] + ["other"]
    cause = _cause(kb, {"when": {"framework": others}, "weight": -3.0})
    total, evidence = score_rules(cause, _facts(framework="open-r1"), kb)
    assert total >= AGAINST_OTHERS_EVIDENCE
    assert [e.fact for e in evidence] == ["framework"] and evidence[0].weight > 0


def test_a_rule_that_fires_is_evidence_whatever_its_size(kb):
    cause = _cause(kb, {"when": {"phase": "save"}, "weight": 0.3})
    total, evidence = score_rules(cause, _facts(phase="save"), kb)
    assert total > 0 and [e.fact for e in evidence] == ["phase"]
