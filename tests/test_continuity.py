"""Summaries worth continuing from (issue 14): the system prompt kept, a bounded compaction
note counted in the budget, placeholders of reused IDs naming the key extract takes, routine
output kept out of the facts, preferences and open questions as a reader means them, and
statuses that say what happened."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import long_conv

from compactor_cli.backends import SummaryRequest
from compactor_cli.backends.extractive import ExtractiveBackend
from compactor_cli.backends.sections import parse_sections
from compactor_cli.model.tokens import TokenCounter
from compactor_cli.status import Status
from compactor_cli.tiers.cut import NOTE_ID_CHARS
from compactor_cli.tiers.summarize import summarize_dump
from compactor_cli.tiers.restore import restore_conversation
from compactor_cli.tiers.toolcall import (
    extract_tool_result,
    placeholder_for,
    reclaim_tool_results,
)

COUNTER = TokenCounter()
SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def bash_run(n: int, output: int = 400) -> dict:
    """A SWE-agent-like run: one task, then n bash calls with long outputs."""
    msgs: list[dict] = [{"role": "system", "content": "You are an autonomous programmer. " * 30},
                        {"role": "user", "content": "Fix the failing test in tests/test_io.py, please."}]
    for i in range(n):
        msgs.append({"role": "assistant", "content": f"Step {i}: I will look at part {i}.", "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "cat f{i}"}}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"line of output {i}\n" * output})
    msgs.append({"role": "user", "content": "Where are we?"})
    return {"messages": msgs}


def note_of(dump: dict) -> str:
    return dump["messages"][0]["content"].split("[Compaction note:")[1]


def test_the_system_prompt_survives_verbatim_and_a_second_round_replaces_only_the_summary():
    dump = long_conv(rounds=30)
    prompt = dump["messages"][0]["content"]
    once, status, _ = summarize_dump(dump, keep_recent=20)
    assert status is Status.SUMMARIZED
    assert once["messages"][0]["content"].startswith(prompt + "\n\n## system_context\n")
    twice, status, _ = summarize_dump(once, keep_recent=6)
    assert status is Status.SUMMARIZED
    system = twice["messages"][0]["content"]
    assert system.startswith(prompt + "\n\n## system_context\n")
    assert system.count("## system_context") == 1 and system.count("[Compaction note:") == 1
    assert "(summary round 2)" in system
    assert restore_conversation(twice)[0] == dump
    # xun's literal replacement on request
    replaced, status, _ = summarize_dump(dump, keep_recent=20, preserve_system=False)
    assert replaced["messages"][0]["content"].startswith("## system_context\n") and prompt not in replaced["messages"][0]["content"]


def test_a_system_prompt_given_as_parts_keeps_its_parts_and_keys():
    dump = long_conv(rounds=30)
    parts = [{"type": "text", "text": "Rule one."}, {"type": "text", "text": "Rule two."}]
    dump["messages"][0] = {"role": "system", "content": parts, "name": "policy"}
    new, status, _ = summarize_dump(dump, keep_recent=20)
    assert status is Status.SUMMARIZED
    system = new["messages"][0]
    assert system["name"] == "policy" and system["content"][:2] == parts
    assert system["content"][2]["text"].startswith("## system_context\n")
    assert restore_conversation(new)[0] == dump


@pytest.mark.parametrize("n", [8, 80])
def test_the_compaction_note_is_bounded_and_counted_in_the_budget(n):
    dump, _ = reclaim_tool_results(bash_run(n), keep=2)
    budget = 600
    new, status, fields = summarize_dump(dump, keep_recent=4, max_summary_tokens=budget)
    assert status is Status.SUMMARIZED
    note = note_of(new)
    system = new["messages"][0]["content"]
    summary = system[system.index("## system_context"):system.index("\n\n[Compaction note:")]
    assert COUNTER.text(summary) + COUNTER.text("[Compaction note:" + note) <= budget
    away = [f"call_{i}" for i in range(n - 2)]
    if n == 8:  # few: every one named with its tool
        assert ", ".join(f"{c} (bash)" for c in away) in note
    else:  # many: grouped, first two and last named, the rest counted; still fetchable
        assert len(note) < NOTE_ID_CHARS + 400 and f"{len(away)} in all" in note
        assert "call_0" in note and "call_1" in note and f"call_{n - 3}" in note and "call_40," not in note
    for cid in away:
        assert extract_tool_result(new, cid)[0] == f"line of output {int(cid[5:])}\n" * 400


def test_a_reused_id_gets_a_placeholder_naming_the_key_extract_takes():
    dump = bash_run(4)
    for i in (3, 5, 7, 9):  # every call and result reuses one ID, as some agents do
        dump["messages"][i - 1]["tool_calls"][0]["id"] = "call_x"
        dump["messages"][i]["tool_call_id"] = "call_x"
    new, res = reclaim_tool_results(dump, keep=1)
    contents = [m["content"] for m in new["messages"] if m["role"] == "tool"]
    assert contents[:3] == [placeholder_for("call_x"), placeholder_for("call_x#2"), placeholder_for("call_x#3")]
    for k, key in enumerate(["call_x", "call_x#2", "call_x#3"]):
        assert extract_tool_result(new, key)[0] == f"line of output {k}\n" * 400  # what the placeholder says
    assert restore_conversation(new)[0] == dump
    again, res2 = reclaim_tool_results(new, keep=0)  # already compacted results are left alone
    assert res2.reclaimed_count == 1 and restore_conversation(again)[0] == dump


def extractive(head: list[dict], budget: int = 1024) -> dict[str, str]:
    return parse_sections(ExtractiveBackend(COUNTER.text).summarize_sync(SummaryRequest(head, "", budget)))


def test_routine_tool_output_states_no_fact():
    listing = "\n".join(f"-rw-r--r-- 1 root root {100 + i} Dec  1 15:11 file_{i}.py" for i in range(20))
    pip = ("Collecting numpy==1.26.4\n  Downloading numpy-1.26.4.tar.gz (15.8 MB)\n"
           "100%|██████████| 15.8M/15.8M [00:02<00:00, 7.1MB/s]\nSuccessfully installed numpy-1.26.4\nERRORS:")
    cols = "README.md  setup.py  src  tests  docs.md  tox.ini"
    head = [{"role": "user", "content": "Set up the project and tell me what is in it."}]
    for i, out in enumerate([listing, pip, cols, "Saved the export to reports/q3_summary.csv"]):
        head += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{i}", "content": out}]
    facts = extractive(head)["key_facts"]
    assert "reports/q3_summary.csv" in facts
    for routine in ("file_3.py", "-rw-r--r--", "Downloading", "7.1MB/s", "Successfully installed", "setup.py  src",
                    "ERRORS:"):
        assert routine not in facts, routine


def test_preferences_are_what_the_user_asked_and_open_questions_are_unanswered():
    head = [
        {"role": "user", "content": "<system-reminder>You must always use tabs and never ask questions.</system-reminder>"
                                    "Please always book refundable fares. Which cabins are available?"},
        {"role": "assistant", "content": "Economy and business cabins are available. You should always check the fare "
                                         "rules. Should the loyalty sync run hourly or weekly?"},
        {"role": "user", "content": "Thanks. My user ID is omar_lind_1234."},
        {"role": "assistant", "content": "Could you please provide your reservation number?"},
        {"role": "user", "content": "It is H9ZU1C."},
        {"role": "assistant", "content": "Is there anything about the baggage allowance you want to know?"},
    ]
    sections = extractive(head)
    prefs, questions = sections["user_preferences"], sections["open_questions"]
    assert "always book refundable fares" in prefs
    assert "tabs" not in prefs and "check the fare rules" not in prefs  # injected by the client / said by the agent
    assert "hourly or weekly" in questions and "baggage allowance" in questions  # not taken up / never answered
    assert "Which cabins" not in questions and "reservation number" not in questions  # answered


def test_a_head_too_small_to_shrink_is_not_a_failure_on_the_command_line(tmp_path):
    dump = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                         {"role": "user", "content": "bye"}]}
    src = tmp_path / "tiny.jsonl"
    src.write_bytes(orjson.dumps(dump) + b"\n")
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "summarize", str(src), "--keep-recent", "1",
                          "--backend", "extractive", "--report", str(tmp_path / "r.json"), "-o", str(tmp_path / "o.jsonl")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    (item,) = orjson.loads((tmp_path / "r.json").read_bytes())["items"]
    assert item["status"] == "NOTHING_TO_CONDENSE" and "not smaller" in item["reason"]
    assert (tmp_path / "o.jsonl").read_bytes() == src.read_bytes()


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "spotter-claude-code.jsonl").exists(), reason="../shared/data is not here")
def test_summarize_of_the_real_claude_code_sessions_exits_0(tmp_path):
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "summarize", str(SHARED / "spotter-claude-code.jsonl"),
                          "--backend", "extractive", "-o", str(tmp_path / "o.jsonl"), "--report", str(tmp_path / "r.json")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    statuses = {i["status"] for i in orjson.loads((tmp_path / "r.json").read_bytes())["items"]}
    assert statuses <= {"SUMMARIZED", "NOTHING_TO_CONDENSE"} and "SUMMARIZED" in statuses


def test_compact_that_summarised_says_summarized_even_when_a_later_round_did_not():
    from compactor_cli.tiers.compact import Policy, compact_conversation

    dump = bash_run(30, output=60)
    policy = Policy(token_threshold=COUNTER.conversation(dump["messages"]) // 3, keep=12, keep_recent=24, max_retries=3)
    new, status, fields = asyncio.run(compact_conversation(dump, policy, ExtractiveBackend(COUNTER.text), COUNTER))
    rounds = [(r["tier"], r.get("status")) for r in fields["rounds"]]
    assert rounds == [(1, None), (2, "SUMMARIZED"), (1, None)]  # the last round was tier 1 alone
    assert status is Status.SUMMARIZED
    assert restore_conversation(new)[0] == dump
