"""Compactions already in the input (issue 30): a Responses ``compaction`` item and an Anthropic
``compaction`` block are encrypted or the agent's own — the earlier context itself — so tier 1
passes them through as they are and tier 2 keeps them verbatim instead of summarising them away;
restore gives the request back exactly."""

from __future__ import annotations

import json

from compactor_cli import reclaim_tool_results, restore_conversation, summarize_dump
from compactor_cli.formats import parse_record


def _responses_request() -> dict:
    items: list[dict] = [{"type": "compaction", "encrypted_content": "gAAAAB-opaque-earlier-context"},
                         {"role": "user", "content": "fix the bug in a.py"}]
    for i in range(12):
        items += [{"type": "function_call", "call_id": f"c{i}", "name": "bash",
                   "arguments": json.dumps({"cmd": f"cat f{i}.py"})},
                  {"type": "function_call_output", "call_id": f"c{i}", "output": f"line {i}\n" * 50},
                  {"role": "assistant", "content": [{"type": "output_text", "text": f"step {i} done"}]}]
    return {"model": "gpt-5", "input": items}


def test_tier1_passes_a_responses_compaction_item_through():
    request = _responses_request()
    dump, codec = parse_record(json.dumps(request).encode())
    new, res = reclaim_tool_results(dump, keep=0)
    out = codec.to_native(new)
    assert res.reclaimed_count == 12 and out["input"][0] == request["input"][0]


def test_tier2_keeps_the_agents_own_compaction_verbatim_and_restores_exactly():
    request = _responses_request()
    dump, codec = parse_record(json.dumps(request).encode())
    new, status, _ = summarize_dump(dump, keep_recent=4)
    out = codec.to_native(new)
    assert str(status) == "SUMMARIZED"
    assert [it for it in out["input"] if it.get("type") == "compaction"] == [request["input"][0]]
    assert len(out["input"]) < len(request["input"])
    restored, _ = restore_conversation(new)
    assert codec.to_native(restored) == request


def test_tier1_passes_an_anthropic_compaction_block_through():
    request = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": [{"type": "compaction", "content": "Summary: edited a.py, tests pass"}]},
        {"role": "user", "content": "go on"},
        {"role": "assistant",
         "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py\n" * 200}]},
        {"role": "assistant", "content": "done"}]}
    dump, codec = parse_record(json.dumps(request).encode())
    new, res = reclaim_tool_results(dump, keep=0)
    out = codec.to_native(new)
    assert res.reclaimed_count == 1 and out["messages"][1] == request["messages"][1]
    assert restore_conversation(new)[0] is not None and codec.to_native(restore_conversation(new)[0]) == request
