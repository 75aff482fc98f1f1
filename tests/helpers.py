"""Test helpers: an in-process CLI runner, the project's own scenario fixtures, and access to the
shared labelled cases (present only beside a development checkout: tests that need a log use the
fixtures under tests/fixtures/, so the suite runs on a clone of the project alone).

A plain module (tests/ is not a package, so the tests import the installed `advisor`, not the
source tree)."""

from __future__ import annotations

import contextlib
import importlib.util
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
SCENARIOS = FIXTURES / "scenarios"


def benchmark_module(name: str):
    """A script of benchmarks/ loaded as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def scenario(name: str) -> dict:
    """One of the founding scenarios, from the project's own fixtures (never skipped: they ship)."""
    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text(encoding="utf-8"))


def scenario_paths() -> list[Path]:
    return sorted(SCENARIOS.glob("*.yaml"))


def load_case(name: str) -> dict:
    """A case of the shared development set, or a skip when ../shared is not there. Call it in the
    test itself, never inside an app's event loop (a TUI `run_before`), where a skip is no skip."""
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

    import time

    def fire(signum, frame):
        raise Hang(f"still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, fire)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)  # pytest-timeout's own alarm, if armed
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # give the per-test time guard back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))


def read_until(fd: int, needle: bytes, timeout: float = 30.0) -> bytes:
    """Read a pseudo-terminal until `needle` shows (or fail, with what came, after `timeout`)."""
    import os
    import select
    import time

    buf = b""
    end = time.time() + timeout
    while needle not in buf:
        left = end - time.time()
        if left <= 0:
            raise AssertionError(f"timed out waiting for {needle!r}; got:\n{buf.decode(errors='replace')[-2000:]}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf


def read_to_end(fd: int, timeout: float = 30.0) -> bytes:
    """Everything a pseudo-terminal's child still prints, until it closes the terminal."""
    import os
    import select
    import time

    buf = b""
    end = time.time() + timeout
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], max(end - time.time(), 0))
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child exited and closed the terminal
            return buf
        if not chunk:
            return buf
        buf += chunk
    raise AssertionError(f"the program did not finish in {timeout} s; got:\n{buf.decode(errors='replace')[-2000:]}")
