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

# (name, pattern, group to mask or 0 for the whole match)
SECRET_PATTERNS: list[tuple[str, str, int]] = [
    ("private-key", r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|$)", 0),
    ("url-password", r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]{1,256}:([^\s@/]{1,256})@", 1),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{30,}", 0),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})", 0),
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
    ("fqdn", r"\b[a-zA-Z0-9][a-zA-Z0-9-]{0,62}(?:\.[a-zA-Z0-9-]{1,63}){1,8}\.(?:com|net|org|io|ai|internal|local|lan|cluster|edu|gov|cloud|corp)\b", 0),
    ("nccl-host", r"(?m)^((?:\[(?:rank|default)\d+\]:)?[A-Za-z0-9][\w.-]{0,62}):\d+:\d+ \[\d+\]", 1),
]

@functools.lru_cache(maxsize=2)
def _compiled(mask_hosts: bool):
    pats = SECRET_PATTERNS + (HOST_PATTERNS if mask_hosts else [])
    return [(name, compile_pattern(p, ignore_case=False, wrap=False), g) for name, p, g in pats]


@functools.lru_cache(maxsize=2)
def _any(mask_hosts: bool):
    """All patterns in one RE2 program: a string without any secret costs a single search."""
    pats = SECRET_PATTERNS + (HOST_PATTERNS if mask_hosts else [])
    return compile_pattern("|".join(f"(?:{p})" for _, p, _ in pats), ignore_case=False, wrap=False)


_SAFE_KEYS = {"cause_id", "id", "code", "signature", "kind", "state", "format", "language", "framework", "origin", "status", "version", "fact"}


@dataclass
class Redactor:
    mask_hosts: bool = False
    count: int = 0
    kinds: set[str] = field(default_factory=set)

    def _patterns(self):
        return _compiled(self.mask_hosts)

    def redact(self, text: str) -> str:
        if not text or _any(self.mask_hosts).search(text) is None:
            return text
        for name, rx, group in self._patterns():
            text = self._sub(rx, group, name, text)
        return text

    def _sub(self, rx, group: int, name: str, text: str) -> str:
        out: list[str] = []
        last = 0
        for m in rx.finditer(text):
            start, end = m.span(group) if group else m.span()
            if start < 0 or start < last:
                continue
            if name == "nccl-host":
                masked = "[HOST]"
            else:
                masked = MASK if name not in ("ipv4", "ipv6", "fqdn") else "[HOST]"
            out.append(text[last:start])
            out.append(masked)
            last = end
            self.count += 1
            self.kinds.add(name)
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)

    def walk(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, str):
            return value if key in _SAFE_KEYS else self.redact(value)
        if isinstance(value, list):
            return [self.walk(v, key) for v in value]
        if isinstance(value, tuple):
            return tuple(self.walk(v, key) for v in value)
        if isinstance(value, dict):
            return {k: self.walk(v, k if isinstance(k, str) else None) for k, v in value.items()}
        return value

    def redact_model(self, model):
        data = self.walk(model.model_dump())
        if self.count:
            data["redactions"] = self.count
        return type(model).model_validate(data)
