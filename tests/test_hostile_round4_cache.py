"""Round 4 (issue 28): the summary cache never writes through a symbolic link planted at its
path (or at its journal's): the cache turns itself off and says why; the target is untouched."""

from __future__ import annotations

import os

import pytest

from compactor_cli.backends.cache import CACHE_FILE, SummaryCache


@pytest.mark.parametrize("name", [CACHE_FILE, CACHE_FILE + "-wal", CACHE_FILE + "-shm", CACHE_FILE + "-journal"])
def test_a_symlink_at_the_cache_path_is_not_followed(tmp_path, name):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    os.symlink(victim, cache_dir / name)
    cache = SummaryCache(str(cache_dir))
    cache.put("k", "a summary")
    assert cache.get("k") is None
    cache.close()
    assert victim.read_bytes() == b"precious\n"
    assert cache.problem is not None and "symbolic link" in cache.problem
    assert os.path.islink(cache_dir / name)  # left as it was: refused, not removed


def test_a_dangling_symlink_is_not_followed_either(tmp_path):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    target = tmp_path / "elsewhere.sqlite3"
    os.symlink(target, cache_dir / CACHE_FILE)
    cache = SummaryCache(str(cache_dir))
    cache.put("k", "a summary")
    cache.close()
    assert not target.exists()
    assert cache.problem is not None and "symbolic link" in cache.problem


def test_a_normal_cache_still_works(tmp_path):
    cache = SummaryCache(str(tmp_path / "cache"))
    cache.put("k", "a summary")
    assert cache.get("k") == "a summary"
    cache.close()
    again = SummaryCache(str(tmp_path / "cache"))
    assert again.get("k") == "a summary" and again.problem is None
    again.close()
