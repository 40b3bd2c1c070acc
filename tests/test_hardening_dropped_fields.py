"""Issue 28: log readers and ``convert`` never drop an input field silently. A field a reader
has no place for (and that is not the log's documented bookkeeping, docs/formats.md) is counted
per record (``source.dropped_fields``, a note in the report) and named on stderr once per file,
not once per record."""

from __future__ import annotations

import orjson
import pytest
from helpers import FIXTURES

from compactor_cli.cli import cli

FORMATS = FIXTURES / "formats"


def _lines(path) -> list[dict]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def _run(runner, *args):
    res = runner.invoke(cli, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def _sharegpt(i: int) -> dict:
    return {"conversations": [{"from": "human", "value": f"question {i}", "weight": 0},
                              {"from": "gpt", "value": f"answer {i}", "weight": 1}]}


def test_sharegpt_turn_fields_are_counted_per_record_and_named_once_per_file(runner, tmp_path):
    src = tmp_path / "data.jsonl"
    src.write_bytes(b"".join(orjson.dumps(_sharegpt(i)) + b"\n" for i in range(3)))
    out, rep = tmp_path / "out.jsonl", tmp_path / "rep.json"
    res = _run(runner, "convert", "--to", "openai", src, "-o", out, "--report", rep)
    assert res.exit_code == 0, res.stderr
    named = [ln for ln in res.stderr.splitlines() if "conversations[].weight" in ln]
    assert len(named) == 1, res.stderr  # one line for the file, not one per record
    assert "data.jsonl" in named[0]
    items = orjson.loads(rep.read_bytes())["items"]
    assert all(any("2 input fields not carried over: conversations[].weight (2)" in n for n in i["notes"])
               for i in items), items
    assert [d["source"]["dropped_fields"] for d in _lines(out)] == [{"conversations[].weight": 2}] * 3
    strict = _run(runner, "convert", "--strict", "--to", "openai", src, "-o", tmp_path / "strict.jsonl")
    assert strict.exit_code == 1  # --strict: something was not carried over


def test_a_new_field_later_in_the_file_is_named_too(runner, tmp_path):
    recs = [_sharegpt(0), _sharegpt(1)]
    recs[1]["conversations"][0]["loss"] = True
    src = tmp_path / "data.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    res = _run(runner, "convert", "--to", "anthropic", src, "-o", tmp_path / "out.jsonl")
    assert res.exit_code == 0, res.stderr
    assert sum("conversations[]." in ln for ln in res.stderr.splitlines()) == 2, res.stderr
    assert "conversations[].loss" in res.stderr


def test_swe_agent_entry_and_call_fields_are_noted(runner, tmp_path):
    traj = orjson.loads((FORMATS / "swe_agent_function_calling.traj").read_bytes())
    assistant = next(m for m in traj["history"] if m.get("tool_calls"))
    assistant["thinking_blocks"] = [{"type": "thinking", "thinking": "hidden plan", "signature": "s"}]
    assistant["tool_calls"][0]["index"] = 0
    src = tmp_path / "run.traj"
    src.write_bytes(orjson.dumps(traj))
    out, rep = tmp_path / "out.json", tmp_path / "rep.json"
    res = _run(runner, "toolcall", "--keep", "100", src, "-o", out, "--report", rep)
    assert res.exit_code == 0, res.stderr
    dropped = orjson.loads(out.read_bytes())["source"]["dropped_fields"]
    assert dropped == {"history[].thinking_blocks": 1, "history[].tool_calls[].index": 1}
    notes = orjson.loads(rep.read_bytes())["items"][0]["conversion_notes"]
    assert any("history[].thinking_blocks (1)" in n for n in notes), notes


def test_codex_output_success_flag_is_noted(runner, tmp_path):
    lines = _lines(FORMATS / "codex_rollout.jsonl")
    out_line = next(e for e in lines if e["type"] == "response_item" and e["payload"]["type"] == "function_call_output")
    out_line["payload"]["output"] = {"content": "exit 1: tests failed", "success": False}
    src = tmp_path / "rollout.jsonl"
    src.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in lines))
    res = _run(runner, "convert", "--to", "anthropic", src, "-o", tmp_path / "out.json", "--report",
               tmp_path / "rep.json")
    assert res.exit_code == 0, res.stderr
    assert "function_call_output.output.success" in res.stderr
    item = orjson.loads((tmp_path / "rep.json").read_bytes())["items"][0]
    assert any("function_call_output.output.success (1)" in n for n in item["notes"]), item


def test_claude_code_fields_without_a_place_are_noted_and_bookkeeping_is_not(runner, tmp_path):
    events = _lines(FORMATS / "claude_code_tool_heavy.jsonl")
    calls = [e for e in events if e.get("type") == "assistant"
             and any(b.get("type") == "tool_use" for b in e["message"]["content"])]
    block = next(b for b in calls[0]["message"]["content"] if b.get("type") == "tool_use")
    block["caller"] = {"type": "code_execution_20250825", "tool_id": "srvtoolu_1"}
    calls[0]["planMode"] = "on"
    src = tmp_path / "session.jsonl"
    src.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    out = tmp_path / "out.jsonl"
    res = _run(runner, "toolcall", "--keep", "100", "--claude-code-history", "full", src, "-o", out)
    assert res.exit_code == 0, res.stderr
    assert orjson.loads(out.read_bytes())["source"]["dropped_fields"] == {"assistant.planMode": 1,
                                                                         "tool_use.caller": 1}
    plain = _run(runner, "toolcall", "--keep", "100", FORMATS / "claude_code_tool_heavy.jsonl", "-o",
                 tmp_path / "plain.jsonl")
    assert "dropped_fields" not in orjson.loads((tmp_path / "plain.jsonl").read_bytes())["source"], plain.stderr


def test_mini_swe_agent_responses_extra_is_counted_and_instance_id_kept(runner, tmp_path):
    obj = {"trajectory_format": "mini-swe-agent-1.1", "instance_id": "psf__requests-5414", "info": {},
           "messages": [{"role": "user", "content": "go", "extra": {}},
                        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{\"command\":\"ls\"}",
                         "extra": {"cost": 0.1}},
                        {"role": "tool", "tool_call_id": "c1", "content": "a", "extra": {"returncode": 0}}],
           "run_by": "ci"}
    src = tmp_path / "t.traj.json"
    src.write_bytes(orjson.dumps(obj))
    out = tmp_path / "out.json"
    res = _run(runner, "toolcall", "--keep", "100", src, "-o", out)
    assert res.exit_code == 0, res.stderr
    source = orjson.loads(out.read_bytes())["source"]
    assert source["instance_id"] == "psf__requests-5414"
    assert source["dropped_fields"] == {"run_by": 1}
    assert "3 extra fields not carried" in source["notes"]


@pytest.mark.parametrize("to", ["anthropic", "responses"])
def test_convert_notes_tool_call_fields_it_cannot_write(runner, tmp_path, to):
    rec = {"messages": [{"role": "user", "content": "go"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function", "index": 0,
                             "function": {"name": "ls", "arguments": "{}", "strict": True}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "a"}]}
    src = tmp_path / "r.jsonl"
    src.write_bytes(orjson.dumps(rec) + b"\n")
    rep = tmp_path / "rep.json"
    res = _run(runner, "convert", "--to", to, src, "-o", tmp_path / "o.jsonl", "--report", rep)
    assert res.exit_code == 0, res.stderr
    notes = orjson.loads(rep.read_bytes())["items"][0]["notes"]
    assert any("'index'" in n and "tool call" in n for n in notes), notes
    assert any("'strict'" in n for n in notes), notes


def test_claude_code_to_anthropic_names_only_what_the_anthropic_reading_drops(runner, tmp_path):
    """convert --to anthropic keeps a Claude Code log's blocks as they are: a tool_use's caller
    is carried there, so only the event's extra key is named."""
    events = _lines(FORMATS / "claude_code_tool_heavy.jsonl")
    call = next(e for e in events if e.get("type") == "assistant"
                and any(b.get("type") == "tool_use" for b in e["message"]["content"]))
    next(b for b in call["message"]["content"] if b.get("type") == "tool_use")["caller"] = {"type": "code_execution"}
    call["planMode"] = "on"
    src = tmp_path / "session.jsonl"
    src.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    out = tmp_path / "out.json"
    res = _run(runner, "convert", "--to", "anthropic", "--claude-code-history", "full", src, "-o", out)
    assert res.exit_code == 0, res.stderr
    assert "assistant.planMode" in res.stderr and "tool_use.caller" not in res.stderr, res.stderr
    assert orjson.loads(out.read_bytes())["source"]["dropped_fields"] == {"assistant.planMode": 1}


@pytest.mark.parametrize("command", [["toolcall", "--keep", "0"], ["summarize"], ["compact", "--token-threshold", "50"],
                                     ["validate"]])
def test_record_commands_name_dropped_fields_once_per_file_too(runner, tmp_path, command):
    """Not only convert: every command that reads a log says on stderr which input fields it had
    no place for, once per file (and again for a field first met later), never once per record;
    -q says nothing."""
    recs = [_sharegpt(i) for i in range(4)]
    recs[2]["conversations"][0]["loss"] = True
    src = tmp_path / "data.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    out = ["-o", tmp_path / "out.jsonl"] if command[0] != "validate" else []
    res = _run(runner, *command, "--from", "sharegpt", src, *out)
    assert res.exit_code in (0, 1), res.stderr
    named = [ln for ln in res.stderr.splitlines() if "not carried over" in ln]
    assert len(named) == 2, res.stderr
    assert named[0].startswith("warning: ") and "data.jsonl:1" in named[0] and "conversations[].weight" in named[0]
    assert "data.jsonl:3" in named[1] and "conversations[].loss" in named[1]
    quiet = _run(runner, *command, "--from", "sharegpt", src, *out, "-q")
    assert "not carried over" not in quiet.stderr
