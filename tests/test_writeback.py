"""Early writeback of a growing output (files/writeback.py): the kernel is asked to start
writing each range once, in order, as it is written, so the commit's fsync finds little left;
the bytes, the --resume checksum and a resumed file's ranges are those of a sink without it."""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor_cli.files import writeback
from compactor_cli.files.parts import Part
from compactor_cli.files.sinks import AtomicFile

pytestmark = pytest.mark.skipif(not writeback.supported(), reason="no sync_file_range on this system")


@pytest.fixture
def requests(monkeypatch):
    """Every range asked for, as (fd, offset, length), passed on to the real call."""
    real = writeback._sync_file_range()
    seen: list[tuple[int, int, int]] = []

    def record(fd, offset, length, flags):
        assert flags == writeback._SYNC_FILE_RANGE_WRITE  # start writing, never wait
        seen.append((fd, offset, length))
        return real(fd, offset, length, flags)

    monkeypatch.setattr(writeback, "_call", record)
    monkeypatch.setattr(writeback, "WRITEBACK_BYTES", 4096)
    return seen


def _assert_in_order(seen, start: int, end: int) -> None:
    offset = start
    for _, at, length in seen:
        assert at == offset and length >= writeback.WRITEBACK_BYTES  # each byte asked for once, in order
        offset += length
    assert offset <= end  # nothing beyond what was written


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 9000)), max_size=12))
def test_ranges_cover_what_was_written_in_order_and_the_bytes_are_exact(tmp_path_factory, requests, pieces):
    requests.clear()
    tmp = tmp_path_factory.mktemp("wb")
    sink = AtomicFile(str(tmp / "out.jsonl"))
    expected = b""
    for k, (spliced, size) in enumerate(pieces):
        data = os.urandom(size)
        sink.write(Part.write(str(tmp / f"{k}.part"), data) if spliced and data else data)
        expected += data
    assert sink.checkpoint() == (len(expected), zlib.crc32(expected))
    sink.commit()
    assert (tmp / "out.jsonl").read_bytes() == expected
    _assert_in_order(requests, 0, len(expected))
    assert len(expected) - sum(n for _, _, n in requests) < writeback.WRITEBACK_BYTES  # asked as soon as due


def test_a_resumed_or_rewound_file_asks_only_for_what_follows(tmp_path, requests):
    first = AtomicFile(str(tmp_path / "out.jsonl"))
    first.write(b"a" * 5000)
    length, crc = first.checkpoint()
    first.fh.close()
    requests.clear()
    resumed = AtomicFile(str(tmp_path / "out.jsonl"), partial=first.tmp, resume_length=length, resume_crc=crc)
    resumed.write(b"b" * 5000)
    _assert_in_order(requests, length, 10000)
    assert requests  # 5000 new bytes passed the threshold
    resumed.rewind(length, crc)
    requests.clear()
    resumed.write(b"c" * 4096)
    _assert_in_order(requests, length, length + 4096)
    resumed.commit()
    assert (tmp_path / "out.jsonl").read_bytes() == b"a" * 5000 + b"c" * 4096


def test_without_the_call_the_output_is_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(writeback, "_call", False)  # not Linux, or no such symbol
    monkeypatch.setattr(writeback, "WRITEBACK_BYTES", 10)
    sink = AtomicFile(str(tmp_path / "out.jsonl"))
    sink.write(b"x" * 100)
    sink.commit()
    assert (tmp_path / "out.jsonl").read_bytes() == b"x" * 100
