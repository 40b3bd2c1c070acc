"""Round 4 (issue 28): a run whose report (or output) another run is writing is refused as a
state conflict: exit 1 and one line naming the path, no usage banner (the README says 1)."""

from __future__ import annotations

import orjson
from helpers import tool_conv

from compactor_cli.cli import cli
from compactor_cli.files.sinks import OutputLock


def test_a_report_another_run_writes_is_exit_1_and_one_line(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(tool_conv(3)) + b"\n")
    report = tmp_path / "report.json"
    lock = OutputLock(str(report))
    lock.acquire()  # another run holds it
    try:
        res = runner.invoke(cli, ["toolcall", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl"),
                                  "--report", str(report), "-q"])
    finally:
        lock.release()
    assert res.exit_code == 1, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    assert lines[0].startswith("error: ") and "another xcompact run is writing" in lines[0] and str(report) in lines[0]
    assert "Usage:" not in res.output and "Try 'xcompact" not in res.output
    assert not (tmp_path / "out.jsonl").exists()  # refused before anything was written


def test_an_output_another_run_writes_is_exit_1_too(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(tool_conv(3)) + b"\n")
    out = tmp_path / "out.jsonl"
    lock = OutputLock(str(out))
    lock.acquire()
    try:
        res = runner.invoke(cli, ["toolcall", str(src), "--keep", "1", "-o", str(out), "-q"])
    finally:
        lock.release()
    assert res.exit_code == 1, res.output
    assert "Usage:" not in res.output and "another xcompact run is writing" in res.output


def test_a_report_that_is_an_input_is_still_a_usage_error(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(tool_conv(3)) + b"\n")
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "1", "-o", str(tmp_path / "out.jsonl"),
                              "--report", str(src), "-q"])
    assert res.exit_code == 2, res.output
