"""Version reading and range checks: lenient on what users type, exact PEP 440 on comparisons."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from advisor.knowledge import load_kb
from advisor.versions import _plain_clauses, major_minor, parse_version, version_matches


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.4", "2.4"),
        ("v0.15.0", "0.15.0"),
        ("2.5.1+cu124", "2.5.1"),
        ("torch 2.21.5+cuda12.4", "2.21.5"),
        ("1.4.0.dev (master, June 2021)", "1.4.0.dev0"),
        ("2.6.0rc1", "2.6.0rc1"),
        ("NCCL version 2.21.5", "2.21.5"),
    ],
)
def test_lenient_parsing_keeps_the_leading_release(text, expected):
    assert parse_version(text) == Version(expected)


@pytest.mark.parametrize("text", [None, "", "main", "latest", "unknown"])
def test_unreadable_versions_are_unknown_never_a_match(text):
    assert parse_version(text) is None
    assert version_matches(text, ">=0") is None
    assert major_minor(text) is None


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("2.1.2", "<2.2", True),
        ("2.2.0", "<2.2", False),
        ("2.2.0rc1", "<2.2", False),  # PEP 440: `<V` leaves out V's own pre-releases
        ("2.2.0rc1", ">=2.2", False),
        ("1.4.0.dev0", ">=1.4.0.dev0,<1.4.0rc0", True),
        ("1.4.0rc1", ">=1.4.0.dev0,<1.4.0rc0", False),
        ("0.15.0", "!=0.15.0", False),
        ("0.15", "==0.15.0", True),
        ("2.4.post1", ">2.4", False),  # `>V` leaves out V's post-releases
        ("2.5", ">2.4", True),
        ("2.4.1", "~=2.4.0", True),  # not a plain comparison: answered by packaging
        ("2.5.0", "~=2.4.0", False),
        ("2.4.7", "==2.4.*", True),
    ],
)
def test_range_checks(version, spec, expected):
    assert version_matches(version, spec) is expected


def test_only_plain_comparisons_take_the_fast_path():
    assert _plain_clauses(">=2.2,<2.6") is not None
    for spec in ("~=2.4.0", "==2.4.*", "===2.4", ">=2.2,~=2.4", "", "latest"):
        assert _plain_clauses(spec) is None


def _kb_ranges() -> set[str]:
    """Every string in the KB that reads as a version range: fix windows, rule conditions, formats."""
    from packaging.specifiers import InvalidSpecifier

    found: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and value[:1] in "<>=!~":
            try:
                SpecifierSet(value)
            except InvalidSpecifier:
                return
            found.add(value)

    kb = load_kb()
    for entry in [*kb.causes.values(), *kb.frameworks.values()]:
        walk(entry.model_dump())
    return found


def test_every_kb_range_reads_the_same_as_packaging():
    specs = _kb_ranges()
    assert len(specs) >= 8, specs
    bounds = {re.sub(r"^[<>=!~]+", "", clause.strip()) for spec in specs for clause in spec.split(",")}
    probe = {"0", "0.1", "2.2rc1", "2.2.post1", "99"}
    for bound in bounds:  # each bound, and its neighbours on both sides
        base = Version(bound).base_version
        probe |= {bound, base, f"{base}.dev0", f"{base}rc1", f"{base}.post1", f"{base}.1"}
    for spec in specs:
        reference = SpecifierSet(spec)
        for version in probe:
            assert version_matches(version, spec) == reference.contains(Version(version), prereleases=True), (version, spec)


_release = st.lists(st.integers(0, 12), min_size=1, max_size=4).map(lambda parts: ".".join(map(str, parts)))
_suffix = st.sampled_from(["", "a1", "b2", "rc0", "rc1", ".post1", ".dev0", "rc1.dev3", ".post2.dev1"])
_versions = st.builds(lambda r, s: r + s, _release, _suffix)
_ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
_specs = st.lists(st.builds(lambda op, v: op + v, _ops, _versions), min_size=1, max_size=3).map(",".join)


@settings(max_examples=1500, deadline=None)
@given(version=_versions, spec=_specs)
def test_fast_path_agrees_with_packaging(version, spec):
    parsed = parse_version(version)
    assert parsed == Version(version), "a well-formed version reads as itself"
    assert version_matches(version, spec) == SpecifierSet(spec).contains(parsed, prereleases=True)
