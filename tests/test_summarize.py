"""Tier 2: the cut rules, the committed replacement, failures that leave the input alone,
restore, and the extractive backend's quality on planted facts."""

from __future__ import annotations

import asyncio
import copy

import orjson
import pytest
from helpers import FIXTURES, long_conv, read_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli import check_conversation, restore_conversation
from compactor_cli.backends.extractive import ExtractiveBackend
from compactor_cli.backends.sections import SECTIONS, parse_sections
from compactor_cli.cli import cli
from compactor_cli.evidence.probes import sent_text
from compactor_cli.model.tokens import TokenCounter
from compactor_cli.status import Status
from compactor_cli.tiers.cut import choose_cut_point
from compactor_cli.tiers.summarize import SummarizeOptions, summarize_conversation
from compactor_cli.tiers.toolcall import reclaim_tool_results

COUNTER = TokenCounter()


def summarize(dump, **kw):
    opts = SummarizeOptions(**kw)
    return asyncio.run(summarize_conversation(dump, opts, ExtractiveBackend(COUNTER.text), COUNTER))


# ---- the cut

def roles(messages, idx):
    return [messages[i]["role"] for i in idx]


def test_tail_is_the_last_keep_recent_messages_after_the_system_message():
    msgs = long_conv(rounds=6)["messages"]  # 1 + 30 messages; rounds end with an assistant message
    cut = choose_cut_point(msgs, keep_recent=5)
    assert cut.system == 0 and cut.kept == list(range(26, 31)) and cut.head == list(range(1, 26))
    cut = choose_cut_point(msgs, keep_recent=100)
    assert cut.head == [] and cut.kept == list(range(1, 31))


def test_cut_never_leaves_a_tool_result_first_in_the_tail():
    msgs = long_conv(rounds=6)["messages"]
    for keep in range(0, 31):
        cut = choose_cut_point(msgs, keep)
        first = [i for i in cut.kept if i != cut.forced_user][:1]
        if first:
            assert msgs[first[0]]["role"] != "tool"
    cut = choose_cut_point(msgs, keep_recent=3)  # would start at the second parallel result
    assert msgs[cut.kept[0]]["role"] == "user" or msgs[cut.kept[1]].get("tool_calls")


def test_last_user_message_is_force_kept_in_chronological_order():
    msgs = long_conv(rounds=4)["messages"]
    cut = choose_cut_point(msgs, keep_recent=2)  # tail: tool result + assistant -> moves to the call
    assert cut.forced_user == 16 and cut.kept[0] == 16 and cut.kept == sorted(cut.kept)
    assert 16 not in cut.head


def test_no_system_message_and_an_empty_head():
    msgs = long_conv(rounds=2)["messages"][1:]
    cut = choose_cut_point(msgs, keep_recent=3)
    assert cut.system is None and cut.head[0] == 0
    new, status, _ = summarize({"messages": msgs[:3]}, keep_recent=16)
    assert status is Status.NOTHING_TO_CONDENSE and new == {"messages": msgs[:3]}


@settings(deadline=None)
@given(conversations(), st.integers(0, 12))
def test_cut_rules_hold_for_every_keep_recent(dump, keep):
    msgs = dump["messages"]
    cut = choose_cut_point(msgs, keep)
    start = 1 if cut.system == 0 else 0
    assert sorted(cut.head + cut.kept) == list(range(start, len(msgs)))
    assert cut.kept == sorted(cut.kept)
    tail = [i for i in cut.kept if i != cut.forced_user]
    if tail and cut.head:
        assert msgs[tail[0]]["role"] != "tool"
        assert len(tail) >= min(keep, len(msgs) - start)
    if cut.head and any(msgs[i]["role"] == "user" for i in cut.head + cut.kept):
        assert any(msgs[i]["role"] == "user" for i in cut.kept)


# ---- the replacement

def test_summary_replaces_the_head_and_is_restorable():
    dump = long_conv(rounds=20)
    original = copy.deepcopy(dump)
    new, status, fields = summarize(dump, keep_recent=6)
    assert status is Status.SUMMARIZED
    assert dump == original  # input untouched
    system = new["messages"][0]
    assert system["role"] == "system"
    assert list(parse_sections(system["content"].split("\n\n[Compaction note")[0])) == list(SECTIONS)
    assert "[Compaction note: the 94 earlier messages" in system["content"]
    assert "extract_compacted_tool_result" in system["content"]
    assert new["messages"][1:] == dump["messages"][-6:]
    assert new["tokens_used"] is None
    assert new["compaction_counter"] == {"summary_rounds": 1, "toolcall_rounds": 0}
    assert fields["summary_tokens"] <= 1024 and fields["summarized_count"] == 94
    assert restore_conversation(new)[0] == original


def test_second_round_counts_up_and_restores_both_rounds():
    dump = long_conv(rounds=20)
    once, _, _ = summarize(dump, keep_recent=40)
    twice, status, _ = summarize(once, keep_recent=10)
    assert status is Status.SUMMARIZED and twice["compaction_counter"]["summary_rounds"] == 2
    assert restore_conversation(twice)[0] == dump


def test_preserve_system_keeps_the_prompt_above_the_summary():
    new, _, _ = summarize(long_conv(), keep_recent=6, preserve_system=True)
    assert new["messages"][0]["content"].startswith("You are a coding agent. Work in the repository.\n\n## system_context")


def test_tier1_then_tier2_then_tier1_restores_exactly():
    dump = long_conv(rounds=20)
    a, _ = reclaim_tool_results(dump, keep=4)
    b, _, _ = summarize(a, keep_recent=12)
    from compactor_cli.tiers.cut import head_tool_counts

    c, res = reclaim_tool_results(b, keep=1, key_offsets=head_tool_counts(b))
    assert res.reclaimed_count > 0
    assert restore_conversation(c)[0] == dump


def test_a_head_too_small_to_shrink_is_nothing_to_condense_not_a_failure():
    dump = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                         {"role": "user", "content": "bye"}]}
    new, status, fields = summarize(dump, keep_recent=1)
    assert status is Status.NOTHING_TO_CONDENSE and not status.failed and new is dump
    assert "not smaller than what it replaces" in fields["reason"] and "error" not in fields
    assert fields["reason_kind"] == "not_smaller"  # typed: compact retries on it, not on server failures


def test_summary_stays_within_small_budgets():
    for budget in (64, 128, 300):
        new, status, fields = summarize(long_conv(rounds=30), keep_recent=4, max_summary_tokens=budget)
        assert status is Status.SUMMARIZED and fields["summary_tokens"] <= budget


@settings(deadline=None)
@given(conversations(), st.integers(0, 8), st.sampled_from([64, 200, 1024]), st.booleans())
def test_properties_pairing_restore_budget(dump, keep, budget, keep_originals):
    new, status, fields = summarize(dump, keep_recent=keep, max_summary_tokens=budget, keep_originals=keep_originals)
    if status is Status.SUMMARIZED:
        assert fields["summary_tokens"] <= budget
        assert not [p for p in check_conversation(new) if "answers no call" in p.message or "has no result" in p.message]
        assert fields["tokens_after"] == COUNTER.conversation(new["messages"])
        assert fields["tokens_before"] == COUNTER.conversation(dump["messages"])
        if keep_originals:
            assert restore_conversation(new)[0] == dump
        else:
            assert "summarized_messages" not in new  # nothing stored before: nothing to keep track of
    else:
        assert new is dump


# ---- through the CLI

def test_cli_summarize_every_input_form(runner, tmp_path):
    for name in ("swe_agent_3.jsonl", "claude_code_session.json", "airline_list.json"):
        out = tmp_path / name
        res = runner.invoke(cli, ["summarize", "-q", "--backend", "extractive", "--keep-recent", "6",
                                  str(FIXTURES / name), "-o", str(out)])
        assert res.exit_code == 0, res.stderr
        back = tmp_path / ("r-" + name)
        assert runner.invoke(cli, ["restore", "-q", str(out), "-o", str(back)]).exit_code == 0
        if name.endswith(".jsonl"):
            assert read_jsonl(back) == read_jsonl(FIXTURES / name)
        else:
            assert orjson.loads(back.read_bytes()) == orjson.loads((FIXTURES / name).read_bytes())


def test_cli_report_names_backend_and_statuses(runner, tmp_path):
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["summarize", "--backend", "extractive", "--keep-recent", "8",
                              str(FIXTURES / "taubench_airline_5.jsonl"), "-o", str(tmp_path / "o.jsonl"),
                              "--report", str(report)])
    assert res.exit_code == 0
    doc = orjson.loads(report.read_bytes())
    assert {i["status"] for i in doc["items"]} <= {"SUMMARIZED", "NOTHING_TO_CONDENSE"}
    assert all(i["backend"] == "extractive" for i in doc["items"])
    assert doc["parameters"]["backend"] == "extractive" and doc["parameters"]["keep_recent"] == 8


def test_auto_backend_is_extractive_without_openai_environment(runner, tmp_path):
    report = tmp_path / "r.json"
    runner.invoke(cli, ["summarize", "-q", str(FIXTURES / "claude_code_session.json"), "--report", str(report)])
    assert orjson.loads(report.read_bytes())["parameters"]["backend"] == "extractive"


# ---- quality of the extractive backend on planted facts

PLANTED = [
    ("file path", "user", "The config lives in services/billing/settings_prod.yaml, keep that in mind.",
     "services/billing/settings_prod.yaml"),
    ("number", "tool", "Benchmark finished: p99 latency 8431 ms over 5000 requests.", "8431 ms"),
    ("preference", "user", "I prefer tabs over spaces in every Python file.", "I prefer tabs over spaces"),
    ("decision", "assistant", "I will migrate the cache to Redis instead of Memcached.", "migrate the cache to Redis"),
    ("open question", "assistant", "Should the retention period be 30 or 90 days?", "retention period be 30 or 90 days"),
    ("identifier", "tool", "Created reservation QX7T2P for passenger mia_li_3668.", "QX7T2P"),
]


def planted_conversation(seed: int) -> dict:
    """A long head full of filler, with the planted facts spread through it."""
    import random

    rng = random.Random(seed)
    filler = ["Looking at the code now.", "That part compiles fine.", "Running the tests again.",
              "The output is shown below.", "Nothing unusual in this file.", "I will look at the next module.",
              "Let's run the linter first.", "Is this the right directory?", "Please be quick."]
    messages = [{"role": "system", "content": "You are a careful engineering agent."}]
    slots = sorted(rng.sample(range(8, 60), len(PLANTED)))
    call = 0
    for turn in range(64):
        planted = [p for p, s in zip(PLANTED, slots) if s == turn]
        if turn % 4 == 0:
            text = " ".join(rng.choice(filler) for _ in range(3))
            messages.append({"role": "user", "content": text})
        for _, role, sentence, _ in planted:
            if role == "tool":
                messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"p{call}", "type": "function", "function": {"name": "run", "arguments": "{}"}}]})
                messages.append({"role": "tool", "tool_call_id": f"p{call}",
                                 "content": "log line\n" * 30 + sentence + "\n" + "log line\n" * 30})
                call += 1
            else:
                messages.append({"role": role, "content": " ".join(rng.choice(filler) for _ in range(2)) + " " + sentence})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"f{call}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]})
        noise = "\n".join(f"src/pkg_{rng.randint(0, 999)}/mod_{rng.randint(0, 99)}.py:{rng.randint(1, 400)}: "
                          f"took {rng.randint(1, 900)} ms, id {rng.choice('ABCDEFGH')}{rng.randint(10000, 99999)}"
                          for _ in range(12))
        messages.append({"role": "tool", "tool_call_id": f"f{call}", "content": "line of source code\n" * 20 + noise})
        call += 1
        messages.append({"role": "assistant", "content": rng.choice(filler)})
    messages.append({"role": "user", "content": "Thanks, please continue."})
    return {"messages": messages}


def planted_recall(n_conversations: int = 20) -> tuple[float, float, dict[str, float]]:
    hits: dict[str, int] = {kind: 0 for kind, *_ in PLANTED}
    tokens = []
    for seed in range(n_conversations):
        new, status, fields = summarize(planted_conversation(seed), keep_recent=8)
        assert status is Status.SUMMARIZED
        sent = sent_text(new["messages"])  # the summary, the task and the user's words kept verbatim
        tokens.append(fields["summary_tokens"])
        for kind, _, _, needle in PLANTED:
            hits[kind] += " ".join(needle.split()) in sent
    per_kind = {k: v / n_conversations for k, v in hits.items()}
    return sum(hits.values()) / (n_conversations * len(PLANTED)), sum(tokens) / len(tokens), per_kind


@pytest.mark.slow
def test_extractive_recalls_planted_facts():
    recall, mean_tokens, per_kind = planted_recall()
    print(f"planted-fact recall {recall:.2%}, mean summary tokens {mean_tokens:.0f}, per kind {per_kind}")
    assert recall >= 0.9, per_kind
    assert mean_tokens <= 1024
