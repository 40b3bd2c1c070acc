"""The command line: forms kept, where outputs go, stdout/stderr apart, exit codes, reports."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import orjson
import pytest
from helpers import FIXTURES, ROOT, read_jsonl, tool_conv

from compactor_cli import ORIGINALS_KEY, placeholder_for
from compactor_cli.cli import cli
from compactor_cli.model.schema import load_schema


def write(path: Path, obj, form: str = "json") -> Path:
    if form == "jsonl":
        path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in obj))
    else:
        path.write_bytes(orjson.dumps(obj))
    return path


def test_one_input_goes_to_stdout_and_the_summary_to_stderr(runner, tmp_path):
    src = write(tmp_path / "c.json", tool_conv())
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "1"])
    assert res.exit_code == 0
    out = orjson.loads(res.stdout)
    assert [m["content"] for m in out["messages"] if m["role"] == "tool"][:4] == [
        placeholder_for(f"call_{i}") for i in range(4)]
    assert "1 conversation" in res.stderr and "4 tool results reclaimed" in res.stderr
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "4"])
    assert "; 1 tool result reclaimed," in res.stderr  # one, not "1 tool results"
    # stdout is the data and nothing else: one JSON document, no summary line after it
    assert res.stdout.endswith("}\n") and res.stdout.count("\n}\n") == 1


def test_quiet_prints_no_summary(runner, tmp_path):
    src = write(tmp_path / "c.json", tool_conv())
    res = runner.invoke(cli, ["toolcall", "-q", str(src)])
    assert res.exit_code == 0 and res.stderr == ""


@pytest.mark.parametrize("fixture", ["taubench_airline_5.jsonl", "claude_code_session.json", "airline_list.json"])
def test_output_keeps_the_input_form(runner, tmp_path, fixture):
    res = runner.invoke(cli, ["toolcall", "-q", "--keep", "100", str(FIXTURES / fixture)])
    assert res.exit_code == 0
    raw = (FIXTURES / fixture).read_bytes()
    if fixture.endswith(".jsonl"):
        assert [orjson.loads(x) for x in res.stdout_bytes.splitlines()] == read_jsonl(FIXTURES / fixture)
    else:
        assert orjson.loads(res.stdout_bytes) == orjson.loads(raw)  # nothing to do: same value, same shape


def test_list_input_stays_a_list_when_nothing_is_kept_and_restores_to_a_list(runner, tmp_path):
    src = FIXTURES / "airline_list.json"
    res = runner.invoke(cli, ["toolcall", "-q", "--keep", "0", "--originals", "drop", str(src)])
    assert isinstance(orjson.loads(res.stdout_bytes), list)
    out = tmp_path / "o.json"
    runner.invoke(cli, ["toolcall", "-q", "--keep", "0", str(src), "-o", str(out)])
    compacted = orjson.loads(out.read_bytes())
    assert isinstance(compacted, dict) and compacted["xcompact"] == {"input_form": "list"}
    res = runner.invoke(cli, ["restore", "-q", str(out)])
    assert orjson.loads(res.stdout_bytes) == orjson.loads(src.read_bytes())


def test_output_is_deterministic_utf8_without_escapes(runner, tmp_path):
    conv = tool_conv()
    conv["messages"][1]["content"] = "Grüße, 日本語 ✓"
    src = write(tmp_path / "c.jsonl", [conv, conv], "jsonl")
    a = runner.invoke(cli, ["toolcall", "-q", str(src)]).stdout_bytes
    b = runner.invoke(cli, ["toolcall", "-q", str(src)]).stdout_bytes
    assert a == b
    assert "Grüße, 日本語 ✓".encode() in a and b"\\u" not in a
    assert len(a.splitlines()) == 2


def test_unknown_keys_pass_through_in_order(runner, tmp_path):
    conv = {"zeta": 1, "messages": tool_conv()["messages"], "alpha": {"b": 2, "a": 1}, "tokens_used": 9}
    conv["messages"][2]["x_vendor"] = {"keep": True}
    src = write(tmp_path / "c.json", conv)
    out = orjson.loads(runner.invoke(cli, ["toolcall", "-q", "--keep", "0", str(src)]).stdout_bytes)
    assert list(out)[:4] == ["zeta", "messages", "alpha", "tokens_used"]
    assert list(out["alpha"]) == ["b", "a"] and out["messages"][2]["x_vendor"] == {"keep": True}


def test_input_is_never_touched_without_in_place(runner, tmp_path):
    src = write(tmp_path / "c.json", tool_conv())
    before = src.read_bytes()
    runner.invoke(cli, ["toolcall", "-q", str(src), "-o", str(tmp_path / "out.json")])
    assert src.read_bytes() == before
    res = runner.invoke(cli, ["toolcall", str(src), "-o", str(src)])
    assert res.exit_code == 2 and "refusing to overwrite input" in res.stderr
    assert src.read_bytes() == before


def test_in_place_replaces_atomically_and_keeps_the_mode(runner, tmp_path):
    src = write(tmp_path / "c.json", tool_conv())
    os.chmod(src, 0o640)
    res = runner.invoke(cli, ["toolcall", "-q", "--keep", "0", "--in-place", str(src)])
    assert res.exit_code == 0 and res.stdout == ""
    assert ORIGINALS_KEY in orjson.loads(src.read_bytes())
    assert stat.S_IMODE(os.stat(src).st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no partial file left


def test_several_inputs_need_a_directory(runner, tmp_path):
    a = write(tmp_path / "a.json", tool_conv())
    b = write(tmp_path / "b.json", tool_conv())
    res = runner.invoke(cli, ["toolcall", str(a), str(b)])
    assert res.exit_code == 2 and "-o DIR" in res.stderr and res.stdout == ""


def test_directory_input_keeps_relative_names(runner, tmp_path):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    write(src / "a.json", tool_conv())
    write(src / "sub" / "b.jsonl", [tool_conv()], "jsonl")
    (src / "notes.txt").write_text("ignored")
    res = runner.invoke(cli, ["toolcall", "-q", str(src), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file()) == [
        "a.json", "sub/b.jsonl"]


def test_stdin_to_stdout(runner):
    data = orjson.dumps(tool_conv()) + b"\n" + orjson.dumps(tool_conv()) + b"\n"
    res = runner.invoke(cli, ["toolcall", "-q", "--keep", "0", "-"], input=data)
    assert res.exit_code == 0
    assert len(res.stdout_bytes.splitlines()) == 2


def test_bad_records_get_one_line_each_and_the_batch_goes_on(runner, tmp_path):
    out = tmp_path / "out"
    res = runner.invoke(cli, ["toolcall", str(FIXTURES / "bad"), str(FIXTURES / "swe_agent_3.jsonl"), "-o", str(out)])
    assert res.exit_code == 1
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {FIXTURES}/bad/broken.json: broken JSON: unexpected end of data at line 2 column 1",
        f"error: {FIXTURES}/bad/empty.json: empty file: expected a conversation (JSON) or conversations (JSONL)",
        f"error: {FIXTURES}/bad/latin1.jsonl:1: invalid UTF-8 at byte 42: re-encode the file as UTF-8",
        f"error: {FIXTURES}/bad/mixed.jsonl:2: at /messages/0: a message must be an object, got integer (+1 more)",
        f"error: {FIXTURES}/bad/mixed.jsonl:3: at /messages/0/role: unknown role 'robot'; expected one of assistant, developer, system, tool, user",
        f"error: {FIXTURES}/bad/mixed.jsonl:4: broken JSON: invalid literal, expected 'null' at line 1 column 1",
    ]
    assert "Traceback" not in res.stderr
    # the good file was compacted; the failed records were copied unchanged, lines aligned
    assert len(read_jsonl(out / "swe_agent_3.jsonl")) == 3
    mixed = (out / "mixed.jsonl").read_bytes().splitlines()
    assert mixed == (FIXTURES / "bad" / "mixed.jsonl").read_bytes().splitlines()


def test_missing_file_does_not_stop_the_batch(runner, tmp_path):
    good = write(tmp_path / "g.json", tool_conv())
    res = runner.invoke(cli, ["toolcall", str(tmp_path / "missing.json"), str(good), "-o", str(tmp_path / "o")])
    assert res.exit_code == 1 and "missing.json: no such file" in res.stderr
    assert (tmp_path / "o" / "g.json").exists()


def test_strict_turns_pairing_warnings_into_failures(runner, tmp_path):
    conv = tool_conv(ids=["a", "a", "b", "c", "d"])
    src = write(tmp_path / "c.json", conv)
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "0"])
    assert res.exit_code == 0 and "warning:" in res.stderr and "is used again" in res.stderr
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "0", "--strict"])
    assert res.exit_code == 1 and "run without --strict" in res.stderr
    assert orjson.loads(res.stdout_bytes) == conv  # failed: written unchanged


def test_report_is_valid_against_its_schema_and_recomputable(runner, tmp_path):
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["toolcall", "-q", str(FIXTURES / "taubench_airline_5.jsonl"), str(FIXTURES / "bad" / "mixed.jsonl"),
                              "-o", str(tmp_path / "o"), "--keep", "3", "--report", str(report)])
    assert res.exit_code == 1
    doc = orjson.loads(report.read_bytes())
    jsonschema.validate(doc, load_schema("report"))
    assert doc["command"] == "toolcall" and doc["parameters"]["keep"] == 3 and doc["exit_code"] == 1
    items = doc["items"]
    assert len(items) == 10 and doc["totals"]["conversations"] == 10
    assert [i["line"] for i in items[:5]] == [1, 2, 3, 4, 5]
    ok = [i for i in items if i["status"] != "INVALID_INPUT"]
    for i in ok:
        assert i["reclaimed_fraction"] == pytest.approx((i["length_before"] - i["length_after"]) / i["length_before"])
        assert i["tokens_after"] <= i["tokens_before"]
    assert doc["totals"]["reclaimed_count"] == sum(i["reclaimed_count"] for i in ok)
    assert doc["totals"]["failed"] == 3
    assert all("error" in i for i in items if i["status"] == "INVALID_INPUT")


def test_no_tokens_reports_null_tokens(runner, tmp_path):
    report = tmp_path / "r.json"
    runner.invoke(cli, ["toolcall", "-q", "--no-tokens", str(FIXTURES / "airline_list.json"), "--report", str(report)])
    doc = orjson.loads(report.read_bytes())
    assert doc["items"][0]["tokens_before"] is None and doc["totals"]["tokens_before"] is None


def test_o200k_is_counted_exactly_offline_and_each_item_says_so(runner, tmp_path):
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["toolcall", "--encoding", "o200k_base", str(FIXTURES / "taubench_airline_5.jsonl"),
                              "--report", str(report)])
    assert res.exit_code == 0
    assert "approximate" not in res.stderr
    doc = orjson.loads(report.read_bytes())
    assert not doc["totals"].get("notes")
    assert {(i["encoding"], i["encoding_source"]) for i in doc["items"]} == {("o200k_base", "--encoding")}


def test_extract_prints_the_original(runner, tmp_path):
    conv = tool_conv(ids=["dup", "a", "dup", "b", "c"])
    src = tmp_path / "c.json"
    runner.invoke(cli, ["toolcall", "-q", "--keep", "1", str(write(tmp_path / "in.json", conv)), "-o", str(src)])
    res = runner.invoke(cli, ["extract", "a", str(src)])
    assert res.exit_code == 0 and res.stdout == conv["messages"][6]["content"]  # exactly: no newline added
    res = runner.invoke(cli, ["extract", "dup", str(src)])
    assert res.stdout.startswith("result 0") and "share ID 'dup'" in res.stderr
    assert runner.invoke(cli, ["extract", "dup", str(src), "--occurrence", "2"]).stdout.startswith("result 2")
    res = runner.invoke(cli, ["extract", "zzz", str(src)])
    assert res.exit_code == 1 and res.stdout == "" and "no compacted tool result with ID 'zzz'" in res.stderr
    assert "could be read" not in res.stderr
    # a record that cannot be read is said first; the search's result then says it covered the rest only
    res = runner.invoke(cli, ["extract", "a", str(FIXTURES / "bad" / "broken.json")])
    lines = res.stderr.splitlines()
    assert res.exit_code == 1 and len(lines) == 2 and "broken JSON" in lines[0]
    assert lines[1].endswith("no compacted tool result with ID 'a' in the records that could be read")


def test_validate_exit_codes(runner, tmp_path):
    assert runner.invoke(cli, ["validate", str(FIXTURES / "claude_code_session.json")]).exit_code == 0
    res = runner.invoke(cli, ["validate", str(FIXTURES / "bad" / "mixed.jsonl")])
    assert res.exit_code == 1 and res.stdout == "" and "unknown role 'robot'" in res.stderr
    res = runner.invoke(cli, ["validate", "--strict", str(FIXTURES / "taubench_airline_5.jsonl")])
    assert res.exit_code == 1 and "is used again" in res.stderr


def test_usage_errors_exit_2(runner, tmp_path):
    assert runner.invoke(cli, ["toolcall"]).exit_code == 2
    assert runner.invoke(cli, ["toolcall", "--keep", "-1", "x.json"]).exit_code == 2
    res = runner.invoke(cli, ["toolcall", "--in-place", "-o", "x", str(FIXTURES / "airline_list.json")])
    assert res.exit_code == 2 and "cannot be used together" in res.stderr


# ---- help and documentation

def _commands():
    return sorted(cli.commands)


@pytest.mark.parametrize("name", _commands())
def test_every_command_has_help_with_an_example_and_is_documented(runner, name):
    res = runner.invoke(cli, [name, "--help"])
    assert res.exit_code == 0
    assert "Example:" in res.stdout
    example = re.search(r"Example:\s*\n\s*(xcompact .+)", res.stdout).group(1)
    assert example.startswith(f"xcompact {name} ")
    assert cli.commands[name].get_short_help_str(80)
    # the reference generated from --help (scripts/cli_reference.py), and the README's table
    assert f"`xcompact {name}" in (ROOT / "README.md").read_text()
    reference = (ROOT / "docs" / "cli.md").read_text()
    section = reference.split(f"\n## xcompact {name}\n", 1)[1].split("\n## ", 1)[0]
    for param in cli.commands[name].params:
        if getattr(param, "hidden", False):
            continue
        for o in param.opts + param.secondary_opts:
            if o.startswith("--"):
                assert o in section, f"{o} of {name} is not in docs/cli.md: run python scripts/cli_reference.py"


def test_every_help_example_runs(runner, tmp_path, monkeypatch):
    """The examples chain: toolcall writes out.jsonl, which extract and restore read."""
    monkeypatch.chdir(tmp_path)
    os.symlink(FIXTURES, tmp_path / "fixtures")
    for name in ["toolcall", "extract", "restore", "summarize", "compact", "validate"]:
        res = runner.invoke(cli, [name, "--help"])
        line = re.search(r"Example:\s*\n\s*xcompact (.+)", res.stdout).group(1)
        argv = line.split("   (")[0].split()
        res = runner.invoke(cli, argv)
        assert res.exit_code == 0, (name, res.stderr)
    restored = (tmp_path / "restored.jsonl").read_bytes().splitlines()
    original = (FIXTURES / "taubench_airline_5.jsonl").read_bytes().splitlines()
    assert [orjson.loads(x) for x in restored] == [orjson.loads(x) for x in original]
    # the conversation toolcall did not change (line 2) went through both commands byte for byte
    assert restored[1] == original[1]


# ---- the installed command, in a real subprocess

def test_installed_command_and_python_m(tmp_path):
    exe = shutil.which("xcompact", path=os.path.dirname(sys.executable)) or shutil.which("xcompact")
    assert exe, "xcompact is not installed"
    proc = subprocess.run([exe, "toolcall", "--keep", "2", str(FIXTURES / "taubench_airline_5.jsonl")],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 5 and b"5 conversations" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "compactor_cli", "--version"], capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith(b"xcompact, version ")
    proc = subprocess.run([exe, "toolcall", str(FIXTURES / "bad" / "broken.json")], capture_output=True, timeout=60)
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr


def test_toolcall_does_not_import_openai(tmp_path):
    """Start-up is a fixed cost of every run: tier 1 never loads the model client, the schema
    validator, the model backend, the summariser's configuration or asyncio (the backend's import
    alone was a fifth of it), nor the standard modules only rare records need (secrets' hmac and
    random, decimal, base64), nor those a one-process run never needs (tempfile and shutil: -j N's
    parts; hashlib's OpenSSL)."""
    modules = ["openai", "jsonschema", "compactor_cli.backends.openai_backend", "compactor_cli.backends.config",
               "asyncio", "secrets", "decimal", "base64", "tempfile", "shutil", "hashlib", "_hashlib"]
    code = ("import sys; from compactor_cli.cli import main; sys.argv=['xcompact','toolcall','-q','-o',"
            f"{str(tmp_path / 'o.jsonl')!r},{str(FIXTURES / 'taubench_airline_5.jsonl')!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print([m for m in {modules!r} if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.stdout.strip() == b"[]"


def test_every_status_is_documented():
    from compactor_cli.status import Status

    report = (ROOT / "docs" / "report.md").read_text()
    assert [s.value for s in Status if f"`{s.value}`" not in report] == []


def test_summarize_takes_summary_model_and_its_old_model_spelling_warns(runner, tmp_path):
    """Issue 31: one name for the summariser's model in every command; summarize's old --model
    still works, with a warning, and the two together are a usage error."""
    src = ROOT / "fixtures" / "taubench_airline_5.jsonl"
    new = runner.invoke(cli, ["summarize", str(src), "--summary-model", "m", "--dry-run"])
    old = runner.invoke(cli, ["summarize", str(src), "--model", "m", "--dry-run"])
    assert new.exit_code == old.exit_code == 0
    assert "--model is now --summary-model" in old.stderr and "--model is now" not in new.stderr
    assert not re.search(r"^  --model\b", runner.invoke(cli, ["summarize", "--help"]).stdout, re.M)  # hidden
    both = runner.invoke(cli, ["summarize", str(src), "--model", "m", "--summary-model", "n", "--dry-run"])
    assert both.exit_code == 2 and "give --summary-model only" in both.stderr
