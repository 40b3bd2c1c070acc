"""Tier 1 rules, as the xun document states them, on in-memory dumps (no I/O)."""

from __future__ import annotations

import copy

import pytest
from helpers import tool_conv

from compactor_cli import (
    ORIGINALS_KEY,
    estimated_message_length,
    extract_tool_result,
    placeholder_for,
    reclaim_tool_results,
    restore_conversation,
)
from compactor_cli.errors import InvalidInputError


def test_placeholder_text_is_exactly_xuns():
    assert placeholder_for("call_9") == (
        "[Compacted, ID: call_9. If this content is still needed, call extract_compacted_tool_result "
        "with this ID or re-run the tool.]")


def test_results_beyond_the_most_recent_keep_are_replaced():
    dump = tool_conv(n_tools=5)
    new, res = reclaim_tool_results(dump, keep=2)
    tools = [m for m in new["messages"] if m["role"] == "tool"]
    assert [t["content"] == placeholder_for(t["tool_call_id"]) for t in tools] == [True, True, True, False, False]
    assert res.reclaimed_count == 3
    assert new[ORIGINALS_KEY] == {f"call_{i}": dump["messages"][3 + 3 * i]["content"] for i in range(3)}


def test_default_keep_is_twelve():
    new, res = reclaim_tool_results(tool_conv(n_tools=15))
    assert res.reclaimed_count == 3


def test_input_dump_is_not_modified():
    dump = tool_conv()
    before = copy.deepcopy(dump)
    reclaim_tool_results(dump, keep=0)
    assert dump == before


def test_only_replaced_where_the_placeholder_is_shorter():
    dump = tool_conv(n_tools=3, size=10)
    dump["messages"][3]["content"] = "x" * 500
    new, res = reclaim_tool_results(dump, keep=0)
    assert res.reclaimed_count == 1
    assert new["messages"][3]["content"] == placeholder_for("call_0")
    assert new["messages"][6]["content"].startswith("result 1")


def test_list_of_parts_content_is_replaced_by_a_string_and_kept_as_is():
    dump = tool_conv(n_tools=2)
    parts = [{"type": "text", "text": "a" * 300}, {"type": "text", "text": "b" * 300}]
    dump["messages"][3]["content"] = parts
    new, res = reclaim_tool_results(dump, keep=1)
    assert new["messages"][3]["content"] == placeholder_for("call_0")
    assert new[ORIGINALS_KEY]["call_0"] == parts


def test_reclaimed_fraction_is_the_share_of_estimated_length_saved():
    dump = tool_conv(n_tools=4)
    new, res = reclaim_tool_results(dump, keep=1)
    before = estimated_message_length(dump["messages"])
    after = estimated_message_length(new["messages"])
    assert res.reclaimed_fraction == pytest.approx((before - after) / before)
    assert (res.length_before, res.length_after) == (before, after)


def test_empty_conversation_reclaims_nothing():
    new, res = reclaim_tool_results({"messages": []}, keep=0)
    assert (res.reclaimed_count, res.reclaimed_fraction) == (0, 0.0)


def test_second_run_changes_nothing_and_reports_zero():
    once, _ = reclaim_tool_results(tool_conv(), keep=1)
    twice, res = reclaim_tool_results(once, keep=1)
    assert twice == once
    assert (res.reclaimed_count, res.reclaimed_fraction) == (0, 0.0)


def test_tool_message_without_id_is_skipped_and_counted():
    dump = tool_conv(n_tools=3)
    del dump["messages"][3]["tool_call_id"]
    new, res = reclaim_tool_results(dump, keep=0)
    assert new["messages"][3]["content"].startswith("result 0")
    assert res.skipped_no_id == 1 and res.reclaimed_count == 2


def test_originals_can_be_dropped():
    new, res = reclaim_tool_results(tool_conv(), keep=0, keep_originals=False)
    assert ORIGINALS_KEY not in new and res.reclaimed_count == 5


def test_existing_originals_are_kept():
    dump = tool_conv(n_tools=3)
    dump[ORIGINALS_KEY] = {"call_old": "from an earlier xun run"}
    new, _ = reclaim_tool_results(dump, keep=0)
    assert new[ORIGINALS_KEY]["call_old"] == "from an earlier xun run"
    assert set(new[ORIGINALS_KEY]) == {"call_old", "call_0", "call_1", "call_2"}


def test_reused_ids_restore_and_extract_exactly():
    dump = tool_conv(n_tools=4, ids=["dup", "a", "dup", "dup"])
    new, res = reclaim_tool_results(dump, keep=1)
    assert res.reclaimed_count == 3
    assert set(new[ORIGINALS_KEY]) == {"dup", "a", "dup#2"}
    restored, n = restore_conversation(new)
    assert restored == dump and n == 3
    content, shared = extract_tool_result(new, "dup")
    assert content.startswith("result 0") and shared == 2
    assert extract_tool_result(new, "dup", occurrence=2)[0].startswith("result 2")
    with pytest.raises(InvalidInputError):
        extract_tool_result(new, "dup", occurrence=3)  # the third is the kept, recent one


def test_extract_unknown_id_is_a_clear_error():
    new, _ = reclaim_tool_results(tool_conv(), keep=0)
    with pytest.raises(InvalidInputError, match="no compacted tool result with ID 'nope'"):
        extract_tool_result(new, "nope")


def test_restore_after_a_smaller_keep_second_run():
    dump = tool_conv(n_tools=6, ids=["x", "y", "x", "z", "x", "y"])
    first, _ = reclaim_tool_results(dump, keep=4)
    second, res = reclaim_tool_results(first, keep=1)
    assert res.reclaimed_count == 3
    assert restore_conversation(second)[0] == dump


def test_estimated_length_counts_only_the_named_keys_recursively():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "abc"}, {"type": "image_url", "image_url": {"url": "zzzz"}}]},
        {"role": "assistant", "content": "12345", "reasoning": "rr", "reasoning_content": "r",
         "tool_calls": [{"id": "c", "function": {"name": "n", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": None},
    ]
    assert estimated_message_length(messages) == 3 + 5 + 2 + 1
