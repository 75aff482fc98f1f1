"""Low-confidence candidates from similar wording, for logs nothing in the KB recognises.

When no signature or catalogue message matched, an empty answer helps nobody: the log's
failure-looking lines are compared (rapidfuzz) with every catalogued message's wording and with
the lines of the causes' example logs, and the causes behind the closest texts are offered as
candidates, marked `similar-text` and never as a diagnosis. Similar wording is a hint, not
evidence: these candidates never raise the verdict above "no-match".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advisor.models import RankedCause

MIN_SIMILARITY = 55.0
"""below this (rapidfuzz token_set_ratio over the lines' words, 0-100) a text is not called similar."""
MAX_SCORE = 0.12
"""the probability-like score of the closest candidate: far below any evidence-based verdict."""
MIN_LINE = 16
_NOISE = re.compile(r"0x[0-9a-f]+|[\w.-]*/[^\s:]+|\[[^\]]{0,40}\]|\b\w*\d\w*\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z_']{2,}")
# words every log line of this domain shares: they make unrelated lines look alike
_COMMON = frozenset("nccl warn info error runtimeerror exception the and for with was not are this that from".split())


@dataclass(frozen=True)
class Reference:
    text: str  # normalised for comparison
    cause: str  # KB cause id
    weight: float
    source: str  # "message <id>" or "example of <cause>"


def normalise(line: str) -> str:
    """A line's words, without the numbers, paths, addresses, prefixes and words every line shares."""
    return " ".join(w for w in _WORD.findall(_NOISE.sub(" ", line).lower()) if w not in _COMMON)


def references(kb) -> list[Reference]:
    """Every text a log line may resemble: catalogue wordings and example-log lines (the KB caches
    them as `kb.similar_references`)."""
    from advisor.catalogue import render

    refs: list[Reference] = []
    for msg in kb.messages.values():
        if msg.role != "cause":
            continue
        text = normalise(render(msg.text))
        if len(text) >= MIN_LINE:
            for target in msg.points_to:
                if target.cause in kb.causes and not kb.causes[target.cause].benign:
                    refs.append(Reference(text, target.cause, target.weight, f"message {msg.id}"))
    for cause in kb.causes.values():
        if cause.benign:
            continue
        for example in cause.examples.positive:
            if example.answers:
                continue  # it needed answers to rank this cause: its text alone is not enough
            for line in example.log.splitlines()[-12:]:
                text = normalise(line)
                if len(text) >= MIN_LINE:
                    refs.append(Reference(text, cause.id, 3.0, f"an example of {cause.id}"))
    return refs


def similar_candidates(kb, lines: list[tuple[int, str]], exclude_codes: set[str], limit: int = 3) -> list[RankedCause]:
    """Up to `limit` causes whose known texts read most like the log's failure lines."""
    if not lines or limit <= 0:
        return []
    from rapidfuzz import fuzz, process

    refs = kb.similar_references
    if not refs:
        return []
    choices = [r.text for r in refs]
    best: dict[str, tuple[tuple[float, float], int, str, Reference]] = {}
    for line_no, line in lines:
        text = normalise(line)
        if len(text) < MIN_LINE:
            continue
        for _, similarity, index in process.extract(text, choices, scorer=fuzz.token_set_ratio, limit=8,
                                                     score_cutoff=MIN_SIMILARITY):
            ref = refs[index]
            code = kb.causes[ref.cause].code
            if code in exclude_codes:
                continue
            key = ref.cause
            rank_key = (similarity, ref.weight)
            if key not in best or rank_key > best[key][0]:
                best[key] = (rank_key, line_no, line, ref)
    out: list[RankedCause] = []
    codes_seen: set[str] = set()
    for rank_key, line_no, line, ref in sorted(best.values(), key=lambda t: (-t[0][0], -t[0][1], t[3].cause)):
        cause = kb.causes[ref.cause]
        if cause.code in codes_seen:
            continue
        codes_seen.add(cause.code)
        similarity = rank_key[0]
        score = round(MAX_SCORE * (similarity - MIN_SIMILARITY) / (100 - MIN_SIMILARITY) + 0.02, 4)
        out.append(RankedCause(
            code=cause.code, id=cause.id, title=cause.title, score=min(score, MAX_SCORE), raw_score=0.0,
            summary=cause.title, basis="similar-text",
            evidence={"lines": [{"line": line_no, "text": line[:300], "signature": "similar-text", "weight": 0.0, "rank": None}],
                      "facts": [], "symptoms": [{"phrase": ref.source, "similarity": round(similarity, 1), "weight": 0.0}]},
        ))
        if len(out) >= limit:
            break
    return out
