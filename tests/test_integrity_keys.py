"""No tool result is ever lost to a key collision: adversarial IDs, stale stores, xun dumps,
mixed toolcall / summarize / compact rounds; and the library's list form, restore's account of
what it could not give back, and the IDs the compaction note lists."""

from __future__ import annotations

import asyncio
import copy

import pytest
from helpers import long_conv, tool_conv
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import adversarial_dumps

from compactor_cli import (
    ORIGINALS_KEY,
    check_conversation,
    extract_tool_result,
    placeholder_for,
    reclaim_tool_results,
    restore_conversation,
)
from compactor_cli.backends.extractive import ExtractiveBackend
from compactor_cli.errors import InvalidInputError
from compactor_cli.model.tokens import TokenCounter
from compactor_cli.tiers.compact import Policy, compact_conversation
from compactor_cli.tiers.summarize import SummarizeOptions, summarize_conversation

COUNTER = TokenCounter()
BACKEND = ExtractiveBackend(COUNTER.text)


def summarize(dump, keep_originals=True, **kw):
    opts = SummarizeOptions(keep_originals=keep_originals, **kw)
    return asyncio.run(summarize_conversation(dump, opts, BACKEND, COUNTER))


def compact(dump, **kw):
    return asyncio.run(compact_conversation(dump, Policy(**kw), BACKEND, COUNTER))


def store_values(dump):
    return list((dump.get(ORIGINALS_KEY) or {}).values())


def assert_nothing_lost(before, after):
    """Every content tier 1 replaced is stored; nothing stored before was overwritten."""
    for key, value in (before.get(ORIGINALS_KEY) or {}).items():
        assert after[ORIGINALS_KEY][key] == value, f"stored original {key!r} was overwritten"
    for a, b in zip(before["messages"], after["messages"]):
        if a.get("content") != b.get("content"):
            assert any(v == a["content"] for v in store_values(after)), "a replaced content is not stored"


# ---- the reported collisions

def test_a_reused_id_and_an_id_spelled_like_its_second_key():
    dump = tool_conv(n_tools=3, ids=["a", "a", "a#2"])
    new, res = reclaim_tool_results(dump, keep=0)
    assert res.reclaimed_count == 3
    assert_nothing_lost(dump, new)
    assert new[ORIGINALS_KEY]["a"].startswith("result 0")  # the first stays under the plain ID (xun)
    assert restore_conversation(new)[0] == dump
    assert extract_tool_result(new, "a#2")[0].startswith("result 2")
    assert extract_tool_result(new, "a", occurrence=2)[0].startswith("result 1")


def test_a_stale_key_in_the_store_is_never_overwritten():
    dump = tool_conv(n_tools=2, ids=["a", "b"])
    dump[ORIGINALS_KEY] = {"a": "stale: from a result no longer here"}
    new, _ = reclaim_tool_results(dump, keep=0)
    assert new[ORIGINALS_KEY]["a"] == "stale: from a result no longer here"
    assert_nothing_lost(dump, new)
    assert restore_conversation(new)[0] == dump
    assert extract_tool_result(new, "a")[0].startswith("result 0")


def test_a_xun_dump_with_a_reused_id_and_keep_0():
    """xun compacted the second result with ID 'a' and stored it under 'a'; the first is not
    compacted yet. --keep 0 must not lose the first result's content."""
    dump = tool_conv(n_tools=2, ids=["a", "a"])
    xun_original = dump["messages"][6]["content"]
    dump["messages"][6] = {**dump["messages"][6], "content": placeholder_for("a")}
    dump[ORIGINALS_KEY] = {"a": xun_original}
    new, res = reclaim_tool_results(dump, keep=0)
    assert res.reclaimed_count == 1
    assert new[ORIGINALS_KEY]["a"] == xun_original
    assert_nothing_lost(dump, new)
    assert restore_conversation(new)[0] == restore_conversation(dump)[0]


def test_results_after_a_dropped_summary_do_not_take_the_keys_of_summarised_ones():
    """toolcall (keep) -> summarize --originals drop -> toolcall (keep): the stored originals of
    summarised results stay, and new results with the same IDs get keys of their own."""
    dump = long_conv(rounds=12)
    del dump["tokens_used"]
    a, _ = reclaim_tool_results(dump, keep=2)
    b, status, _ = summarize(a, keep_originals=False, keep_recent=20)
    assert status.value == "SUMMARIZED"
    # the conversation goes on with the same IDs (models that number their calls do this)
    more = copy.deepcopy(b)
    for m in long_conv(rounds=3)["messages"][1:]:
        more["messages"].append({**m, "content": "later: " + m["content"]} if m["role"] == "tool" else m)
    c, res = reclaim_tool_results(more, keep=0)
    assert res.reclaimed_count > 0
    assert_nothing_lost(more, c)
    for m in more["messages"]:
        if m["role"] == "tool" and m["content"] != placeholder_for(m["tool_call_id"]):
            assert any(v == m["content"] for v in store_values(c))
    restored = restore_conversation(c)[0]
    assert [m for m in restored["messages"] if m["role"] == "tool"][-6:] == \
        [m for m in more["messages"] if m["role"] == "tool"][-6:]


def test_keys_of_files_compacted_before_still_restore():
    """A file written with the ID / ID#k scheme (no aliases) restores and extracts as before."""
    dump = tool_conv(n_tools=4, ids=["dup", "a", "dup", "dup"])
    legacy = copy.deepcopy(dump)
    for i, key in ((3, "dup"), (6, "a"), (9, "dup#2")):
        legacy["messages"][i]["content"] = placeholder_for(legacy["messages"][i]["tool_call_id"])
    legacy[ORIGINALS_KEY] = {"dup": dump["messages"][3]["content"], "a": dump["messages"][6]["content"],
                             "dup#2": dump["messages"][9]["content"]}
    assert restore_conversation(legacy)[0] == dump
    assert extract_tool_result(legacy, "dup", occurrence=2)[0] == dump["messages"][9]["content"]


# ---- the property: over adversarial IDs and stores, nothing is ever lost

@settings(deadline=None)
@given(adversarial_dumps(), st.integers(0, 4), st.integers(0, 4))
def test_toolcall_over_adversarial_ids_loses_nothing_and_restores(dump, keep1, keep2):
    try:
        once, _ = reclaim_tool_results(dump, keep=keep1)
        twice, _ = reclaim_tool_results(once, keep=keep2)
    except InvalidInputError:
        return  # refused: the pipeline writes the record unchanged
    assert not [p for p in check_conversation(twice) if p.fatal]
    assert_nothing_lost(dump, once)
    assert_nothing_lost(once, twice)
    expected = restore_conversation(dump)[0]
    assert restore_conversation(once)[0] == expected
    assert restore_conversation(twice)[0] == expected
    if not any(m["role"] == "tool" and m["content"] == placeholder_for(m["tool_call_id"]) for m in dump["messages"]):
        assert restore_conversation(twice)[0] == dump


STEP = st.one_of(
    st.tuples(st.just("toolcall"), st.integers(0, 4)),
    st.tuples(st.just("summarize"), st.integers(0, 6)),
    st.tuples(st.just("compact"), st.integers(50, 1500)),
)


@settings(deadline=None)
@given(adversarial_dumps(max_turns=12), st.lists(STEP, min_size=1, max_size=4))
def test_mixed_rounds_over_adversarial_ids_restore_exactly(dump, steps):
    expected = restore_conversation(dump)[0]
    current = dump
    for op, n in steps:
        before = current
        if op == "toolcall":
            current, _ = reclaim_tool_results(current, keep=n)
            assert_nothing_lost(before, current)
        elif op == "summarize":
            current, _, _ = summarize(current, keep_recent=n, max_summary_tokens=200)
        else:
            current, _, _ = compact(current, token_threshold=n, keep=2, keep_recent=3)
        assert not [p for p in check_conversation(current) if p.fatal]
        for key, value in (before.get(ORIGINALS_KEY) or {}).items():
            assert current[ORIGINALS_KEY][key] == value
        assert restore_conversation(current)[0] == expected


# ---- library: a bare list of messages (README: "reclaim_tool_results works on a dump")

def test_reclaim_accepts_a_bare_list_of_messages():
    messages = tool_conv(n_tools=3)["messages"]
    new, res = reclaim_tool_results(messages, keep=1)
    assert res.reclaimed_count == 2
    assert isinstance(new, dict) and set(new) == {"messages", ORIGINALS_KEY}  # the originals need a dump
    assert restore_conversation(new)[0] == {"messages": messages}
    dropped, res = reclaim_tool_results(messages, keep=1, keep_originals=False)
    assert isinstance(dropped, list) and res.reclaimed_count == 2  # nothing to store: a list again
    same, res = reclaim_tool_results(messages, keep=10)
    assert same is messages and res.reclaimed_count == 0
    assert restore_conversation(new["messages"])[0] == new["messages"]  # restore takes a list too


# ---- restore says what it could not give back

def test_restore_details_counts_placeholders_without_an_original():
    from compactor_cli.tiers.restore import restore_details

    dump = tool_conv(n_tools=4)
    dropped, _ = reclaim_tool_results(dump, keep=1, keep_originals=False)
    out, restored, missing = restore_details(dropped)
    assert (restored, missing) == (0, 3) and out == dropped
    kept, _ = reclaim_tool_results(dump, keep=1)
    out, restored, missing = restore_details(kept)
    assert (restored, missing) == (3, 0) and out == dump
    assert restore_conversation(kept) == (dump, 3)  # the old (dump, count) form is unchanged


def test_restore_does_not_undo_an_archived_round_under_a_later_dropped_one():
    dump = long_conv(rounds=20)
    from compactor_cli.tiers.restore import restore_details

    once, status, _ = summarize(dump, keep_recent=60)
    assert status.value == "SUMMARIZED"
    twice, status, _ = summarize(once, keep_recent=10, keep_originals=False)
    assert status.value == "SUMMARIZED"
    assert twice["summarized_messages"][-1]["dropped"] is True
    out, restored, missing = restore_details(twice)
    assert restored == 0 and missing == 2 and out["messages"] == twice["messages"]  # neither round can be undone


# ---- the compaction note names the compacted results it summarised away

def test_compaction_note_lists_ids_of_compacted_results_summarised_away():
    dump = long_conv(rounds=12)
    a, _ = reclaim_tool_results(dump, keep=4)
    compacted = [m["tool_call_id"] for m in a["messages"]
                 if m["role"] == "tool" and m["content"] == placeholder_for(m["tool_call_id"])]
    b, status, _ = summarize(a, keep_recent=8)
    assert status.value == "SUMMARIZED"
    live = {m["tool_call_id"] for m in b["messages"][1:] if m["role"] == "tool"}
    away = [cid for cid in compacted if cid not in live]
    assert away
    note = b["messages"][0]["content"].split("[Compaction note:")[1]
    tool = {"a": "read_file", "b": "grep"}
    assert "Compacted tool results summarised away: " + ", ".join(f"{c} ({tool[c[-1]]})" for c in away) + \
        " (fetch with extract_compacted_tool_result)" in note
    for cid in away:
        assert extract_tool_result(b, cid)[0] == a[ORIGINALS_KEY][cid]
    # a second round still names the first round's, with --originals drop too
    c, status, _ = summarize(b, keep_recent=2, keep_originals=False)
    assert status.value == "SUMMARIZED"
    assert all(cid in c["messages"][0]["content"] for cid in away)


def test_no_ids_listed_when_nothing_compacted_was_summarised():
    new, status, _ = summarize(long_conv(rounds=12), keep_recent=8)
    assert status.value == "SUMMARIZED" and "summarised away" not in new["messages"][0]["content"]


@pytest.mark.parametrize("keep_originals", [True, False])
def test_compact_note_lists_the_ids_and_they_can_be_fetched(keep_originals):
    dump = long_conv(rounds=20)
    del dump["tokens_used"]
    new, status, _ = compact(dump, token_threshold=COUNTER.conversation(dump["messages"]) // 4,
                             keep_originals=keep_originals)
    assert status.value in ("SUMMARIZED", "STILL_OVER")
    note = new["messages"][0]["content"]
    if keep_originals:
        listed = note.split("summarised away: ")[1].split(" (fetch with")[0].split(", ")
        listed = [item.rsplit(" (", 1)[0] for item in listed]  # "c0b (grep)": the key, then its tool
        assert listed and all(extract_tool_result(new, cid) for cid in listed)
    else:
        assert "summarised away" not in note  # nothing is stored, nothing to fetch


def test_restore_counts_summary_rounds_compact_made_without_keeping_them():
    from compactor_cli.tiers.restore import restore_details

    dump = long_conv(rounds=20)
    del dump["tokens_used"]
    new, status, fields = compact(dump, token_threshold=COUNTER.conversation(dump["messages"]) // 4,
                                  keep_originals=False)
    summaries = sum(1 for r in fields["rounds"] if r.get("status") == "SUMMARIZED")
    assert summaries >= 1 and "summarized_messages" not in new
    out, restored, missing = restore_details(new)
    assert restored == 0 and missing >= summaries
    assert "xcompact" not in out and "tokens_used" not in out  # compact's own record is still undone
