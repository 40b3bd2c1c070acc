"""--truncate-inputs CHARS (issue 30): the long arguments of older calls (a Write's file, an
Edit's strings) are cut to CHARS characters per value, so the call stays legible and valid
JSON, with the whole arguments stored; restore gives them back exactly; a native format's
calls are written cut and read back cut."""

from __future__ import annotations

import json

import orjson
from helpers import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli import reclaim_tool_results, restore_conversation
from compactor_cli.batch import process_lines
from compactor_cli.cli import cli
from compactor_cli.model.conversation import estimated_message_length
from compactor_cli.model.placeholders import is_truncated_input, truncated_arguments

FILE = "x = 1  # a line of the file being written\n" * 80


def _call(cid: str, name: str, args: dict) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _writes() -> list[dict]:
    return [{"role": "user", "content": "write the modules"},
            _call("w1", "Write", {"file_path": "/r/a.py", "content": FILE}),
            {"role": "tool", "tool_call_id": "w1", "content": "File created successfully at: /r/a.py"},
            _call("w2", "Write", {"file_path": "/r/b.py", "content": FILE}),
            {"role": "tool", "tool_call_id": "w2", "content": "File created successfully at: /r/b.py"},
            {"role": "assistant", "content": "both written"}]


def test_an_older_calls_long_values_are_cut_legibly_and_restored_exactly():
    messages = _writes()
    new, res = reclaim_tool_results(messages, keep=1, truncate_inputs=60)
    assert res.inputs_truncated == 1 and res.reclaimed_count == 0  # the short result itself stays
    args = json.loads(new["messages"][1]["tool_calls"][0]["function"]["arguments"])  # still JSON
    assert args["file_path"] == "/r/a.py"  # short values as they were
    assert args["content"].startswith(FILE[:60]) and "the arguments are stored by xcompact, ID: w1]" in args["content"]
    assert new["messages"][3] == messages[3]  # the recent call is whole
    restored, _ = restore_conversation(new)
    assert restored == {"messages": messages}
    again, res2 = reclaim_tool_results(new, keep=1, truncate_inputs=60)
    assert again == new and res2.inputs_truncated == 0


def test_truncated_arguments_cuts_only_what_saves_something():
    assert truncated_arguments('{"a": "short"}', 60, "k") is None
    cut = truncated_arguments("not json " * 20, 10, "k")
    assert cut is not None and cut.startswith("not json n") and is_truncated_input(cut, "k")
    assert truncated_arguments('{"a": "' + "z" * 70 + '"}', 60, "k") is None  # the marker costs more


@settings(deadline=None)
@given(conversations(), st.integers(0, 4), st.integers(1, 80), st.booleans(), st.booleans())
def test_every_combination_restores_exactly(dump, keep, limit, clear_inputs, keep_originals):
    before = orjson.dumps(dump)
    new, res = reclaim_tool_results(dump, keep=keep, truncate_inputs=limit, clear_tool_inputs=clear_inputs,
                                    keep_originals=keep_originals)
    assert orjson.dumps(dump) == before
    # the report's length is xun's estimate of what is written: arguments it never counted, when
    # cut, never take it below zero or the reclaimed fraction above 1 (both did)
    assert res.length_after == estimated_message_length(new["messages"]) >= 0
    assert res.reclaimed_fraction <= 1.0
    if keep_originals:
        restored, _ = restore_conversation(new)
        assert restored == dump
    _, res2 = reclaim_tool_results(new, keep=keep, truncate_inputs=limit, clear_tool_inputs=clear_inputs,
                                       keep_originals=keep_originals)
    assert res2.inputs_truncated == 0


def test_cli_batch_function_and_report_agree(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    line = orjson.dumps({"messages": _writes()}) + b"\n"
    src.write_bytes(line)
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    args = ["--keep", "1", "--truncate-inputs", "60", "--dedup-reads", "--preview", "2,2"]
    res = runner.invoke(cli, ["toolcall", str(src), *args, "-o", str(out), "--report", str(report), "-q"])
    assert res.exit_code == 0, res.stderr
    doc = orjson.loads(report.read_bytes())
    assert doc["parameters"]["truncate_inputs"] == 60 and doc["items"][0]["inputs_truncated"] == 1
    assert doc["items"][0]["status"] == "RECLAIMED"
    batch = process_lines([line], "toolcall", keep=1, truncate_inputs=60, dedup_reads=True, preview="2,2")
    assert b"".join(batch.lines) == out.read_bytes()
    back = tmp_path / "back.jsonl"
    assert runner.invoke(cli, ["restore", str(out), "-o", str(back), "-q"]).exit_code == 0
    assert back.read_bytes() == line


def test_an_anthropic_request_is_written_cut_and_restored_byte_for_byte(runner, tmp_path):
    big = {"path": "/r/a.py", "content": FILE}
    request = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [
        {"role": "user", "content": "write it twice"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "write", "input": big}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok, written"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "write", "input": big}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ok, written"}]},
        {"role": "assistant", "content": "done"}]}
    src = tmp_path / "request.json"
    src.write_text(json.dumps(request))
    out = tmp_path / "out.json"
    res = runner.invoke(cli, ["toolcall", str(src), "--from", "anthropic", "--keep", "1", "--truncate-inputs", "50",
                              "-o", str(out), "-q"])
    assert res.exit_code == 0, res.stderr
    written = orjson.loads(out.read_bytes())
    first, second = written["messages"][1]["content"][0]["input"], written["messages"][3]["content"][0]["input"]
    assert first["path"] == "/r/a.py" and is_truncated_input(first["content"]) and len(first["content"]) < 200
    assert second == big
    back = tmp_path / "back.json"
    res = runner.invoke(cli, ["restore", str(out), "-o", str(back), "-q"])
    assert res.exit_code == 0, res.stderr
    assert orjson.loads(back.read_bytes()) == request


def test_a_custom_tool_calls_input_is_cut_and_restored_exactly(tmp_path):
    """Codex's apply_patch is a custom tool call whose input is the patch: --truncate-inputs cuts
    it like a function call's arguments (a patch is most of a Codex session's tokens), and
    restore gives it back."""
    from compactor_cli import formats

    ((_, dump, _),) = list(formats.read_file(str(FIXTURES / "real" / "codex_rollout_apply_patch.jsonl")))
    (patch,) = [c["custom"]["input"] for m in dump["messages"] for c in (m.get("tool_calls") or ())
                if c.get("type") == "custom"]
    assert len(patch) > 1000
    new, res = reclaim_tool_results(dump, keep=0, truncate_inputs=100)
    (cut,) = [c["custom"]["input"] for m in new["messages"] for c in (m.get("tool_calls") or ())
              if c.get("type") == "custom"]
    assert cut.startswith(patch[:100]) and is_truncated_input(cut) and len(cut) < 300
    assert res.inputs_truncated >= 1
    restored, _ = restore_conversation(new)
    assert restored == dump
    again, res2 = reclaim_tool_results(new, keep=0, truncate_inputs=100)
    assert again == new and res2.inputs_truncated == 0


def test_cutting_long_arguments_never_takes_the_reported_length_below_zero():
    """xun's length estimate counts contents, not arguments: a Write of 5,000 characters with a
    one-line result, its arguments cut, reported length_after -4,900 and a fraction over 1."""
    messages = [{"role": "user", "content": "write it"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "w1", "type": "function",
                     "function": {"name": "Write", "arguments": json.dumps({"path": "a.py", "content": "x" * 5000})}}]},
                {"role": "tool", "tool_call_id": "w1", "content": "ok"},
                {"role": "assistant", "content": "Done."}]
    new, res = reclaim_tool_results({"messages": messages}, keep=0, truncate_inputs=50)
    assert res.inputs_truncated == 1
    assert res.length_after == estimated_message_length(new["messages"]) >= 0
    assert 0.0 <= res.reclaimed_fraction <= 1.0


def _patches(n: int = 4) -> list[dict]:
    patch = "*** Begin Patch\n*** Update File: src/a.py\n" + "+x = 1\n" * 200 + "*** End Patch"
    messages: list[dict] = [{"role": "user", "content": "patch it"}]
    for i in range(n):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"p{i}", "type": "custom", "custom": {"name": "apply_patch", "input": patch}}]})
        messages.append({"role": "tool", "tool_call_id": f"p{i}", "content": "Success. Updated: M src/a.py\n" * 20})
    messages.append({"role": "assistant", "content": "done"})
    return messages


def _custom_inputs(record: dict) -> list[str]:
    if "input" in record:  # Responses
        return [it["input"] for it in record["input"] if it.get("type") == "custom_tool_call"]
    return [c["custom"]["input"] for m in record["messages"] for c in (m.get("tool_calls") or ())
            if c.get("type") == "custom"]


def test_clear_tool_inputs_clears_a_custom_calls_input_in_chat_and_responses_and_restores_it(runner, tmp_path):
    """--clear-tool-inputs replaced function arguments only: a cleared apply_patch result kept its
    whole patch (most of a Codex session's tokens), in OpenAI chat and in a Responses request."""
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(orjson.dumps({"messages": _patches()}) + b"\n")
    responses = tmp_path / "responses.jsonl"
    res = runner.invoke(cli, ["convert", str(chat), "--to", "responses", "-q", "-o", str(responses)])
    assert res.exit_code == 0, res.stderr
    for src in (chat, responses):
        out, back = tmp_path / f"{src.stem}.out.jsonl", tmp_path / f"{src.stem}.back.jsonl"
        res = runner.invoke(cli, ["toolcall", "--keep", "1", "--clear-tool-inputs", str(src), "-o", str(out), "-q"])
        assert res.exit_code == 0, res.stderr
        inputs = _custom_inputs(orjson.loads(out.read_bytes()))
        assert [len(i) < 100 and "p" + str(k) in i for k, i in enumerate(inputs[:3])] == [True] * 3, inputs
        assert "+x = 1" in inputs[-1]  # the kept result's call stays whole
        res = runner.invoke(cli, ["restore", str(out), "-o", str(back), "-q"])
        assert res.exit_code == 0, res.stderr
        assert back.read_bytes() == src.read_bytes()


def test_a_custom_calls_output_converts_to_a_custom_tool_call_output(runner, tmp_path):
    """The Responses API pairs a custom_tool_call with a custom_tool_call_output; convert wrote a
    function_call_output for it."""
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(orjson.dumps({"messages": _patches(2)}) + b"\n")
    out = tmp_path / "responses.jsonl"
    res = runner.invoke(cli, ["convert", str(chat), "--to", "responses", "-q", "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    kinds = [it["type"] for it in orjson.loads(out.read_bytes())["input"]]
    assert kinds == ["message", "custom_tool_call", "custom_tool_call_output", "custom_tool_call",
                     "custom_tool_call_output", "message"]
