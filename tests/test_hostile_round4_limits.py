"""Round 4 (issue 28): an endless or enormous line, and a few KB of compressed data that expand
to hundreds of MB, end in one clear line naming the file and the line (the record-size limit),
with memory bounded by that limit and the rest of the batch going on; never a MemoryError."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import pytest
import zstandard
from helpers import tool_conv

from compactor_cli.cli import cli
from compactor_cli.errors import InvalidInputError
from compactor_cli.files import records
from compactor_cli.files.compression import decompress_bytes

MiB = 1 << 20
GOOD = json.dumps(tool_conv(2, 50)) + "\n"


def run(runner, *args):
    res = runner.invoke(cli, [str(a) for a in args])
    return res.exit_code, res.stdout, res.stderr


def _bomb(codec: str, size: int) -> bytes:
    """A JSONL line of ``size`` bytes of "a" (no newline), compressed: a few KB at most."""
    head = b'{"messages": [{"role": "user", "content": "'
    chunk = b"a" * MiB
    if codec == "gz":
        enc: object = __import__("zlib").compressobj(9, 8, 31)
    elif codec == "bz2":
        enc = bz2.BZ2Compressor(9)
    elif codec == "xz":
        enc = lzma.LZMACompressor(preset=1)
    else:
        enc = zstandard.ZstdCompressor(level=3).compressobj()
    out = [enc.compress(head)]  # type: ignore[attr-defined]
    for _ in range(size // MiB):
        out.append(enc.compress(chunk))  # type: ignore[attr-defined]
    out.append(enc.flush())  # type: ignore[attr-defined]
    return b"".join(out)


def test_the_default_limit_is_documented_and_overridable(monkeypatch):
    assert records.max_record_bytes() == 256 * MiB
    monkeypatch.setenv("XCOMPACT_MAX_RECORD_BYTES", "1000")
    assert records.max_record_bytes() == 1000
    monkeypatch.setenv("XCOMPACT_MAX_RECORD_BYTES", "lots")
    with pytest.raises(Exception, match="XCOMPACT_MAX_RECORD_BYTES"):
        records.max_record_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("codec", ["gz", "bz2", "xz", "zst"])
def test_decompression_bomb_hits_the_limit_in_one_line(runner, tmp_path, monkeypatch, codec):
    monkeypatch.setenv("XCOMPACT_MAX_RECORD_BYTES", str(8 * MiB))
    bomb = tmp_path / f"bomb.jsonl.{codec}"
    bomb.write_bytes(_bomb(codec, 200 * MiB))
    assert bomb.stat().st_size < 256 * 1024  # gzip expands at most 1032 times; the others far more
    good = tmp_path / "good.jsonl"
    good.write_text(GOOD)
    code, _o, err = run(runner, "validate", bomb, good)
    assert code == 1, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, err
    assert str(bomb) in errors[0] and "line 1" in errors[0] and "8 MiB" in errors[0]
    assert "XCOMPACT_MAX_RECORD_BYTES" in errors[0]
    assert "1 valid" in err  # the rest of the batch went on


@pytest.mark.slow
@pytest.mark.parametrize("codec", ["gz", "bz2", "xz", "zst"])
def test_decompression_output_is_bounded_in_memory(tmp_path, monkeypatch, codec):
    """Decoding never holds more than a bounded slice of the output, whatever the ratio."""
    monkeypatch.setenv("XCOMPACT_MAX_RECORD_BYTES", str(4 * MiB))
    bomb = tmp_path / f"bomb.jsonl.{codec}"
    bomb.write_bytes(_bomb(codec, 200 * MiB))
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInputError, match="line 1"):
            list(records.iter_records(str(bomb)))
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 48 * MiB, peak


@pytest.mark.parametrize("codec", ["gz", "bz2", "xz", "zst"])
def test_decompress_bytes_is_bounded_too(monkeypatch, codec):
    monkeypatch.setenv("XCOMPACT_MAX_RECORD_BYTES", str(4 * MiB))
    data = _bomb(codec, 64 * MiB)
    name = {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd"}[codec]
    with pytest.raises(InvalidInputError, match="XCOMPACT_MAX_RECORD_BYTES"):
        decompress_bytes(data, name, limit=4 * MiB)


def test_normal_compressed_input_still_reads(runner, tmp_path):
    for suffix, opener in ((".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)):
        p = tmp_path / f"ok.jsonl{suffix}"
        with opener(p, "wb") as fh:
            fh.write(GOOD.encode() * 3)
        code, _o, err = run(runner, "validate", p)
        assert code == 0, err


def test_enormous_line_in_a_plain_file_names_file_and_line(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("XCOMPACT_MAX_RECORD_BYTES", str(1 * MiB))
    big = tmp_path / "big.jsonl"
    big.write_bytes(GOOD.encode() + b'{"messages": "' + b"x" * (3 * MiB))  # line 2 has no newline
    good = tmp_path / "good.jsonl"
    good.write_text(GOOD)
    code, _o, err = run(runner, "validate", big, good)
    assert code == 1, err
    assert f"error: {big}: line 2 is longer than 1 MiB" in err
    assert "1 valid" in err or "2 valid" in err


@pytest.mark.parametrize("name", ["doc.json", "log.jsonl"])
def test_enormous_document_or_log_is_refused(runner, tmp_path, monkeypatch, name):
    monkeypatch.setenv("XCOMPACT_MAX_RECORD_BYTES", str(1 * MiB))
    p = tmp_path / name
    if name.endswith(".json"):
        p.write_text('{"messages": [{"role": "user", "content": "' + "x" * (2 * MiB) + '"}]}')
        code, _o, err = run(runner, "validate", p)
    else:  # a Claude Code session: each line under the limit, the whole file over four times it
        line = json.dumps({"type": "user", "sessionId": "s", "uuid": "u", "parentUuid": None,
                           "message": {"role": "user", "content": "y" * (MiB // 2)}}) + "\n"
        p.write_text(line * 9)
        code, _o, err = run(runner, "validate", "--from", "claude-code", p)
    assert code == 1, err
    assert "XCOMPACT_MAX_RECORD_BYTES" in err and "Traceback" not in err


def test_endless_line_from_a_fifo_ends_with_a_clear_error(tmp_path):
    """A stream with no newline (a device, a pipe from a runaway program) stops at the limit."""
    fifo = tmp_path / "endless.jsonl"
    os.mkfifo(fifo)
    stop = threading.Event()

    def feed() -> None:
        try:
            with open(fifo, "wb") as fh:
                fh.write(b'{"messages": "')
                chunk = b"z" * MiB
                while not stop.is_set():
                    fh.write(chunk)
        except (BrokenPipeError, OSError):
            pass

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    env = {**os.environ, "XCOMPACT_MAX_RECORD_BYTES": str(4 * MiB)}
    good = tmp_path / "good.jsonl"
    good.write_text(GOOD)
    try:
        proc = subprocess.run([sys.executable, "-m", "compactor_cli", "validate", str(fifo), str(good)],
                              capture_output=True, timeout=120, env=env)
    finally:
        stop.set()
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert f"{fifo}: line 1 is longer than 4 MiB" in err
    assert "Traceback" not in err and "1 valid" in err


def test_an_enormous_line_in_the_parallel_byte_ranges_is_a_clear_error(tmp_path):
    """-j 2 on a plain JSONL of 4 MiB or more splits it into byte ranges at line ends: a line over
    the limit there is the same one-line error, never a range read whole into memory."""
    import subprocess
    import sys

    big = tmp_path / "big.jsonl"
    with open(big, "wb") as fh:
        while fh.tell() < 6 * MiB:
            fh.write(GOOD.encode())
        fh.write(b'{"messages": "' + b"x" * (40 * MiB))  # no newline
    env = {**os.environ, "XCOMPACT_MAX_RECORD_BYTES": str(1 * MiB)}
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", str(big), "-j", "2", "--no-tokens",
                          "-o", str(tmp_path / "out.jsonl")], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 1, res.stderr
    assert "longer than 1 MiB, the record-size limit" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "out.jsonl").exists()
