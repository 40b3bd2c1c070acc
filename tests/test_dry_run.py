"""--dry-run on every writing command: the same work in memory, the same report (with the sizes
the records would have been written at), and nothing written anywhere."""

from __future__ import annotations

import os
import shutil

import orjson
import pytest
from helpers import FIXTURES

from compactor_cli.cli import cli

COMMANDS = {
    "toolcall": ["--keep", "2"],
    "summarize": ["--backend", "extractive", "--keep-recent", "6"],
    "compact": ["--token-threshold", "3000", "--backend", "extractive"],
}


def _tree(path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_dry_run_reports_what_the_real_run_does_and_writes_nothing(runner, tmp_path, command):
    src = tmp_path / "in" / "tau.jsonl"
    src.parent.mkdir()
    shutil.copy(FIXTURES / "taubench_airline_5.jsonl", src)
    real = runner.invoke(cli, [command, str(src), *COMMANDS[command], "-o", str(tmp_path / "out.jsonl"),
                               "--report", str(tmp_path / "real.json"), "-q"])
    assert real.exit_code == 0, real.stderr
    before = _tree(tmp_path)
    dry = runner.invoke(cli, [command, str(src), *COMMANDS[command], "--dry-run", "--report", "-"])
    assert dry.exit_code == 0, dry.stderr
    after = _tree(tmp_path)
    assert after == before  # nothing written, nothing left behind (no journal, no partial file)
    report = orjson.loads(dry.stdout)
    real_report = orjson.loads((tmp_path / "real.json").read_bytes())
    out_lines = (tmp_path / "out.jsonl").read_bytes().splitlines()
    assert [i["status"] for i in report["items"]] == [i["status"] for i in real_report["items"]]
    # the sizes a dry run announces are the sizes the real run wrote, record by record
    assert [i["output_bytes"] for i in report["items"]] == [len(line) + 1 for line in out_lines]
    assert [i["output_bytes"] for i in real_report["items"]] == [len(line) + 1 for line in out_lines]
    assert report["totals"]["output_bytes"] == (tmp_path / "out.jsonl").stat().st_size
    assert report["totals"]["input_bytes"] == src.stat().st_size
    assert report["parameters"]["dry_run"] is True
    assert any(n.startswith("dry run: nothing was written") for n in report["totals"]["notes"])
    assert "dry run, nothing written: the output would be" in dry.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("extra", [["-o", "x.jsonl"], ["--in-place"], ["--resume"], ["--api-ready", "side.jsonl"]])
def test_a_dry_run_refuses_what_would_write(runner, tmp_path, command, extra):
    src = tmp_path / "tau.jsonl"
    shutil.copy(FIXTURES / "taubench_airline_5.jsonl", src)
    os.chdir(tmp_path)
    res = runner.invoke(cli, [command, str(src), *COMMANDS[command], "--dry-run", *extra])
    assert res.exit_code == 2
    assert "nothing" in res.stderr and extra[0] in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tau.jsonl"]


def test_a_dry_run_of_summarize_calls_no_model_even_when_one_is_named(runner, tmp_path):
    """--base-url names a server nobody listens on: a dry run must not try it."""
    src = tmp_path / "tau.jsonl"
    shutil.copy(FIXTURES / "taubench_airline_5.jsonl", src)
    res = runner.invoke(cli, ["summarize", str(src), "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
                              "--dry-run", "--report", "-", "-q"])
    assert res.exit_code == 0, res.stderr
    report = orjson.loads(res.stdout)
    assert report["parameters"]["backend"] == "extractive"
    assert {i["status"] for i in report["items"]} <= {"SUMMARIZED", "NOTHING_TO_CONDENSE"}
