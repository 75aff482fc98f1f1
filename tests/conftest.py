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


@pytest.fixture(scope="session", autouse=True)
def private_kb_cache(tmp_path_factory):
    """Keep the suite's KB caches out of the user's ~/.cache (subprocesses inherit the variable)."""
    import os

    os.environ["ADVISOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("kb-cache"))
