"""Shared fixtures: the loaded KB and an in-process CLI runner."""

from __future__ import annotations

import pytest

from helpers import run_cli


@pytest.fixture(scope="session")
def kb():
    from advisor.knowledge import load_kb

    return load_kb()


@pytest.fixture
def cli():
    return run_cli
