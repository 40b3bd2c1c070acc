"""Option, config and library values are checked at the edge (issue 16): a value beyond 64
bits, a config value of the wrong type, a malformed --base-url, a non-finite float are usage
errors (exit 2, one line, no traceback, nothing written); a destructive option from a config
file is refused unless the command line says it; the library raises the package's errors."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, tool_conv

from compactor_cli import InvalidInputError, UsageError, XCompactError, reclaim_tool_results
from compactor_cli.batch import process_lines, settings_for

AIRLINE = FIXTURES / "taubench_airline_5.jsonl"


def xcompact(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=120, cwd=cwd,
                          **kw)


def _usage_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    assert proc.stdout == b""
    line = [ln for ln in err.splitlines() if ln.startswith("Error:")]
    assert len(line) == 1 and all(w in line[0] for w in words), err


@pytest.mark.parametrize("args", [
    ["toolcall", "--keep", str(10**20)],
    ["toolcall", "-j", str(2**64)],
    ["summarize", "--keep-recent", str(-(2**70))],
    ["summarize", "--max-summary-tokens", str(10**30)],
    ["compact", "--token-threshold", str(2**63)],
    ["compact", "--message-threshold", str(10**19)],
    ["summarize", "--backend", "openai", "--retries", str(10**20)],
], ids=lambda a: a[1] if a[1].startswith("--") else a[0])
def test_integers_beyond_64_bits_are_usage_errors(tmp_path, args):
    (tmp_path / "d.jsonl").write_bytes(AIRLINE.read_bytes())
    _usage_error(xcompact(*args, "d.jsonl", "-o", "o.jsonl", cwd=tmp_path), "Invalid value")
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("option", [["--temperature", "nan"], ["--temperature", "inf"], ["--temperature", "-1"],
                                    ["--timeout", "nan"], ["--timeout", "inf"],
                                    ["--base-url", "http://h:notaport/v1"], ["--base-url", "http://h:99999/v1"],
                                    ["--base-url", "ftp://h/v1"], ["--base-url", "not a url"]])
def test_malformed_model_options_are_usage_errors(tmp_path, option):
    (tmp_path / "d.jsonl").write_bytes(AIRLINE.read_bytes())
    _usage_error(xcompact("summarize", "--backend", "openai", *option, "d.jsonl", cwd=tmp_path), option[0])


@pytest.mark.parametrize("toml", [
    "keep = [1, 2]\n", "keep = \"abc\"\n", "keep = 100000000000000000000000\n", "quiet = \"yes\"\n",
    "[toolcall]\nkeep = {a = 1}\n", "[tool]\nxcompact = 5\n", "[tool.xcompact]\nkeep = 1.5\n",
    "originals = 3\n",
], ids=["list", "string-for-int", "huge", "string-for-flag", "table-for-int", "tool-xcompact-int", "float-for-int",
        "int-for-choice"])
def test_config_values_of_the_wrong_type_are_usage_errors(tmp_path, toml):
    (tmp_path / "d.jsonl").write_bytes(AIRLINE.read_bytes())
    (tmp_path / "c.toml").write_text(toml)
    _usage_error(xcompact("toolcall", "--config", "c.toml", "d.jsonl", cwd=tmp_path), "c.toml")


@pytest.mark.parametrize("command", [["toolcall"], ["toolcall", "-o", "out.jsonl"], ["restore"]])
def test_in_place_from_a_pyproject_does_not_rewrite_an_input(tmp_path, command):
    """A pyproject.toml in the working directory with in-place = true rewrote the input of a
    command that asked for stdout."""
    data = tmp_path / "d.jsonl"
    data.write_bytes(AIRLINE.read_bytes())
    before = hashlib.sha256(data.read_bytes()).hexdigest()
    (tmp_path / "pyproject.toml").write_text("[tool.xcompact]\nin-place = true\n")
    proc = xcompact(*command, "d.jsonl", cwd=tmp_path)
    _usage_error(proc, "in-place", "command line")
    assert hashlib.sha256(data.read_bytes()).hexdigest() == before


def test_in_place_on_the_command_line_still_works_with_that_pyproject(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_bytes(AIRLINE.read_bytes())
    (tmp_path / "pyproject.toml").write_text("[tool.xcompact]\nin-place = true\nkeep = 0\n")
    proc = xcompact("toolcall", "-q", "d.jsonl", "--in-place", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert data.read_bytes() != AIRLINE.read_bytes()


@pytest.mark.parametrize("call", [
    lambda: reclaim_tool_results(None),
    lambda: reclaim_tool_results("not a dump"),
    lambda: reclaim_tool_results({"messages": None}),
    lambda: reclaim_tool_results(tool_conv(2), keep="abc"),
    lambda: reclaim_tool_results(tool_conv(2), keep=-1),
    lambda: process_lines("one line as str", "toolcall"),
    lambda: process_lines(b"{}", "toolcall"),
    lambda: process_lines([1, 2], "toolcall"),
    lambda: process_lines(["{}"], 5),
    lambda: settings_for("toolcall", keep="abc"),
    lambda: settings_for("toolcall", keep=10**20),
    lambda: settings_for("summarize", temperature=float("nan")),
    lambda: settings_for("nope"),
], ids=["reclaim-None", "reclaim-str", "reclaim-messages-None", "reclaim-keep-str", "reclaim-keep-negative",
        "lines-str", "lines-bytes", "lines-of-int", "settings-int", "keep-str", "keep-huge", "temperature-nan",
        "unknown-command"])
def test_the_library_raises_its_own_errors_for_wrong_types(call):
    with pytest.raises(XCompactError) as info:
        call()
    assert isinstance(info.value, (UsageError, InvalidInputError))
