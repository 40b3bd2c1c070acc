"""One record, one count (issue 28): what `show` says a compacted record weighs is what the
report of the run that wrote it said."""

from __future__ import annotations

import re

import orjson
from helpers import FIXTURES

from compactor_cli.cli import cli


def test_show_counts_a_record_as_the_report_does(runner, tmp_path):
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    res = runner.invoke(cli, ["toolcall", str(FIXTURES / "taubench_airline_5.jsonl"), "--keep", "4", "-o", str(out),
                              "--report", str(report)])
    assert res.exit_code == 0, res.stderr
    after = [item["tokens_after"] for item in orjson.loads(report.read_bytes())["items"]]
    counts = []
    for line in range(1, len(after) + 1):
        shown = runner.invoke(cli, ["show", str(out), "--line", str(line)])
        assert shown.exit_code == 0, shown.stderr
        counts.append(int(re.search(r"messages · ([\d,]+) tokens", shown.stdout).group(1).replace(",", "")))
    assert counts == after


def test_extract_prints_a_result_exactly_without_adding_a_newline(runner, tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    conv = {"messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "abc é " * 100 + "end"},
                         {"role": "assistant", "content": "ok"}]}
    src.write_bytes(orjson.dumps(conv) + b"\n")
    assert runner.invoke(cli, ["toolcall", str(src), "--keep", "0", "-o", str(out)]).exit_code == 0
    res = runner.invoke(cli, ["extract", "c1", str(out)])
    assert res.exit_code == 0 and res.stdout_bytes == ("abc é " * 100 + "end").encode()
