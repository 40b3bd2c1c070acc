"""What a user reads: a closed stdout, capped error lines, hints for files of the wrong shape,
warning totals, option conflicts found before any work, one-line usage errors, errors that
name the right file, honest restore and extract messages, backend selection; and the library's
summarize_dump with a backend name. Each test is a regression test for one defect."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, ROOT, long_conv, tool_conv

from compactor_cli.cli import cli

sys.path.insert(0, str(ROOT / "bench"))
from generate import generate  # noqa: E402

OFFLINE_URL = "http://127.0.0.1:9"  # the discard port: nothing listens, connections are refused at once


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=300, **kw)


def one_usage_error(proc: subprocess.CompletedProcess) -> str:
    """The single 'Error:' line of a usage error (exit 2), with no traceback and no stdout."""
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert proc.stdout == b""
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, err
    return lines[0]


def report_of(path: Path) -> dict:
    return orjson.loads(path.read_bytes())


@pytest.fixture
def three(tmp_path) -> Path:
    src = tmp_path / "three.jsonl"
    src.write_bytes(b"".join(orjson.dumps(tool_conv(3, 400)) + b"\n" for _ in range(3)))
    return src


@pytest.fixture
def long_jsonl(tmp_path) -> Path:
    src = tmp_path / "long.jsonl"
    src.write_bytes(orjson.dumps(long_conv(6, 300)) + b"\n")
    return src


# ---------------------------------------------------------------- a closed stdout

@pytest.mark.slow
def test_a_reader_that_closes_stdout_ends_the_run_quietly_with_141(tmp_path):
    """Defect 10: `xcompact toolcall big.jsonl | head -n 1` printed 'cannot read or write:
    Broken pipe' and exited 1; now nothing on stderr and exit 141, as SIGPIPE would."""
    big = tmp_path / "big.jsonl"
    generate(str(big), 5)
    proc = subprocess.Popen([sys.executable, "-m", "compactor_cli", "toolcall", str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert orjson.loads(first)["messages"]
    assert b"Broken pipe" not in err and b"error" not in err.lower() and b"Traceback" not in err
    assert proc.returncode == 141


# ---------------------------------------------------------------- error lines and hints

def test_error_lines_stop_after_20_and_the_report_counts_all(runner, tmp_path):
    """Defect 10: every bad record printed its own error line (60 lines for 60 bad records);
    now 20 lines plus one 'more records failed' line, and the report still counts all 60."""
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"".join(b"{bad json %d\n" % i for i in range(60)))
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["toolcall", str(src), "--report", str(report)])
    assert res.exit_code == 1
    assert res.stdout_bytes == src.read_bytes()  # bad records are written unchanged
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 21
    assert all("bad.jsonl:" in line for line in errors[:20])
    assert "more records failed" in errors[20]
    doc = report_of(report)
    assert doc["totals"]["failed"] == 60 and doc["totals"]["statuses"] == {"INVALID_INPUT": 60}
    assert len(doc["items"]) == 60


def test_a_pretty_printed_document_saved_as_jsonl_gets_a_hint(runner, tmp_path):
    """Defect 10: a pretty-printed JSON document named .jsonl gave one bare 'broken JSON'
    error per line; now the error says it looks like one JSON document."""
    src = tmp_path / "pretty.jsonl"
    src.write_text(json.dumps(tool_conv(2, 10), indent=2) + "\n")
    res = runner.invoke(cli, ["toolcall", str(src)])
    assert res.exit_code == 1
    first = [line for line in res.stderr.splitlines() if line.startswith("error:")][0]
    assert first.startswith("error: ") and "pretty.jsonl:1" in first
    assert "looks like one JSON document" in first


def test_a_claude_code_session_line_gets_a_hint_naming_claude_code(runner, tmp_path):
    """Defect 10: a raw Claude Code session log line was only 'no messages key'; now the
    error names the format it looks like."""
    line = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/u/project",
            "sessionId": "d6e0bada-1959-4eec-a9d2-0bfade768d8f", "version": "2.1.38", "gitBranch": "master",
            "type": "user", "message": {"role": "user", "content": "start the server in the background"},
            "uuid": "5440873c-2d59-4c8c-88ec-c0a8c38a027d", "timestamp": "2026-02-10T22:57:54.684Z"}
    src = tmp_path / "session.jsonl"
    src.write_bytes(orjson.dumps(line) + b"\n")
    res = runner.invoke(cli, ["toolcall", str(src)])
    assert res.exit_code == 1
    errors = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "session.jsonl:1" in errors[0] and "Claude Code" in errors[0]


def test_report_totals_count_every_warning(runner, tmp_path):
    """Defect 10: the report's totals.warnings counted at most 20 warnings per conversation;
    a conversation reusing one tool-call ID 31 times has 30 warnings."""
    src = tmp_path / "reused.json"
    src.write_bytes(orjson.dumps(tool_conv(31, 400, ids=["same"] * 31)))
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["toolcall", str(src), "--report", str(report)])
    assert res.exit_code == 0, res.stderr
    doc = report_of(report)
    assert doc["items"][0]["warning_count"] == 30
    assert doc["totals"]["warnings"] == 30
    assert "30 warnings" in res.stderr


# ---------------------------------------------------------------- option problems before any work

def test_check_and_dry_run_together_is_a_usage_error(three):
    """Defect 10: compact --check --dry-run ran (exit 0) with one of the two silently ignored."""
    line = one_usage_error(xcompact("compact", "--check", "--dry-run", str(three)))
    assert "--check" in line and "--dry-run" in line


def test_a_summary_input_budget_too_small_is_a_usage_error_before_any_work(three):
    """Defect 10: --summary-input-tokens too small for the prompt failed every record as
    INVALID_INPUT (exit 1); now it is one usage error (exit 2) before any work."""
    proc = xcompact("compact", "--backend", "openai", "--base-url", OFFLINE_URL, "--summary-input-tokens", "1000",
                    "--token-threshold", "10", str(three))
    line = one_usage_error(proc)
    assert "--summary-input-tokens 1000" in line
    assert b"three.jsonl" not in proc.stderr  # no per-record error


def test_a_binary_config_file_is_one_usage_error(three, tmp_path):
    """Defect 10: a --config file that is not text ended in a UnicodeDecodeError traceback."""
    cfg = tmp_path / "bin.toml"
    cfg.write_bytes(bytes(range(256)))
    line = one_usage_error(xcompact("toolcall", "--config", str(cfg), str(three)))
    assert "bin.toml" in line and "UTF-8" in line


def test_a_prompt_file_that_is_not_utf8_is_one_usage_error(long_jsonl, tmp_path):
    """Defect 10: a non-UTF-8 --prompt-file ended in a UnicodeDecodeError traceback."""
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(b"Summarise \xff\xfe this")
    line = one_usage_error(xcompact("summarize", "--backend", "openai", "--base-url", OFFLINE_URL,
                                    "--prompt-file", str(prompt), str(long_jsonl)))
    assert "--prompt-file" in line and "UTF-8" in line


def test_a_full_disk_under_the_report_names_the_report(three, tmp_path):
    """Defect 10: --report on a full disk (/dev/full) was replaced by a regular file or blamed
    the input; now exit 1 and the error names the report. The test uses its own node of
    /dev/full's device (1, 7), so a failing run cannot replace the machine's."""
    full = tmp_path / "full"
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except OSError as exc:
        pytest.skip(f"cannot create a device node here: {exc}")
    out = tmp_path / "o.jsonl"
    proc = xcompact("toolcall", str(three), "-o", str(out), "--report", str(full))
    assert stat.S_ISCHR(os.lstat(full).st_mode)
    assert proc.returncode == 1
    assert proc.stdout == b""
    errors = [line for line in proc.stderr.decode().splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr.decode()
    assert "report" in errors[0] and str(full) in errors[0] and "three.jsonl" not in errors[0]


# ---------------------------------------------------------------- restore and extract say what happened

def test_restore_of_an_originals_drop_output_does_not_claim_restored(runner, three, tmp_path):
    """Defect 10: restore on an --originals drop output reported a bare RESTORED although
    every placeholder stayed; now NOTHING_TO_RESTORE or a warning that placeholders stay."""
    dropped = tmp_path / "drop.jsonl"
    assert runner.invoke(cli, ["toolcall", "-q", "--keep", "0", "--originals", "drop", str(three),
                               "-o", str(dropped)]).exit_code == 0
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["restore", str(dropped), "--report", str(report)])
    assert res.exit_code == 0, res.stderr
    for item in report_of(report)["items"]:
        placeholder_warning = any("placeholder" in w for w in item.get("warnings") or [])
        assert item["status"] == "NOTHING_TO_RESTORE" or placeholder_warning, item
        assert item["status"] != "RESTORED" or placeholder_warning


def test_extract_with_a_line_past_the_end_says_there_is_no_such_line(runner, three, tmp_path):
    """Defect 10: extract ID FILE --line 99 on a 3-line file said the ID was not found;
    now it says there is no line 99."""
    compacted = tmp_path / "c.jsonl"
    assert runner.invoke(cli, ["toolcall", "-q", "--keep", "0", str(three), "-o", str(compacted)]).exit_code == 0
    assert runner.invoke(cli, ["extract", "call_0", str(compacted), "--line", "3"]).exit_code == 0
    res = runner.invoke(cli, ["extract", "call_0", str(compacted), "--line", "99"])
    assert res.exit_code == 1
    assert res.stdout == ""
    assert "no line 99" in res.stderr


# ---------------------------------------------------------------- backend selection

def test_base_url_alone_selects_the_openai_backend(runner, long_jsonl, tmp_path):
    """Defect 10: --base-url without OPENAI_* in the environment silently used the offline
    extractive backend; now it selects openai (which cannot connect here: SUMMARIZE_FAILED)."""
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["summarize", "--base-url", OFFLINE_URL, "--retries", "0", "--no-cache",
                              "--keep-recent", "4", str(long_jsonl), "--report", str(report)])
    assert res.exit_code == 1
    doc = report_of(report)
    assert doc["parameters"]["backend"] == "openai"
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZE_FAILED"]
    assert res.stdout_bytes == long_jsonl.read_bytes()


def test_base_url_with_the_extractive_backend_is_a_usage_error(long_jsonl):
    """Defect 10: --backend extractive --base-url X ignored the URL silently (exit 0)."""
    line = one_usage_error(xcompact("summarize", "--backend", "extractive", "--base-url", OFFLINE_URL,
                                    str(long_jsonl)))
    assert "--base-url" in line


# ---------------------------------------------------------------- 11. library

def test_summarize_dump_builds_the_openai_backend_from_its_name(monkeypatch):
    """Defect 11: compactor_cli.summarize_dump(dump, backend="openai") raised AttributeError
    ('str' object has no attribute 'name'); now it builds the backend, which cannot connect
    here, so the status is SUMMARIZE_FAILED and the dump comes back unchanged."""
    import compactor_cli

    real_sleep = asyncio.sleep

    async def no_wait(delay, *args, **kw):  # the default retries back off 1 + 2 + 4 + 8 s
        return await real_sleep(0, *args, **kw)

    monkeypatch.setattr(asyncio, "sleep", no_wait)
    monkeypatch.setenv("OPENAI_BASE_URL", OFFLINE_URL)
    dump = long_conv(6, 300)
    before = json.dumps(dump)
    new_dump, status, details = compactor_cli.summarize_dump(dump, backend="openai", keep_recent=4)
    assert status == "SUMMARIZE_FAILED"
    assert details["backend"] == "openai" and details.get("error")
    assert new_dump == dump and json.dumps(dump) == before


def test_warnings_summary_and_none_keep_errors_and_the_count_but_no_warning_lines(tmp_path):
    """--warnings summary|none: a CI log without warning lines; errors, offenders and the summary's
    count stay (all, the default, prints them as before)."""
    import subprocess
    import sys

    src = FIXTURES / "taubench_airline_5.jsonl"  # two records hold repeated tool-call IDs: warnings
    bad = tmp_path / "mixed.jsonl"
    bad.write_bytes(src.read_bytes() + b'{"messages": 3}\n')
    seen = {}
    for mode in ("all", "summary", "none"):
        res = subprocess.run([sys.executable, "-m", "compactor_cli", "compact", "--check", "--token-threshold", "4000",
                              str(bad), "--warnings", mode], capture_output=True, text=True)
        assert res.returncode == 1 and res.stdout == ""
        lines = res.stderr.splitlines()
        seen[mode] = lines
        assert any(ln.startswith(f"error: {bad}:6: ") for ln in lines), lines  # the bad record, always
        assert sum(ln.startswith("over threshold: ") for ln in lines) >= 1  # the gate's offenders, always
        assert "4 warnings" in lines[-1] and "1 failed" in lines[-1]  # the summary still counts them
    assert sum(ln.startswith("warning: ") for ln in seen["all"]) == 2
    assert not any(ln.startswith("warning: ") for ln in seen["summary"] + seen["none"])

