"""The user's answers to guided questions, parsed and turned into facts that override the log.

"unknown" (also "?", "idk", "don't know", empty) is a valid answer to every question: the question
counts as asked and the fact stays unknown.
"""

from __future__ import annotations

from typing import Any

from advisor import schema
from advisor.models import FactValue, Facts

UNKNOWN = {"unknown", "?", "idk", "dont know", "don't know", "not sure", "n/a", "na", "", "不知道", "不确定"}
_YES = {"yes", "y", "true", "1", "on", "是", "有"}
_NO = {"no", "n", "false", "0", "off", "否", "没有"}


class AnswerError(ValueError):
    """An answer that does not fit its question; the message says what would."""

    def __init__(self, question: str, value: str, reason: str):
        self.question = question
        self.value = value
        self.reason = reason
        super().__init__(f"answer {question}={value!r}: {reason}")


def parse_answer(kb, question: schema.Question, raw: Any) -> Any:
    """The fact value for an answer, or None for "unknown"; raises AnswerError when it cannot fit."""
    text = str(raw).strip()
    if text.lower() in UNKNOWN:
        return None
    if len(text) > 200:
        raise AnswerError(question.id, text[:40] + "...", "too long for an answer")
    if question.id == "framework":
        return kb.framework_id(text) or "other"
    if question.kind == "choice":
        for choice in question.choices:
            if text.lower() in (choice.value.lower(), choice.label.lower()):
                return choice.value
        allowed = ", ".join(c.value for c in question.choices)
        raise AnswerError(question.id, text, f"choose one of: {allowed} (or unknown)")
    if question.kind == "number":
        cleaned = text.lower().removesuffix("b").replace(",", "").strip()
        try:
            number = float(cleaned)
        except ValueError:
            raise AnswerError(question.id, text, "expected a number (or unknown)") from None
        if number < 0 or number != number or number in (float("inf"),):
            raise AnswerError(question.id, text, "expected a non-negative number")
        if question.max is not None and number > question.max:
            unit = f" {question.unit}" if question.unit else ""
            raise AnswerError(question.id, text, f"expected at most {question.max:g}{unit}: is that a typo?")
        return int(number) if number.is_integer() and question.id != "model_size_b" else number
    if question.kind == "yes_no":
        low = text.lower()
        if low in _YES:
            return True
        if low in _NO:
            return False
        raise AnswerError(question.id, text, "expected yes or no (or unknown)")
    return text.lstrip("vV") if text[:1] in "vV" and text[1:2].isdigit() else text


def apply_answers(kb, facts: Facts, answers: dict[str, str], framework: str | None = None) -> set[str]:
    """Write answers into `facts` (overriding what the log suggested); return the answered ids."""
    answered: set[str] = set()
    merged = dict(answers)
    if framework and "framework" not in merged:
        merged["framework"] = framework
    for qid, raw in merged.items():
        question = kb.questions.get(qid)
        if question is None:
            raise AnswerError(qid, str(raw), f"no such question; known: {', '.join(sorted(kb.questions))}")
        value = parse_answer(kb, question, raw)
        answered.add(qid)
        if value is None:
            continue
        previous = facts.values.get(question.fact)
        facts.values[question.fact] = FactValue(value=value, origin="answer", detail=f"answered {qid}={raw}")
        version = facts.values.get("framework_version")
        if question.fact == "framework" and previous is not None and previous.value != value and version and version.origin != "answer":
            # the version read from the log belonged to the framework the log suggested
            facts.values.pop("framework_version")
    _package_versions(facts)
    return answered


# frameworks whose version is also a package version that rules and the timer table read
PACKAGE_VERSION_FACTS = {"trl": "trl_version", "transformers": "transformers_version", "accelerate": "accelerate_version",
                         "deepspeed": "deepspeed_version"}


def _package_versions(facts: Facts) -> None:
    """Under TRL, the framework version is the TRL version (and likewise for transformers,
    accelerate, DeepSpeed); a version the user answered for the package itself wins."""
    name = PACKAGE_VERSION_FACTS.get(facts.get("framework"))
    version = facts.values.get("framework_version")
    if name is None or version is None or version.value is None:
        return
    current = facts.values.get(name)
    if current is not None and current.origin == "answer" and version.origin != "answer":
        return
    facts.values[name] = FactValue(value=version.value, origin=version.origin, line=version.line, text=version.text,
                                   detail=f"the {facts.get('framework')} framework's version")
