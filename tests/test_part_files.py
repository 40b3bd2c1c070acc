"""Workers' part files (issue 17, -j N): each byte range's output is written by its worker and
spliced into the output by the main process; the bytes, the --resume checksum and the clean-up
must be as when the main process received every byte itself."""

from __future__ import annotations

import errno
import gzip
import os
import subprocess
import sys
import tempfile
import zlib

import orjson
import pytest
from helpers import tool_conv
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.engine import executors
from compactor_cli.files.parts import PARTS_PREFIX, Part, crc32_combine, remove_stale_parts
from compactor_cli.files.sinks import AtomicFile

ENV = {"XCOMPACT_TEST_PARALLEL_MIN_BYTES": "0", "XCOMPACT_TEST_CHUNK_BYTES": "20000"}


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=300, **kw)


def _parts_dirs(tmp: os.PathLike) -> list[str]:
    return [n for n in os.listdir(tmp) if n.startswith(PARTS_PREFIX)]


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(orjson.dumps(tool_conv(4, size=300 + i)) + b"\n" for i in range(120)))
    return path


@settings(deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=3000))
def test_crc32_combine_is_zlibs(a, b):
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_crc32_combine_over_large_lengths():
    a, b = os.urandom(1000), os.urandom(5 * 2**20 + 3)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


@pytest.mark.parametrize("fallback", [False, True], ids=["copy_file_range", "read-write"])
def test_a_spliced_part_extends_an_atomic_file_and_its_crc(tmp_path, monkeypatch, fallback):
    if fallback:
        def refuse(*a, **k):
            raise OSError(errno.EXDEV, "cross-device")
        monkeypatch.setattr(os, "copy_file_range", refuse)
    sink = AtomicFile(str(tmp_path / "out.jsonl"))
    head, body, tail = b"first\n", os.urandom(3 * 2**20 + 11), b"last\n"
    part = Part.write(str(tmp_path / "1.part"), body)
    sink.write(head)
    sink.write(part)
    sink.write(tail)
    assert not os.path.exists(part.path)  # spliced parts are removed
    assert sink.checkpoint() == (len(head + body + tail), zlib.crc32(head + body + tail))
    sink.commit()
    assert (tmp_path / "out.jsonl").read_bytes() == head + body + tail


@pytest.mark.parametrize("out_name", ["out.jsonl", "out.jsonl.gz", "-"])
def test_j2_writes_the_j1_bytes_and_leaves_no_part(src, tmp_path, out_name):
    # a temporary directory of its own: under pytest -n the other workers' -j runs make and
    # remove their parts directories in the shared one at any moment
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    ref = tmp_path / "ref.jsonl"
    assert xcompact("toolcall", "-q", "-j", "1", str(src), "-o", str(ref)).returncode == 0
    env = {**os.environ, **ENV, "TMPDIR": str(tmp)}
    if out_name == "-":
        proc = xcompact("toolcall", "-q", "-j", "2", str(src), env=env)
        got = proc.stdout
    else:
        proc = xcompact("toolcall", "-q", "-j", "2", str(src), "-o", str(tmp_path / out_name), env=env)
        got = (tmp_path / out_name).read_bytes()
        got = gzip.decompress(got) if out_name.endswith(".gz") else got
    assert proc.returncode == 0, proc.stderr
    assert got == ref.read_bytes()
    assert _parts_dirs(tmp) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".xcompact-")] == []


def test_ranges_in_flight_when_a_file_stops_leave_no_part_and_close_removes_the_directory(src, monkeypatch):
    from compactor_cli.commands.settings import Settings

    monkeypatch.setattr(executors, "CHUNK_BYTES", 20000)
    parallel = executors.ParallelOutcomes(Settings("toolcall", count_tokens=False), 2)
    try:
        assert parallel.parts is not None and os.path.isdir(parallel.parts)
        ranges = parallel.ranges(str(src), "in.jsonl", 0)
        _, _, first = next(ranges)
        assert isinstance(first.out, Part)
        ranges.close()  # the file failed here: the ranges in flight are discarded when they finish
        parallel.pool.shutdown(wait=True)
        assert os.listdir(parallel.parts) == [os.path.basename(first.out.path)]  # the one handed out
        parts = parallel.parts
    finally:
        parallel.close()
    assert not os.path.exists(parts)


def test_a_killed_runs_parts_directory_is_removed_by_the_next_run(src, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    stale = tempfile.mkdtemp(prefix=f"{PARTS_PREFIX}{int(dead.stdout)}-")
    open(os.path.join(stale, "1.part"), "wb").close()
    mine = tempfile.mkdtemp(prefix=f"{PARTS_PREFIX}{os.getpid()}-")  # a live run's: kept
    try:
        remove_stale_parts()
        assert not os.path.exists(stale) and os.path.isdir(mine)
    finally:
        os.rmdir(mine)
