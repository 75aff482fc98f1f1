"""Test helpers: an in-process CLI runner and access to the shared labelled cases.

A plain module (tests/ is not a package, so the tests import the installed `advisor`, not the
source tree)."""

from __future__ import annotations

import contextlib
import io
import json
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CASES = SHARED / "cases"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass
class CLIResult:
    code: int
    out: str
    err: str

    @property
    def json(self) -> dict:
        return json.loads(self.out)


def run_cli(*argv: str, stdin: bytes | None = None) -> CLIResult:
    """Run `advisor` in-process with captured streams (httpie's MockEnvironment idea)."""
    from advisor.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return CLIResult(code, out.getvalue(), err.getvalue())


def load_case(name: str) -> dict:
    path = CASES / f"{name}.yaml"
    if not path.is_file():
        pytest.skip(f"shared case {name} is not available at {CASES}")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def case_paths() -> list[Path]:
    return sorted(CASES.glob("*.yaml")) if CASES.is_dir() else []


class Hang(Exception):
    """An in-process run outlived its hang guard."""


@contextlib.contextmanager
def hang_guard(seconds: float):
    """Fail an in-process run still going after `seconds` (SIGALRM, main thread only). A guard
    against hangs on hostile input, not a speed assertion: set it far above the normal time."""
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        yield
        return

    def fire(signum, frame):
        raise Hang(f"still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
