"""Integration tests run the real frameworks' parsers; they are marked `integration`."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
