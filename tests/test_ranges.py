"""Worker processes take a JSONL file by byte ranges: the bytes, the report and the warnings
are those of a run in one process, whatever the ranges cut, and a killed range run resumes to
the same bytes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import start_run, tool_conv, wait_for_checkpoint

from compactor_cli.engine import executors as parallel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from generate import generate  # noqa: E402


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=300, **kw)


def _awkward_file(path: Path) -> None:
    """Blank lines, CRLF, a raw U+2028 inside a string, a broken line, a record far larger than
    a range, and no newline at the end."""
    lines = []
    for i in range(60):
        conv = tool_conv(n_tools=4, size=300 + 40 * i, ids=[f"c{i}_{k}" for k in range(4)])
        conv["messages"][1]["content"] = f"question\u2028{i}"
        lines.append(orjson.dumps(conv))
    lines[7] = b"{broken"
    lines[20] = orjson.dumps(tool_conv(n_tools=3, size=300_000))
    lines.insert(30, b"")
    lines[40] = lines[40] + b"\r"
    path.write_bytes(b"\n".join(lines))


@pytest.mark.slow
def test_byte_ranges_give_the_bytes_report_and_messages_of_one_process(tmp_path, monkeypatch):
    src = tmp_path / "awkward.jsonl"
    _awkward_file(src)
    runs = {}
    for jobs, chunk in (("1", None), ("2", "20000")):
        env = {**os.environ, "XCOMPACT_TEST_PARALLEL_MIN_BYTES": "0"}
        if chunk:
            env["XCOMPACT_TEST_CHUNK_BYTES"] = chunk  # many ranges, cut everywhere
        out, rep = tmp_path / f"o{jobs}.jsonl", tmp_path / f"r{jobs}.json"
        proc = xcompact("toolcall", "--keep", "1", str(src), "-o", str(out), "--report", str(rep), "-j", jobs,
                        env=env)
        assert proc.returncode == 1  # the broken line
        runs[jobs] = (out.read_bytes(), orjson.loads(rep.read_bytes()), proc.stderr.splitlines()[:-1])
    assert runs["1"] == runs["2"]
    items = runs["2"][1]["items"]
    assert [i["line"] for i in items] == [n for n in range(1, 62) if n != 31]  # line 31 is blank
    assert items[7]["status"] == "INVALID_INPUT"


def test_chunk_bounds_cover_the_file_at_line_ends(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"n": i, "pad": "x" * (i * 37 % 500)}) + b"\n" for i in range(300)))
    bounds = list(parallel.chunk_bounds(str(src), 0, 1000))
    data = src.read_bytes()
    assert bounds[0][0] == 0 and bounds[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert all(data[hi - 1:hi] == b"\n" for _, hi in bounds)


@pytest.mark.slow
def test_a_killed_range_run_resumes_to_the_same_bytes(tmp_path):
    src = tmp_path / "big.jsonl"
    generate(str(src), 6)
    ref = tmp_path / "ref.jsonl"
    assert xcompact("toolcall", "--keep", "2", "-j", "1", "-q", str(src), "-o", str(ref)).returncode == 0
    out, rep = tmp_path / "out" / "o.jsonl", tmp_path / "out" / "r.json"
    args = ["toolcall", "--keep", "2", "-j", "2", "-q", str(src), "-o", str(out), "--report", str(rep)]
    proc = start_run(args, env={"XCOMPACT_CHECKPOINT_SECONDS": "0", "XCOMPACT_TEST_CHUNK_BYTES": "200000"},
                     start_new_session=True)
    try:
        wait_for_checkpoint(proc, min_offset=src.stat().st_size // 3 + 1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers
        proc.wait(timeout=30)
    assert not out.exists()
    done = xcompact(*args, "--resume", env={**os.environ, "XCOMPACT_TEST_CHUNK_BYTES": "300000"})
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == ref.read_bytes()
    assert orjson.loads(rep.read_bytes())["totals"]["conversations"] == len(ref.read_bytes().splitlines())
