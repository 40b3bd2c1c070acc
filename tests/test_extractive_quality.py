"""What the extractive summariser says, on real transcripts (fixtures/): every item carries its
context, code is not an error, items follow the conversation, rounds merge without duplicates,
the overview survives a tiny budget, and facts planted where a user or a tool would put them
are recalled (bench/bench_recall.py measures the same on the full data sets)."""

from __future__ import annotations

import os
import re
import sys
import zlib
from collections import Counter, defaultdict

import orjson
import pytest
from helpers import FIXTURES, ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.backends import SummaryRequest
from compactor_cli.backends.extractive import ExtractiveBackend, dedupe_key
from compactor_cli.backends.sections import SECTIONS, parse_sections
from compactor_cli.evidence.probes import sent_text
from compactor_cli.model.tokens import TokenCounter
from compactor_cli.status import Status
from compactor_cli.tiers.summarize import summarize_dump

sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_recall import KINDS, plant

REAL = ["taubench_airline_5.jsonl", "swe_agent_3.jsonl", "claude_code_session.json", "llm-answers/conversations.jsonl"]
SPEAKER = re.compile(r"^(User|Assistant|Assistant called [\w.:-]+|Tool [\w.:-]+): \S")


def conversations(name: str) -> list[dict]:
    data = (FIXTURES / name).read_bytes()
    docs = [orjson.loads(data)] if name.endswith(".json") else [orjson.loads(x) for x in data.splitlines() if x.strip()]
    return [d if isinstance(d, dict) else {"messages": d} for d in docs]


def all_real() -> list[tuple[str, dict]]:
    return [(f"{name}:{i + 1}", c) for name in REAL for i, c in enumerate(conversations(name))]


def summary_of(dump: dict, **kw) -> tuple[dict[str, str], dict]:
    kw.setdefault("preserve_system", False)  # the system prompt is summarised too: its sentences are items
    new, status, details = summarize_dump(dump, **kw)
    assert status is Status.SUMMARIZED, details
    text = new["messages"][0]["content"].split("\n\n[Compaction note")[0]
    return parse_sections(text), new


def summary_part(new: dict) -> str:
    """The summary in a summarised dump's system message (after the kept prompt, before the note)."""
    content = new["messages"][0]["content"]
    at = content.find("## system_context\n")
    return content[at:].split("\n\n[Compaction note")[0]


def bullets(body: str) -> list[str]:
    return [line[2:] for line in body.splitlines() if line.startswith("- ")]


def test_every_key_fact_says_who_said_it_and_around_what():
    checked = 0
    for where, conv in all_real():
        try:
            sections, _ = summary_of(conv, keep_recent=6)
        except AssertionError:
            continue  # nothing to condense
        for item in bullets(sections["key_facts"]):
            assert SPEAKER.match(item), (where, item)
            assert not re.match(r"(ID|Number|File|Error): ", item), (where, item)  # no bare, labelled fact
            if item.startswith(("User: ", "Assistant: ")):  # the sentence around the fact, not the fact alone
                assert len(item.split(": ", 1)[1].split()) >= 2, (where, item)
            checked += 1
    assert checked > 100


def test_numbers_keep_their_unit_and_their_subject():
    """ "1997 lines" of the SWE-agent run comes with the file it counts."""
    sections, _ = summary_of(conversations("swe_agent_3.jsonl")[1], keep_recent=6)
    (item,) = [x for x in bullets(sections["key_facts"]) if "1997 lines" in x][:1]
    assert "fields.py" in item and item.startswith("Tool ")


def test_code_lines_are_not_errors():
    """A file listing's "1480:        except (TypeError, ValueError) as error:" is code, not an error;
    a traceback's last line is."""
    listing = "\n".join(f"{1470 + i}:        {line}" for i, line in enumerate(
        ["try:", "    value = int(raw)", "except (TypeError, ValueError) as error:", "    raise self.make_error('invalid') from error"]))
    head = [{"role": "user", "content": "Please check the parser."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "open", "arguments": '{"path": "fields.py"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "[File: src/fields.py (1997 lines total)]\n" + listing},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest"}'}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "Traceback (most recent call last):\n  File \"t.py\", line 3\n"
                                                              "ValueError: invalid literal for int() with base 10: 'x'"}]
    text = ExtractiveBackend(TokenCounter().text).summarize_sync(SummaryRequest(head, "", 1024))
    facts = parse_sections(text)["key_facts"]
    assert "except (TypeError" not in text and "raise self.make_error" not in facts
    assert "- Tool bash: ValueError: invalid literal for int() with base 10: 'x'" in facts
    assert "- Tool open: [File: src/fields.py (1997 lines total)]" in facts
    # on the real run the listing comes from: no listed line of code is a fact or an error
    for conv in conversations("swe_agent_3.jsonl"):
        sections, _ = summary_of(conv, keep_recent=6)
        for item in bullets(sections["key_facts"]):
            assert not re.match(r"Tool [\w.:-]+: …?\d+:\s", item), item


def test_items_follow_the_conversation():
    head = []
    for i, what in enumerate(["migrate the cache", "rebuild the index", "archive the logs"]):
        head += [{"role": "user", "content": f"Step {i}? Should we {what} now?"},
                 {"role": "assistant", "content": f"I'll {what} first. Should I also notify the team about step {i}?"}]
    sections = parse_sections(ExtractiveBackend(TokenCounter().text).summarize_sync(SummaryRequest(head, "", 1024)))
    assert bullets(sections["decisions"]) == ["Assistant: I'll migrate the cache first.",
                                              "Assistant: I'll rebuild the index first.",
                                              "Assistant: I'll archive the logs first."]
    # the user's questions are taken up by the next turn ("I'll migrate the cache first"); the
    # assistant's are not (the user asks the next thing), so they stay open, in order
    assert bullets(sections["open_questions"]) == [f"Assistant: Should I also notify the team about step {i}?"
                                                   for i in range(3)]
    asked = bullets(sections["overview"])[1:]
    assert asked == sorted(asked, key=lambda x: int(re.search(r"Step (\d)", x).group(1)))


@pytest.mark.parametrize("name", REAL)
def test_rounds_merge_without_duplicates(name):
    rounds_seen = 0
    for conv in conversations(name):
        current, rounds = conv, 0
        for keep in (16, 8, 4):
            new, status, _ = summarize_dump(current, keep_recent=keep, max_summary_tokens=1024)
            if status is not Status.SUMMARIZED:
                break
            current, rounds = new, rounds + 1
        if rounds < 2:
            continue
        rounds_seen += 1
        sections = parse_sections(current["messages"][0]["content"].split("\n\n[Compaction note")[0])
        for section, body in sections.items():
            keys = Counter(dedupe_key(x) for x in bullets(body))
            assert all(c == 1 for c in keys.values()), (section, [k for k, c in keys.items() if c > 1])
        assert sum("earlier messages:" in x for x in bullets(sections["overview"])) == 1  # counts added up
        assert sum(x.startswith("Latest request:") for x in bullets(sections["pending_tasks"])) <= 1
    assert rounds_seen or name == "claude_code_session.json"


def test_second_round_counts_add_up_and_earlier_items_come_first():
    conv = conversations("taubench_airline_5.jsonl")[0]
    first, once = summary_of(conv, keep_recent=16)
    second, _ = summary_of(once, keep_recent=6)
    n1 = int(re.match(r"(\d+) earlier", bullets(first["overview"])[0]).group(1))
    n2 = int(re.match(r"(\d+) earlier", bullets(second["overview"])[0]).group(1))
    assert n2 > n1  # the first round's messages are counted in the second's
    old, new = bullets(first["key_facts"]), bullets(second["key_facts"])
    carried = [x for x in new if x in old]
    assert carried and new[: len(carried)] == carried  # older items first


@pytest.mark.parametrize("budget", [64, 96, 200])
def test_the_overview_survives_a_tiny_budget(budget):
    counter = TokenCounter()
    for where, conv in all_real():
        new, status, details = summarize_dump(conv, keep_recent=6, max_summary_tokens=budget)
        if status is Status.NOTHING_TO_CONDENSE:
            continue
        assert status is Status.SUMMARIZED and details["summary_tokens"] <= budget, (where, details)
        text = summary_part(new)
        assert counter.text(text) <= budget
        overview = parse_sections(text)["overview"]
        assert overview != "(none)" and overview.startswith("- "), (where, text)


def test_planted_facts_are_recalled_on_real_transcripts():
    """Six facts (path, number, preference, decision, open question, identifier) planted into the
    heads of the real fixtures, three plantings each, at the default budget of 1024 tokens."""
    hits: dict[str, list[bool]] = defaultdict(list)
    for where, conv in all_real():
        for seed in range(3):
            planted = plant(conv, zlib.crc32(f"{where}:{seed}".encode()), keep=16)
            if planted is None:
                continue
            dump, facts = planted
            new, status, details = summarize_dump(dump, keep_recent=16, max_summary_tokens=1024)
            if status is Status.NOTHING_TO_CONDENSE:  # the task kept verbatim left too small a head
                continue
            assert status is Status.SUMMARIZED, (where, details)
            sent = sent_text(new["messages"])  # what a model is sent: the summary, the task kept verbatim
            for kind, needle in facts:
                hits[kind].append(" ".join(needle.split()) in sent)
    n = sum(len(v) for v in hits.values())
    recall = sum(sum(v) for v in hits.values()) / n
    per_kind = {k: round(sum(hits[k]) / len(hits[k]), 2) for k in KINDS}
    print(f"planted-fact recall on the real fixtures: {recall:.1%} of {n}; per kind {per_kind}")
    assert n >= 100 and set(hits) == set(KINDS)
    assert recall >= 0.9, per_kind
    assert min(per_kind.values()) >= 0.75, per_kind


def test_every_section_is_present_and_canonical_on_real_transcripts():
    for where, conv in all_real():
        new, status, _ = summarize_dump(conv, keep_recent=6)
        if status is Status.SUMMARIZED:
            text = summary_part(new)
            assert list(parse_sections(text)) == list(SECTIONS)
            headings = [line for line in text.splitlines() if line.startswith("## ")]
            # the eight, then xcompact's evidence section when the head has evidence
            assert headings in ([f"## {s}" for s in SECTIONS], [f"## {s}" for s in SECTIONS] + ["## evidence"])


def test_a_request_the_head_saw_done_is_not_pending_and_one_awaiting_a_reply_is():
    """Issue 27: "a pending task only when nothing later in the head did it": a request the agent
    acted on and then answered is said in the overview, not as pending; one answered by a
    question back (a confirmation asked for) is still pending."""
    def head(reply: str) -> list[dict]:
        return [{"role": "user", "content": "Please rename the export module to exporter and update its imports."},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "git mv a b"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "done"},
                {"role": "assistant", "content": reply}]

    def sections(reply: str) -> dict[str, str]:
        from compactor_cli.backends import SummaryRequest
        from compactor_cli.backends.sections import parse_sections

        text = ExtractiveBackend(lambda s: len(s) // 4).summarize_sync(SummaryRequest(head(reply), "", 600))
        return parse_sections(text)

    done = sections("Renamed the module and updated every import.")
    assert "Latest request" not in done["pending_tasks"]
    assert "rename the export module" in done["overview"]
    asked = sections("I found two modules named export. Which one should I rename?")
    assert "Latest request: Please rename the export module" in asked["pending_tasks"]


def _next_turns_reference(msgs):
    """extractive._next_turns as first written (the sum recounted per message): the reference."""
    sides, seg_of = [], []
    for m in msgs:
        side = "user" if m.role == "user" else "agent" if m.role in ("assistant", "tool") else None
        if side is None:
            seg_of.append(None)
            continue
        if not sides or sides[-1][0] != side:
            sides.append((side, []))
        if m.role != "tool" and sum(len(t) for t in sides[-1][1]) < 4000:
            sides[-1][1].append(m.text[:4000])
        seg_of.append(len(sides) - 1)
    return [None if k is None or k + 1 >= len(sides) else "\n".join(sides[k + 1][1]) for k in seg_of]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool", "system", "developer"]),
                          st.sampled_from(["", "ok", "x" * 1500, "y" * 3999, "z" * 5000])), max_size=40))
def test_next_turns_keeps_its_sum_instead_of_recounting_it(turns):
    """The sum of what a side said is kept as it grows (a run of 100,000 messages without text
    recounted it per message: quadratic); the replies are the reference's."""
    from compactor_cli.backends.extractive import _next_turns
    from compactor_cli.backends.messages import Msg

    msgs = [Msg(role, text, role, []) for role, text in turns]
    assert _next_turns(msgs) == _next_turns_reference(msgs)
