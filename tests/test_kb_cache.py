"""The on-disk KB cache: fast start-up must never mean a stale, foreign or corrupt knowledge base."""

from __future__ import annotations

import os
import stat

import pytest

from advisor import knowledge
from advisor.knowledge import load_kb

from test_kb import GOOD_CAUSE, write_team_kb


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(directory))
    monkeypatch.delenv("ADVISOR_NO_CACHE", raising=False)
    knowledge._load_cached.cache_clear()
    yield directory
    knowledge._load_cached.cache_clear()


def fresh_load(*dirs):
    """Load as a new process would: nothing in memory, only what is on disk."""
    knowledge._load_cached.cache_clear()
    return load_kb(dirs)


def caches(directory):
    return sorted(directory.glob("kb-*.pickle"))


def test_first_load_writes_a_private_cache_that_the_next_load_reads(cache_dir, monkeypatch):
    first = fresh_load()
    [path] = caches(cache_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    calls = []
    monkeypatch.setattr(knowledge, "_load_and_validate", lambda extra: calls.append(extra))
    second = fresh_load()
    assert calls == [], "a warm start must not parse YAML again"
    assert sorted(second.causes) == sorted(first.causes)
    assert second.probe_table is not None and second.atoms == first.atoms


def test_an_edited_kb_file_gets_a_new_cache(cache_dir, tmp_path):
    team = write_team_kb(tmp_path, GOOD_CAUSE)
    assert fresh_load(team).causes["team-nfs-quota"].title == "Our NFS quota stops checkpoint writes"
    (team / "causes" / "team-cause.yaml").write_text(GOOD_CAUSE.replace("Our NFS quota stops", "Quota blocks"))
    assert fresh_load(team).causes["team-nfs-quota"].title == "Quota blocks checkpoint writes"
    assert len(caches(cache_dir)) == 2


@pytest.mark.parametrize("damage", [b"", b"not a pickle", b"\x80\x05garbage"])
def test_a_corrupt_cache_is_rebuilt(cache_dir, damage):
    fresh_load()
    [path] = caches(cache_dir)
    path.write_bytes(damage)
    assert "checkpoint-save-straggler" in fresh_load().codes
    assert path.stat().st_size > 1000


def test_a_cache_others_can_write_is_ignored(cache_dir, monkeypatch):
    fresh_load()
    [path] = caches(cache_dir)
    os.chmod(path, 0o666)
    calls = []
    real = knowledge._load_and_validate
    monkeypatch.setattr(knowledge, "_load_and_validate", lambda extra: calls.append(extra) or real(extra))
    fresh_load()
    assert calls, "a world-writable pickle must never be unpickled"


def test_group_or_world_writable_cache_is_refused_even_for_root(cache_dir):
    fresh_load()
    [path] = caches(cache_dir)
    os.chmod(path, 0o620)
    assert knowledge._read_cache(path) is None
    os.chmod(path, 0o600)
    assert knowledge._read_cache(path) is not None


def test_old_caches_are_pruned(cache_dir):
    cache_dir.mkdir(parents=True)
    for i in range(knowledge.CACHE_KEEP + 5):
        old = cache_dir / f"kb-{i:032x}.pickle"
        old.write_bytes(b"old")
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    fresh_load()
    left = caches(cache_dir)
    assert len(left) == knowledge.CACHE_KEEP
    assert knowledge._cache_file(knowledge._fingerprint(())) in left, "the cache just written survives"
    assert cache_dir / f"kb-{0:032x}.pickle" not in left, "the oldest goes first"


def test_no_cache_env_disables_disk_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("ADVISOR_NO_CACHE", "1")
    fresh_load()
    assert not cache_dir.exists() or caches(cache_dir) == []


def test_unwritable_cache_dir_still_loads(tmp_path, monkeypatch):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(blocker / "cache"))
    assert "checkpoint-save-straggler" in fresh_load().codes
