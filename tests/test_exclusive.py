"""files/exclusive.py: an output's temporary file is made as tempfile.mkstemp makes one (created
here or not at all, no link followed, mode 0600, not inherited), without importing tempfile."""

from __future__ import annotations

import os
import stat
import tempfile

import pytest

from compactor_cli.files import exclusive
from compactor_cli.files.exclusive import create_exclusive
from compactor_cli.files.sinks import TEMP_SUFFIX, AtomicFile, partial_prefix


def _names(monkeypatch, *chunks: bytes) -> None:
    """os.urandom gives these bytes, in turn, to the name maker (a collision made on purpose)."""
    given = list(chunks)
    monkeypatch.setattr(exclusive.os, "urandom", lambda n: given.pop(0))


def test_the_file_is_new_private_and_named_as_asked(tmp_path):
    fd, path = create_exclusive(str(tmp_path), ".xcompact-abc-", ".partial")
    try:
        name = os.path.basename(path)
        assert os.path.dirname(path) == str(tmp_path) and os.path.isabs(path)
        assert name.startswith(".xcompact-abc-") and name.endswith(".partial")
        assert len(name) == len(".xcompact-abc-") + 8 + len(".partial")
        int(name[len(".xcompact-abc-"):-len(".partial")], 16)
        st = os.fstat(fd)
        assert stat.S_ISREG(st.st_mode) and st.st_size == 0
        assert stat.S_IMODE(st.st_mode) & 0o077 == 0  # 0600 (less under a strict umask): as mkstemp's
        assert not os.get_inheritable(fd)
        os.write(fd, b"x")
        os.lseek(fd, 0, os.SEEK_SET)
        assert os.read(fd, 1) == b"x"  # open for reading and writing
    finally:
        os.close(fd)


def test_same_mode_as_mkstemp(tmp_path):
    fd, path = create_exclusive(str(tmp_path), "a-", ".p")
    fd2, path2 = tempfile.mkstemp(prefix="b-", suffix=".p", dir=str(tmp_path))
    os.close(fd)
    os.close(fd2)
    assert stat.S_IMODE(os.stat(path).st_mode) == stat.S_IMODE(os.stat(path2).st_mode)


def test_a_name_taken_by_a_file_or_a_planted_link_is_never_opened(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    (tmp_path / "p-00000000.s").write_bytes(b"someone else's")
    os.symlink(victim, tmp_path / "p-11111111.s")
    _names(monkeypatch, b"\x00" * 4, b"\x11" * 4, b"\x22" * 4)
    fd, path = create_exclusive(str(tmp_path), "p-", ".s")
    os.write(fd, b"ours")
    os.close(fd)
    assert path == str(tmp_path / "p-22222222.s")
    assert victim.read_bytes() == b"keep me"
    assert (tmp_path / "p-00000000.s").read_bytes() == b"someone else's"
    assert os.path.islink(tmp_path / "p-11111111.s")


def test_when_every_name_is_taken_it_says_so(tmp_path, monkeypatch):
    (tmp_path / "p-00000000.s").write_bytes(b"")
    monkeypatch.setattr(exclusive.os, "urandom", lambda n: b"\x00" * n)
    monkeypatch.setattr(exclusive, "_ATTEMPTS", 5)
    with pytest.raises(FileExistsError):
        create_exclusive(str(tmp_path), "p-", ".s")
    assert [p.name for p in tmp_path.iterdir()] == ["p-00000000.s"]


def test_an_output_s_partial_file_is_made_so(tmp_path):
    target = tmp_path / "out.jsonl"
    sink = AtomicFile(str(target))
    try:
        name = os.path.basename(sink.tmp)
        assert name.startswith(partial_prefix(str(target))) and name.endswith(TEMP_SUFFIX)
        assert stat.S_IMODE(os.stat(sink.tmp).st_mode) & 0o077 == 0
        sink.write(b"{}\n")
        sink.commit()
    finally:
        if not sink.fh.closed:
            sink.abort()
    assert target.read_bytes() == b"{}\n" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
