"""Invariants of tier 1 over generated conversations (hypothesis)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import adversarial_dumps, conversations

from compactor_cli import (
    check_conversation,
    estimated_message_length,
    reclaim_tool_results,
    restore_conversation,
)
from compactor_cli.files.records import dump_bytes, parse_record
from compactor_cli.tiers.store import is_placeholder_of

KEEP = st.integers(0, 6)


def pairing(dump):
    return [p for p in check_conversation(dump) if "answers no call" in p.message or "has no result" in p.message]


@settings(deadline=None)
@given(conversations(), KEEP)
def test_pairing_order_and_non_tool_messages_are_unchanged(dump, keep):
    new, _ = reclaim_tool_results(dump, keep=keep)
    assert pairing(dump) == [] and pairing(new) == []
    assert len(new["messages"]) == len(dump["messages"])
    for a, b in zip(dump["messages"], new["messages"]):
        if a["role"] != "tool":
            assert a is b or a == b
        else:
            assert {k: v for k, v in a.items() if k != "content"} == {k: v for k, v in b.items() if k != "content"}
    assert [k for k in new if k != "compacted_tool_results"] == list(dump)


@settings(deadline=None)
@given(conversations(), KEEP)
def test_idempotent(dump, keep):
    once, _ = reclaim_tool_results(dump, keep=keep)
    twice, res = reclaim_tool_results(once, keep=keep)
    assert twice == once and res.reclaimed_count == 0 and res.reclaimed_fraction == 0.0


@settings(deadline=None)
@given(conversations(), KEEP, KEEP)
def test_restore_gives_back_the_input_even_after_two_runs(dump, keep1, keep2):
    once, _ = reclaim_tool_results(dump, keep=keep1)
    twice, _ = reclaim_tool_results(once, keep=keep2)
    assert restore_conversation(twice)[0] == dump
    # and through the bytes the CLI writes
    again, _ = parse_record(dump_bytes(twice, "jsonl"))
    assert restore_conversation(again)[0] == dump


@settings(deadline=None)
@given(conversations(), KEEP)
def test_reported_fraction_equals_the_recomputed_one(dump, keep):
    new, res = reclaim_tool_results(dump, keep=keep)
    before = estimated_message_length(dump["messages"])
    after = estimated_message_length(new["messages"])
    expected = (before - after) / before if before else 0.0
    assert res.reclaimed_fraction == pytest.approx(expected)
    assert 0.0 <= res.reclaimed_fraction <= 1.0


@settings(deadline=None)
@given(conversations(), KEEP)
def test_only_old_results_change_and_only_to_their_placeholder(dump, keep):
    new, res = reclaim_tool_results(dump, keep=keep)
    tool_idx = [i for i, m in enumerate(dump["messages"]) if m["role"] == "tool"]
    recent = set(tool_idx[len(tool_idx) - keep:]) if keep else set()
    for i in tool_idx:
        a, b = dump["messages"][i], new["messages"][i]
        if a != b:
            assert i not in recent
            assert is_placeholder_of(b["content"], a["tool_call_id"])  # the ID, or ID#k of a reused one
    assert res.reclaimed_count == sum(1 for i in tool_idx if dump["messages"][i] != new["messages"][i])


# ---- through the record pipeline (bytes in, bytes out), every command and both shapes

from compactor_cli.engine.executors import Processor  # noqa: E402
from compactor_cli.commands.settings import BackendConfig, Settings  # noqa: E402
from compactor_cli.files.records import Record  # noqa: E402
from compactor_cli.model.tokens import TokenCounter  # noqa: E402
from compactor_cli.tiers.compact import Policy  # noqa: E402
from compactor_cli.tiers.summarize import SummarizeOptions  # noqa: E402

COUNTER = TokenCounter()


def _run_one(settings: Settings, raw: bytes) -> bytes:
    rec = Record("gen", 1, raw, "jsonl", len(raw))
    processor = Processor(settings)
    try:
        (outcome,) = processor.outcomes([rec])
    finally:
        processor.close()
    assert outcome.error is None or outcome.item["status"] in ("SUMMARIZE_FAILED", "STILL_OVER"), outcome.error
    return outcome.out


SETTINGS = st.sampled_from([
    Settings("toolcall", keep=1),
    Settings("summarize", summary=SummarizeOptions(keep_recent=2, max_summary_tokens=200), backend=BackendConfig()),
    Settings("compact", policy=Policy(token_threshold=300, keep=1, keep_recent=3), backend=BackendConfig()),
])


@settings(deadline=None)
@given(conversations(), SETTINGS, st.booleans())
def test_every_command_restores_through_bytes_in_both_shapes(dump, run_settings, as_list):
    record = dump["messages"] if as_list else dump
    raw = orjson.dumps(record) + b"\n"
    out = _run_one(run_settings, raw)
    again = _run_one(run_settings, out)  # a second run never loses the way back either
    restored = _run_one(Settings("restore"), again)
    assert orjson.loads(restored) == record


@settings(deadline=None)
@given(adversarial_dumps(allow_compacted=False), SETTINGS, st.booleans())
def test_adversarial_ids_and_stale_stores_restore_exactly_through_bytes(dump, run_settings, as_list):
    """IDs spelled like other results' keys ('a#2', '', '#'), reused IDs, stores holding stale
    keys: two runs of any command, then restore, give back the input exactly."""
    record = dump["messages"] if as_list and list(dump) == ["messages"] else dump
    raw = orjson.dumps(record) + b"\n"
    out = _run_one(run_settings, raw)
    again = _run_one(run_settings, out)
    restored = _run_one(Settings("restore"), again)
    assert orjson.loads(restored) == record
