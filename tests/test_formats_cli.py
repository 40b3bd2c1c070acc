"""The formats through the command line, once it is wired (``--from``, ``xcompact convert``,
the report's ``format``): skipped until compactor_cli.cli registers ``convert``."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from compactor_cli.cli import cli

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "formats"
pytestmark = pytest.mark.skipif("convert" not in cli.commands, reason="the formats are not wired into the CLI yet")

ANTHROPIC = {
    "model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a careful coding agent.",
    "messages": [
        {"role": "user", "content": "Why does the build fail?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Read the log.", "signature": "EqQBsig"},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "build.log"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "error: " + "x w" * 1500}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_02", "name": "grep",
                                           "input": {"pattern": "undefined"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02",
                                      "content": [{"type": "text", "text": "util.c:12: " + "y" * 900}]}]},
        {"role": "assistant", "content": "A symbol is undefined in util.c: I will declare it."},
        {"role": "user", "content": "Go ahead, and run the tests."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_03", "name": "bash", "input": {"cmd": "make"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_03", "content": "ok " * 300}]},
        {"role": "assistant", "content": "Fixed: util.c declares parse_date and the build passes."}]}
RESPONSES = {
    "model": "gpt-5", "instructions": "You are a careful coding agent.",
    "input": [
        {"role": "user", "content": "Why does the build fail?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Read the log."}],
         "encrypted_content": "gAAAA"},
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{\"path\":\"build.log\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "error: " + "x w" * 1500},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "util.c is wrong."}]},
        {"role": "user", "content": "Fix it and run the tests."},
        {"type": "function_call", "call_id": "call_2", "name": "bash", "arguments": "{\"cmd\":\"make\"}"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "ok " * 300}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]}]}


def run(runner, *args):
    res = runner.invoke(cli, [str(a) for a in args])
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def mixed(tmp_path) -> Path:
    """One JSONL file holding a record of each request format (and a bare list of each)."""
    legacy = {"messages": [{"role": "user", "content": "weather?"},
                           {"role": "assistant", "content": None, "function_call": {"name": "w", "arguments": "{}"}},
                           {"role": "function", "name": "w", "content": "sunny " * 100},
                           {"role": "assistant", "content": "Sunny."}]}
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in (
        ANTHROPIC, RESPONSES, ANTHROPIC["messages"], RESPONSES["input"], legacy)))
    return path


def test_every_command_reads_every_request_format_and_restores_exactly(runner, tmp_path, mixed):
    originals = [orjson.loads(x) for x in mixed.read_bytes().splitlines()]
    code, _, err = run(runner, "toolcall", mixed, "--keep", "0", "-o", tmp_path / "t1.jsonl",
                       "--report", tmp_path / "r1.json", "-q")
    assert code == 0, err
    items = json.loads((tmp_path / "r1.json").read_text())["items"]
    assert [i["format"] for i in items] == ["anthropic", "responses", "anthropic", "responses", "openai"]
    assert all(i["status"] == "RECLAIMED" for i in items)
    t1 = [orjson.loads(x) for x in (tmp_path / "t1.jsonl").read_bytes().splitlines()]
    assert t1[0]["messages"][2]["content"][0]["content"].startswith("[Compacted, ID: toolu_01.")
    assert t1[1]["input"][3]["output"].startswith("[Compacted, ID: call_1.")
    assert t1[4]["messages"][2]["role"] == "function"  # the legacy shape is kept
    code, _, err = run(runner, "restore", tmp_path / "t1.jsonl", "-o", tmp_path / "back1.jsonl", "-q")
    assert [orjson.loads(x) for x in (tmp_path / "back1.jsonl").read_bytes().splitlines()] == originals
    code, _, err = run(runner, "summarize", mixed, "--keep-recent", "2", "--backend", "extractive",
                       "-o", tmp_path / "t2.jsonl", "--report", tmp_path / "r2.json", "-q")
    assert code == 0, err
    t2 = [orjson.loads(x) for x in (tmp_path / "t2.jsonl").read_bytes().splitlines()]
    statuses = [i["status"] for i in json.loads((tmp_path / "r2.json").read_text())["items"]]
    assert statuses[:2] == ["SUMMARIZED", "SUMMARIZED"]
    assert "summary round 1" in t2[0]["system"] and t2[0]["messages"][0]["role"] == "user"
    assert "summary round 1" in t2[1]["instructions"]
    code, _, err = run(runner, "toolcall", tmp_path / "t2.jsonl", "--keep", "0", "-o", tmp_path / "t3.jsonl", "-q")
    assert code == 0, err
    code, _, err = run(runner, "validate", tmp_path / "t3.jsonl")
    assert code == 0, err
    code, out, err = run(runner, "extract", "toolu_03", tmp_path / "t3.jsonl", "--line", "1")
    assert code == 0 and out == "ok " * 300  # exactly as stored: no newline added
    code, _, err = run(runner, "restore", tmp_path / "t3.jsonl", "-o", tmp_path / "back.jsonl", "-q")
    assert code == 0, err
    assert [orjson.loads(x) for x in (tmp_path / "back.jsonl").read_bytes().splitlines()] == originals


def test_logs_are_one_record_per_file_and_written_as_openai(runner, tmp_path):
    out = tmp_path / "out"
    code, _, err = run(runner, "toolcall", FIX / "claude_code_tool_heavy.jsonl", FIX / "codex_rollout.jsonl",
                       FIX / "swe_agent_text_actions.traj", FIX / "sharegpt.jsonl", "--keep", "0", "-o", out,
                       "--report", tmp_path / "r.json", "-q")
    assert code == 0, err
    items = json.loads((tmp_path / "r.json").read_text())["items"]
    assert [(i["format"], i["line"]) for i in items] == [
        ("claude-code", None), ("codex", None), ("swe-agent", None), ("sharegpt", 1), ("sharegpt", 2), ("sharegpt", 3)]
    assert items[0]["conversion_notes"] == ["1 thinking signatures dropped"]
    cc = orjson.loads((out / "claude_code_tool_heavy.jsonl").read_bytes())
    assert cc["source"]["format"] == "claude-code" and cc["compacted_tool_results"]
    share = (out / "sharegpt.jsonl").read_bytes().splitlines()
    assert all(orjson.loads(x)["source"]["format"] == "sharegpt" for x in share)  # written converted, changed or not


def test_file_level_logs_with_workers(runner, tmp_path, monkeypatch):
    monkeypatch.setattr("compactor_cli.engine.local.PARALLEL_MIN_BYTES", 0)
    code, _, err = run(runner, "toolcall", FIX / "claude_code_tool_heavy.jsonl", "--keep", "0", "-j", "2",
                       "-o", tmp_path / "a.jsonl", "-q")
    assert code == 0, err
    code, _, err = run(runner, "toolcall", FIX / "claude_code_tool_heavy.jsonl", "--keep", "0", "-j", "1",
                       "-o", tmp_path / "b.jsonl", "-q")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert len((tmp_path / "a.jsonl").read_bytes().splitlines()) == 1


def test_from_names_the_format(runner, tmp_path):
    doc = tmp_path / "a.json"
    doc.write_bytes(orjson.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}],
                                  "system": "s"}))
    code, _, err = run(runner, "validate", doc, "--from", "openai", "--report", tmp_path / "r.json")
    assert code == 0
    assert json.loads((tmp_path / "r.json").read_text())["items"][0]["format"] == "openai"
    assert json.loads((tmp_path / "r.json").read_text())["parameters"]["from"] == "openai"
    code, _, err = run(runner, "validate", doc, "--report", tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["items"][0]["format"] == "anthropic"
    code, _, err = run(runner, "validate", FIX / "sharegpt.jsonl", "--from", "openai")
    assert code == 1 and "use --from sharegpt or --from auto" in err


def test_unsupported_and_ambiguous_records_fail_unchanged_with_a_hint(runner, tmp_path):
    src = tmp_path / "bad.jsonl"
    lines = [b'{"history": "x", "trajectory": []}',
             b'[{"role": "tool", "tool_call_id": "a", "content": "x"}, {"role": "user", "content": '
             b'[{"type": "tool_result", "tool_use_id": "a", "content": "x"}]}]',
             b'{"messages": [{"role": "user", "content": "fine"}]}']
    src.write_bytes(b"\n".join(lines) + b"\n")
    code, out, err = run(runner, "toolcall", src)
    assert code == 1
    assert out.encode() == src.read_bytes()  # unchanged, byte for byte
    assert "read it with --from swe-agent" in err and err.count("--from swe-agent") == 1
    assert "ambiguous record" in err and "--from openai or --from anthropic" in err


def test_convert_is_a_command(runner, tmp_path):
    code, out, err = run(runner, "convert", FIX / "claude_code_tool_heavy.jsonl", "--to", "anthropic",
                         "--report", tmp_path / "r.json", "-q")
    assert code == 0, err
    req = orjson.loads(out)
    assert req["messages"][0]["role"] == "user" and req["source"]["format"] == "claude-code"
    doc = json.loads((tmp_path / "r.json").read_text())
    import jsonschema

    from compactor_cli.model.schema import load_schema

    jsonschema.validate(doc, load_schema("report"))
    assert doc["items"][0]["status"] == "CONVERTED"


@pytest.mark.parametrize("to", ["openai", "anthropic", "responses"])
def test_convert_keeps_the_model_a_log_names_as_compaction_writes_it(runner, tmp_path, to):
    """docs/formats.md: a log read as a conversation keeps the model its reader found as
    ``model``, in what ``convert`` writes as in what the compacting commands write."""
    log = FIX.parent / "real" / "codex_rollout_apply_patch.jsonl"
    code, out, err = run(runner, "convert", log, "--to", to, "-q")
    assert code == 0, err
    code, _, err = run(runner, "toolcall", log, "--keep", "100", "-q", "-o", tmp_path / "t.jsonl")
    assert code == 0, err
    assert orjson.loads(out)["model"] == orjson.loads((tmp_path / "t.jsonl").read_bytes())["model"] == "gpt-5.1-codex"


def test_directories_hold_traj_files(runner, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "run.traj").write_bytes((FIX / "swe_agent_text_actions.traj").read_bytes())
    code, _, err = run(runner, "validate", d, "--report", tmp_path / "r.json")
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["items"][0]["format"] == "swe-agent"
