"""Secrets never leave the advisor: every string it outputs is redacted first.

People paste logs that contain tokens (an `export HF_TOKEN=...` echoed by a launcher, a wandb key in
a config dump, a password in a rendezvous URL). Redaction runs on the finished Diagnosis, so every
front end (CLI text and JSON, the HTTP reply and its markdown, the TUI) shows the same safe text.
With `mask_hosts`, host names and IP addresses are masked too (for posting logs publicly).
Patterns run on RE2, so hostile input cannot make redaction slow.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from advisor.regex import compile_pattern

MASK = "[REDACTED]"
HOST_MASK = "[HOST]"

# (name, pattern, group to mask or 0 for the whole match)
SECRET_PATTERNS: list[tuple[str, str, int]] = [
    ("private-key", r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|$)", 0),
    ("url-password", r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]{1,256}:([^\s@/]{1,256})@", 1),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{30,}", 0),
    ("github-token", r"\b(?:(?:ghp_|gho_|ghu_|ghs_|ghr_)[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})", 0),
    ("openai-style-key", r"\bsk-(?:proj-|ant-|live-)?[A-Za-z0-9_-]{20,}", 0),
    ("aws-access-key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b", 0),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", 0),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}", 0),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", 0),
    ("bearer", r"(?i)\b(?:bearer|token)\s+([A-Za-z0-9._~+/=-]{16,})", 1),
    ("wandb-login", r"(?i)\bwandb login (?:--relogin )?([A-Za-z0-9_-]{20,})", 1),
    (
        "secret-assignment",
        r"(?i)\b(?:[A-Z0-9_]*(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)[A-Z0-9_]*|api[_-]?key|token|secret|password|passwd)\s*[=:]\s*['\"]?([^\s'\",;]{6,})",
        1,
    ),
]

HOST_PATTERNS: list[tuple[str, str, int]] = [
    ("ipv4", r"\b(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b", 0),
    ("ipv6", r"\b(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}\b", 0),
    ("fqdn", r"\b[a-zA-Z0-9][a-zA-Z0-9-]{0,62}(?:\.[a-zA-Z0-9-]{1,63}){0,8}\.(?:com|net|org|io|ai|internal|local|lan|cluster|edu|gov|cloud|corp)\b", 0),
    # c10d prints endpoints as `[host]:port`; launchers echo MASTER_ADDR / --rdzv-endpoint values
    ("endpoint", r"\[([A-Za-z0-9][\w.-]{0,252})\]:\d{1,5}\b", 1),
    (
        "master-addr",
        r"(?i)(?:\b(?:master[_-]addr|rdzv[_-]endpoint)\s*[=:]\s*|--(?:master[_-]addr|rdzv[_-]endpoint)\s+)['\"]?([A-Za-z0-9][\w.-]{0,252})",
        1,
    ),
    ("nccl-host", r"(?m)^(?:\[(?:rank|default)\d+\]:)?([A-Za-z0-9][\w.-]{0,62}):\d+:\d+ \[\d+\]", 1),
]

# Literals at least one of which every match contains (lower-cased), per pattern; None = always run.
# Checking them with `in` costs microseconds, so text without a secret never compiles a pattern (the
# CLI starts ~4 ms faster). tests/test_redact.py checks each list equals what the pattern requires.
ATOMS: dict[str, tuple[str, ...] | None] = {
    "private-key": ("-----begin",),
    "url-password": ("://",),
    "huggingface-token": ("hf_",),
    "github-token": ("github_pat_", "gho_", "ghp_", "ghr_", "ghs_", "ghu_"),
    "openai-style-key": ("sk-",),
    "aws-access-key": ("gpa", "ida", "kia", "npa", "roa", "sia"),
    "slack-token": ("xox",),
    "google-api-key": ("aiza",),
    "jwt": (".eyj",),
    "bearer": ("bearer", "token"),
    "wandb-login": ("wandb",),
    "secret-assignment": ("access_key", "api", "credential", "passwd", "password", "private_key", "secret", "token"),
    "ipv4": None,
    "ipv6": None,
    "fqdn": None,
    "endpoint": None,
    "master-addr": ("endpoint", "master"),
    "nccl-host": None,
}


@functools.lru_cache(maxsize=None)
def _compiled(name: str):
    pattern, _ = _BY_NAME[name]
    return compile_pattern(pattern, ignore_case=False, wrap=False)


_ALREADY_MASKED = {MASK, HOST_MASK, MASK.strip("[]"), HOST_MASK.strip("[]")}
_HOST_KINDS = frozenset(name for name, _, _ in HOST_PATTERNS)
_BY_NAME = {name: (pattern, group) for name, pattern, group in SECRET_PATTERNS + HOST_PATTERNS}


def _candidates(text: str, mask_hosts: bool) -> list[str]:
    """The patterns whose required literals occur in `text`, in table order."""
    lowered = text.lower()
    names = []
    for name, _, _ in SECRET_PATTERNS + (HOST_PATTERNS if mask_hosts else []):
        atoms = ATOMS[name]
        if atoms is None or any(atom in lowered for atom in atoms):
            names.append(name)
    return names


@functools.lru_cache(maxsize=64)
def _literal_alternation(values: tuple[str, ...]):
    """Any of `values` as a whole token (`gpu07` but not `gpu070`).

    Plain literals between one-character lookarounds: no nested quantifier, so the stdlib engine
    stays linear in the text (times the number of values, at most MAX_LEARNED).
    """
    import re

    body = "|".join(re.escape(v) for v in values)
    return re.compile(rf"(?<![\w.-])(?:{body})(?![\w-])")


_SAFE_KEYS = {"cause_id", "id", "code", "signature", "kind", "state", "format", "language", "framework", "origin", "status", "version", "fact"}


MAX_LEARNED = 256  # distinct masked values remembered for the second pass


@dataclass
class Redactor:
    """Masks secrets (and, opt-in, hosts) in strings; remembers what it masked.

    A value found in context (the host in `[gpu07]:29400`, the password in a URL) is also masked
    where it appears without that context, e.g. in a cause summary that quotes a captured host:
    `redact_model` makes a second pass for those literal values.
    """

    mask_hosts: bool = False
    count: int = 0
    """substitutions made (one secret quoted in five output fields counts five)"""
    kinds: set[str] = field(default_factory=set)
    found: set[str] = field(default_factory=set)
    """the distinct secret (and, with mask_hosts, host) values masked: what the user's input held"""
    learned: dict[str, str] = field(default_factory=dict)

    def redact(self, text: str) -> str:
        if not text:
            return text
        for name in _candidates(text, self.mask_hosts):
            text = self._sub(_compiled(name), _BY_NAME[name][1], name, text)
        return self._mask_learned(text) if self.learned else text

    def _mask_learned(self, text: str) -> str:
        rx = _literal_alternation(tuple(sorted(self.learned, key=len, reverse=True)))
        return rx.sub(lambda m: self.learned[m.group(0)], text) if rx.search(text) else text

    def _sub(self, rx, group: int, name: str, text: str) -> str:
        out: list[str] = []
        last = 0
        for m in rx.finditer(text):
            start, end = m.span(group) if group else m.span()
            if start < 0 or start < last:
                continue
            masked = HOST_MASK if name in _HOST_KINDS else MASK
            value = text[start:end]
            if value in _ALREADY_MASKED:
                continue
            if len(value) >= 3 and len(self.learned) < MAX_LEARNED:
                self.learned.setdefault(value, masked)
            out.append(text[last:start])
            out.append(masked)
            last = end
            self.count += 1
            self.found.add(value)
            self.kinds.add(name)
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)

    def walk(self, value: Any, key: str | None = None, learned_only: bool = False) -> Any:
        if isinstance(value, str):
            if key in _SAFE_KEYS:
                return value
            return self._mask_learned(value) if learned_only else self.redact(value)
        if isinstance(value, list):
            return [self.walk(v, key, learned_only) for v in value]
        if isinstance(value, tuple):
            return tuple(self.walk(v, key, learned_only) for v in value)
        if isinstance(value, dict):
            return {k: self.walk(v, k if isinstance(k, str) else None, learned_only) for k, v in value.items()}
        return value

    def redact_model(self, model):
        """`model` with every string redacted; the same object when there was nothing to hide."""
        before = self.count
        data = self.walk(model.model_dump())
        if self.count == before:
            return model
        data = self.walk(data, learned_only=True)  # now every string also gets the values learned anywhere in the model
        data["redactions"] = len(self.found)  # secrets in the input, not the fields that quoted them
        return type(model).model_validate(data)
