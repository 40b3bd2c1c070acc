"""Answers of real models: tolerant reading, the repair turn, structured output.

The realistic distribution of messy answers is fixtures/llm-answers/: 23 requests xcompact
sent to Qwen2.5-Coder-0.5B-Instruct (llama.cpp) and its raw answers, replayed by the loopback
server (``chat_server.Replay``) for the 10 conversations they came from. Everything runs
against a real HTTP server on 127.0.0.1; the openai client is never patched."""

from __future__ import annotations

import re

import orjson
import pytest
from chat_server import ChatServer, Replay, Reply, json_summary, markdown_only, summary_text
from helpers import FIXTURES, long_conv, read_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_runs import SECRET, run, summarize_once, write_convs

from compactor_cli.backends import SummaryRequest
from compactor_cli.backends.dialects import SUMMARY_SCHEMA
from compactor_cli.backends.openai_backend import ANTI_LOOP_PENALTY, ECHOED_SECRET, OpenAIBackend, OpenAIOptions
from compactor_cli.backends.repair_turns import REPAIR_OMITTED
from compactor_cli.backends.sections import SECTIONS, canonical_summary, parse_sections, read_answer, render_sections
from compactor_cli.cli import cli
from compactor_cli.errors import BackendError
from compactor_cli.model.tokens import TokenCounter
from compactor_cli.tiers.cut import compaction_note

ANSWERS = FIXTURES / "llm-answers"


def recording() -> list[dict]:
    return [orjson.loads(line) for line in (ANSWERS / "qwen2.5-coder-0.5b.jsonl").read_bytes().splitlines()]


def groups() -> list[list[int]]:
    return [item["exchanges"] for item in orjson.loads((ANSWERS / "index.json").read_bytes()) if item["exchanges"]]


def answer(i: int) -> str:
    return recording()[i]["response"]["choices"][0]["message"]["content"]


def squash(sections: dict[str, str]) -> dict[str, str]:
    return {k: " ".join(v.split()) for k, v in sections.items()}


# ---------------------------------------------------------------- tolerant reading

def test_recorded_answers_are_read_as_the_model_meant():
    readings = [read_answer(answer(i)) for i in range(23)]
    assert {i for i, r in enumerate(readings) if r.complete} == {8, 16, 18, 20, 21}
    # "User Preferences and Constraints" and "Decisions Taken" are the sections they name
    r19 = readings[19]
    assert r19.sections["user_preferences"].startswith("The conversation is designed to be user-friendly")
    assert r19.sections["decisions"].startswith("- The agent will first obtain")
    assert r19.missing == ["tone_context"]
    # the merge that copied both partial summaries: the repeated sections are named, not guessed at
    assert readings[17].repeated == ["system_context", "overview", "key_facts", "pending_tasks"]
    # "## Domain Basic" names no section: a preamble (answer 18) or nothing at all (answer 14)
    assert readings[18].complete and readings[18].sections["system_context"].startswith("The conversation is about booking")
    assert readings[14].sections == {} and readings[14].missing == list(SECTIONS)
    # a list item with a bold label naming a section is content, not a heading
    assert "- **User Preferences**: The conversation focuses" in readings[10].sections["key_facts"]
    assert readings[10].missing == ["user_preferences", "decisions", "tone_context"]
    # numbered bold items inside a section are content too
    assert "1. **Finding the Flag**" in readings[5].sections["overview"]


def _restyle(text: str, style: str) -> str:
    """Answer 8 (complete, '## Title Case') with its headings written another way."""
    def heading(m: re.Match) -> str:
        title = m.group(1)
        k = SECTIONS.index(parse_title(title)) + 1
        return {"bold": f"**{title}**", "numbered": f"{k}. {title}", "bold numbered": f"**{k}. {title}:**",
                "numbered bold": f"{k}. **{title}**", "label": f"{title}:", "snake": f"## {parse_title(title)}",
                "level 4": f"#### {title}", "level 1 numbered": f"# {k}) {title}", "upper": f"## {title.upper()}",
                "hyphen": f"### {title.lower().replace(' ', '-')}", "closing hashes": f"## {title} ##"}[style]
    return re.sub(r"^## (.+)$", heading, text, flags=re.M)


def parse_title(title: str) -> str:
    return title.lower().replace(" ", "_")


STYLES = ["bold", "numbered", "bold numbered", "numbered bold", "label", "snake", "level 4", "level 1 numbered", "upper",
          "hyphen", "closing hashes"]


@pytest.mark.parametrize("style", STYLES)
def test_any_heading_style_reads_the_same_sections(style):
    reference = read_answer(answer(8))
    reading = read_answer(_restyle(answer(8), style))
    assert reading.complete and squash(reading.sections) == squash(reference.sections)
    assert canonical_summary(_restyle(answer(8), style)) == render_sections(reference.sections)


@pytest.mark.parametrize("wrap", ["preamble", "fence", "fence after preamble", "think", "reordered", "inline labels",
                                  "crlf"])
def test_wrapped_reordered_or_inline_answers_read_the_same(wrap):
    text = answer(8)
    reference = squash(read_answer(text).sections)
    if wrap == "preamble":
        text = "Sure! Here is the summary of the conversation you asked for:\n\n" + text
    elif wrap == "fence":
        text = "```markdown\n" + text + "\n```"
    elif wrap == "fence after preamble":
        text = "Here it is:\n\n```\n" + text + "\n```\nLet me know if you need more."
        reference["tone_context"] += " Let me know if you need more."  # text after the last section is its content
    elif wrap == "think":
        text = "<think>\nThe user wants eight sections. ## Overview should be short.\n</think>\n" + text
    elif wrap == "reordered":
        blocks = re.split(r"\n(?=## )", text)
        text = "\n".join(reversed(blocks))
    elif wrap == "inline labels":
        text = re.sub(r"^## (.+)\n", r"**\1:** ", text, flags=re.M)
    elif wrap == "crlf":
        text = text.replace("\n", "\r\n")
    reading = read_answer(text)
    assert reading.complete and squash(reading.sections) == reference
    assert list(parse_sections(text)) == list(SECTIONS)  # canonical order whatever the answer's order


def test_code_inside_a_section_is_content():
    text = summary_text().replace("key_facts of the planted facts",
                                  "Ran:\n```sh\n# install\n## Overview of the build\npip install .\n```\nIt worked.")
    sections = parse_sections(text)
    assert "## Overview of the build" in sections["key_facts"] and sections["overview"] == "overview of the planted facts"


@pytest.mark.parametrize("text, error", [
    (summary_text().replace("## tone_context\ntone_context of the planted facts", ""), "lacks the section tone_context"),
    (summary_text() + "\n\n## Overview\nagain", "repeats the section overview"),
    ("I'm sorry, I cannot help with that.", "lacks the sections system_context, overview"),
    ("", "the summary is empty"),
    ("{\"overview\": \"cut off", "not a valid JSON object"),
])
def test_what_cannot_be_read_is_an_error_not_a_guess(text, error):
    with pytest.raises(BackendError, match=re.escape(error)):
        parse_sections(text)


def test_json_answers_read_as_the_eight_sections():
    as_markdown = canonical_summary(summary_text())
    assert canonical_summary(json_summary()) == as_markdown
    assert canonical_summary("```json\n" + json_summary() + "\n```") == as_markdown
    titled = orjson.dumps({s.replace("_", " ").title(): f"{s} of the planted facts" for s in reversed(SECTIONS)}).decode()
    assert canonical_summary(titled) == as_markdown
    nested = orjson.loads(json_summary())
    nested["key_facts"] = ["one", "two"]
    sections = parse_sections(orjson.dumps({"summary": nested}).decode())
    assert sections["key_facts"] == "- one\n- two"
    reading = read_answer(json_summary(drop=("tone_context", "decisions")))
    assert reading.form == "json" and reading.missing == ["decisions", "tone_context"]


_LINES = st.sampled_from(["## Overview", "### key facts", "**Decisions**", "1. Overview", "Tone:", "```", "```python",
                          "- item", "# comment", "text with words", "", "<think>", "{\"a\": 1}", "## Notes"])


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(SECTIONS), st.lists(_LINES, max_size=6).map("\n".join)))
def test_the_canonical_summary_reads_back_as_itself(bodies):
    text = render_sections(bodies)
    assert canonical_summary(text) == text
    assert [line for line in text.splitlines() if line.startswith("## ") and line[3:] in SECTIONS] == \
        [f"## {s}" for s in SECTIONS] or any("```" in b for b in bodies.values())


# ---------------------------------------------------------------- the recorded model, replayed

NOTE_TOKENS = TokenCounter().text(compaction_note(12, 6, 1)) + 2  # what the driver keeps free for the note


def replay_run(runner, tmp_path, repair, *extra, handler=None):
    rec = recording()
    replay = Replay(rec, groups(), repair=repair)
    src = ANSWERS / "conversations.jsonl"
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    with ChatServer(handler(replay) if handler else replay) as server:
        # as recorded: the system prompt replaced (sent to the model), a 600-token summary asked for
        # (the compaction note's tokens count in --max-summary-tokens, so it is that much larger); the
        # recording predates the task kept verbatim and the evidence section, which change the request
        res = runner.invoke(cli, ["summarize", "--backend", "openai", "--base-url", server.base_url, "--summary-model", "local",
                                  "--keep-recent", "6", "--summary-input-tokens", "4000", "--replace-system",
                                  "--max-summary-tokens", str(600 + NOTE_TOKENS),
                                  "--no-cache", "--concurrency", "1", "--no-keep-task", "--no-evidence",
                                  "--keep-user-tokens", "0",
                                  *extra, str(src), "-o", str(out),
                                  "--report", str(report)])
    doc = orjson.loads(report.read_bytes())
    return res, doc, replay, server, src.read_bytes().splitlines(), out.read_bytes().splitlines()


@pytest.mark.parametrize("repair, summarized", [("again", 3), ("nearest", 5), ("sections", 8), ("scripted", 9)])
def test_recorded_answers_replay(runner, tmp_path, repair, summarized):
    """The 10 recorded conversations (9 with a head) against the model's own recorded answers.
    The recording holds no answer to a repair turn: ``repair`` says what answers it (see Replay)."""
    res, doc, replay, server, lines_in, lines_out = replay_run(runner, tmp_path, repair, "--structured", "markdown")
    assert replay.unmatched == 0  # every first request is one the model was recorded answering
    statuses = [i["status"] for i in doc["items"]]
    assert statuses.count("NOTHING_TO_CONDENSE") == 1
    # every conversation with a head is summarised: by the model, or, where its answer could not be
    # used even after the repair turn, by the offline sections of the same head (the item says so)
    assert statuses.count("SUMMARIZED") == 9, [(i["line"], i.get("error")) for i in doc["items"]]
    unusable = [i for i in doc["items"] if "could not be used" in i.get("self_check", "")]
    assert len(doc["items"]) - 1 - len(unusable) == summarized, [(i["line"], i.get("self_check")) for i in unusable]
    for item, before, after in zip(doc["items"], lines_in, lines_out):
        if item["status"] == "SUMMARIZED":
            content = orjson.loads(after)["messages"][0]["content"]
            assert list(parse_sections(content.split("\n\n[Compaction note")[0])) == list(SECTIONS)
            assert item["summary_tokens"] <= 600
            if item in unusable:
                assert item["fallback"] == "extractive" and "(after a repair turn)" in item["self_check"]
        else:
            assert after == before  # nothing to do: byte for byte as it was
    assert replay.repairs == 6  # one repair turn for each conversation the answers alone could not summarise
    # the two recorded answers cut off at the token limit are asked again once (frequency_penalty);
    # the replay answers as recorded, so they are cut off again
    cut = sum(1 for e in recording() if e["response"]["choices"][0].get("finish_reason") == "length")
    assert cut == 2 and len(server.requests) == 23 + cut + 6


def test_without_repair_tolerant_reading_alone_summarises_what_is_complete():
    """Every recorded final answer, read tolerantly, with no second turn: the three that hold all
    eight sections (one of them only under a preamble heading the strict parser skipped too)."""
    rec = recording()
    finals = [g[-1] for g in groups()]
    assert sorted(i for i in finals if read_answer(answer(i)).complete) == [8, 18, 20]
    assert len(finals) == 9 and all(rec[i]["status"] == 200 for i in finals)


def test_recorded_answers_behind_a_server_without_structured_output(runner, tmp_path):
    """--structured auto (the default) against a server that rejects response_format: one refused
    request, then markdown for the rest of the run, replayed exactly as recorded."""
    res, doc, replay, server, _, _ = replay_run(runner, tmp_path, "scripted", handler=markdown_only)
    assert [i["status"] for i in doc["items"]].count("SUMMARIZED") == 9
    assert replay.unmatched == 0
    assert sum("response_format" in r for r in server.requests) == 1  # once per run, not per conversation
    assert len(server.requests) == 1 + 23 + 2 + 6  # the two cut-off answers asked again once
    (line,) = [x for x in res.stderr.splitlines() if "structured output" in x]
    assert line.startswith("warning: the server rejected structured output as json_schema (server error 400")
    assert line.endswith("--structured auto asks for markdown for the rest of this run")


# ---------------------------------------------------------------- the repair turn

def _backend(server, **kw) -> OpenAIBackend:
    return OpenAIBackend(OpenAIOptions(model="m", base_url=server.base_url, retries=0, **kw), TokenCounter().text)


def test_a_repair_turn_asks_for_exactly_the_missing_sections_in_the_same_chat(runner, tmp_path):
    first = summary_text().split("\n\n## open_questions")[0]  # lacks open_questions and tone_context
    fix = "## Open Questions\nwhich seat?\n\n## Tone Context\nfriendly"
    replies = {2: Reply(content=first), 4: Reply(content=fix)}
    with ChatServer(lambda req: replies[len(req["messages"])]) as server:
        res, out, doc = run(runner, server, src := write_convs(tmp_path)[0], tmp_path, "--structured", "markdown")
        chat = server.requests
    item = doc["items"][0]
    assert item["status"] == "SUMMARIZED" and item["model_calls"] == 2
    assert item.get("repaired", True)  # the report says so once tier2.py passes Answer.repaired on
    assert len(chat) == 2 and chat[1]["messages"][:2] == chat[0]["messages"]
    assert chat[1]["messages"][2] == {"role": "assistant", "content": first}
    repair = chat[1]["messages"][3]["content"]
    assert "lacks the sections open_questions, tone_context" in repair
    assert "Write only the missing sections" in repair and "'## open_questions', '## tone_context'" in repair
    summary = read_jsonl(out)[0]["messages"][0]["content"]
    assert "## open_questions\nwhich seat?\n\n## tone_context\nfriendly" in summary
    assert "## overview\noverview of the planted facts" in summary  # the sections already written stay
    # the backend says so (the report item records it once tier2.py passes Answer.repaired on)
    with ChatServer(lambda req: replies[len(req["messages"])]) as server:
        got = summarize_once(_backend(server, structured="markdown"),
                             SummaryRequest(read_jsonl(src)[0]["messages"][1:20], "", 1024))
    assert got.repaired and got.calls == 2 and got.structured == "markdown"


def test_a_cut_off_answer_loses_its_last_section_and_is_rewritten_shorter(runner, tmp_path):
    """Cut off at the token limit: asked again once with frequency_penalty (a loop, most often);
    cut off again: the repair turn, with the penalty too."""
    cut = summary_text().rsplit(" of the planted facts", 1)[0]  # stops inside tone_context
    replies = {2: Reply(content=cut, finish_reason="length"), 4: Reply(content=summary_text("a shorter summary"))}
    with ChatServer(lambda req: replies[len(req["messages"])]) as server:
        res, out, doc = run(runner, server, write_convs(tmp_path)[0], tmp_path, "--structured", "markdown",
                            "--max-summary-tokens", "300", "--no-evidence")  # the model's budget: all 300 less the note
        first, again, repair_req = server.requests
    assert "frequency_penalty" not in first
    assert again["frequency_penalty"] == ANTI_LOOP_PENALTY and again["messages"] == first["messages"]
    assert repair_req["frequency_penalty"] == ANTI_LOOP_PENALTY
    repair = repair_req["messages"][3]["content"]
    assert doc["items"][0]["status"] == "SUMMARIZED"
    assert "your answer was cut off at the token limit" in repair and "lacks the section tone_context" in repair
    assert "Write the whole summary again" in repair and f"at most {300 - NOTE_TOKENS} tokens" in repair
    assert "tone_context of a shorter summary" in read_jsonl(out)[0]["messages"][0]["content"]


def test_a_loop_broken_by_the_penalty_needs_no_repair_turn():
    looping = "## overview\n" + "The agent looks up the reservation. " * 200

    def respond(req: dict) -> Reply:
        if "frequency_penalty" in req:
            return Reply(content=summary_text("the reservation"))
        return Reply(content=looping, finish_reason="length")

    head = [{"role": "user", "content": f"step {i} " + "words " * 40} for i in range(6)]
    with ChatServer(respond) as server:
        got = summarize_once(_backend(server, structured="markdown"), SummaryRequest(head, "", 600))
    assert got.calls == 2 and not got.repaired and "overview of the reservation" in got.text


def test_a_server_that_refuses_frequency_penalty_is_asked_without_it_for_the_rest_of_the_run():
    """OpenAI's reasoning models refuse frequency_penalty (400 naming it): the cut-off answer
    goes to the repair turn as before, and no later request carries the penalty."""
    def respond(req: dict) -> Reply:
        if "frequency_penalty" in req:
            return Reply(status=400, error="Unsupported parameter: 'frequency_penalty' is not supported with this model.")
        if len(req["messages"]) == 2:
            return Reply(content=summary_text().rsplit(" of the planted facts", 1)[0], finish_reason="length")
        return Reply(content=summary_text("a shorter summary"))

    head = [{"role": "user", "content": f"step {i} " + "words " * 40} for i in range(6)]
    with ChatServer(respond) as server:
        backend = _backend(server, structured="markdown")
        got = summarize_once(backend, SummaryRequest(head, "", 600))
        again = summarize_once(backend, SummaryRequest(head, "", 600))
        bodies = server.requests
    assert got.repaired and "tone_context of a shorter summary" in got.text and again.repaired
    # first run: the answer, the refused re-ask and the same request without the penalty, the
    # repair; second run: the answer and the repair, never the penalty again
    assert [("frequency_penalty" in b) for b in bodies] == [False, True, False, False, False, False]


def test_a_repair_answer_that_still_fails_gives_the_offline_sections_or_fails_unchanged(runner, tmp_path):
    """After the one repair turn: an answer still unusable (repeated, cut off) gives the extractive
    sections of the same head; a server error or an echoed key fails the conversation unchanged."""
    src, _ = write_convs(tmp_path)
    cases = {
        "repeated twice": lambda req: Reply(content=summary_text() + "\n\n## Overview\nagain"),
        "cut off twice": lambda req: Reply(content=summary_text(), finish_reason="length"),
        "repair answer is an error": lambda req: (Reply(content="## overview\nonly") if len(req["messages"]) == 2
                                                  else Reply(status=500, headers={"retry-after": "0"}, error="boom")),
        "echo in the repair": lambda req: (Reply(content="## overview\nonly") if len(req["messages"]) == 2
                                           else Reply(content=summary_text(f"key {req['_auth']}"))),
    }
    reasons = {"repeated twice": "repeats the section overview (after a repair turn)",
               "cut off twice": "the repair answer was cut off at the token limit; the summary lacks the section tone_context",
               "repair answer is an error": "server error 500", "echo in the repair": ECHOED_SECRET}
    for name, handler in cases.items():
        with ChatServer(handler) as server:
            res, out, doc = run(runner, server, src, tmp_path, "--structured", "markdown", "--retries", "0",
                                env={"OPENAI_API_KEY": SECRET})
        item = doc["items"][0]
        if name in ("repeated twice", "cut off twice"):  # answered, but unusable: the offline sections
            assert item["status"] == "SUMMARIZED" and item["fallback"] == "extractive", (name, item)
            assert reasons[name] in item["self_check"], (name, item)
        else:
            assert item["status"] == "SUMMARIZE_FAILED" and reasons[name] in item["error"], (name, item)
            assert out.read_bytes() == src.read_bytes(), name
        # one repair turn, never a second (a cut-off answer is asked again once first)
        assert len(server.requests) == (3 if name == "cut off twice" else 2), name
        assert SECRET not in out.read_text() + (tmp_path / "report.json").read_text() + res.stderr


def test_the_repair_turn_leaves_the_transcript_out_when_the_chat_would_not_fit():
    head = [{"role": "user", "content": f"part {i} " + "lorem ipsum dolor sit amet " * 60} for i in range(3)]
    first = summary_text(filler_words=150).split("\n\n## tone_context")[0]
    replies = {2: Reply(content=first), 4: Reply(content="## Tone Context\nterse")}
    with ChatServer(lambda req: replies[len(req["messages"])]) as server:
        got = summarize_once(_backend(server, structured="markdown", summary_input_tokens=1500),
                             SummaryRequest(head, "", 400))
        first_req, repair_req = server.requests
    assert got.repaired and "## tone_context\nterse" in got.text
    assert "<transcript>" in first_req["messages"][1]["content"]
    assert repair_req["messages"][1]["content"] == REPAIR_OMITTED
    counter = TokenCounter()
    assert sum(counter.text(m["content"]) for m in repair_req["messages"]) + 400 < 1500


def test_a_repaired_summary_is_cached_as_written(runner, tmp_path):
    src, _ = write_convs(tmp_path)
    replies = {2: Reply(content=summary_text().split("\n\n## tone_context")[0]), 4: Reply(content="## tone_context\ncalm")}
    with ChatServer(lambda req: replies[len(req["messages"])]) as server:
        args = ["--structured", "markdown", "--cache-dir", str(tmp_path / "cache")]
        run(runner, server, src, tmp_path, *args)
        first = (tmp_path / "out.jsonl").read_bytes()
        res, out, doc = run(runner, server, src, tmp_path, *args)
        assert len(server.requests) == 2 and doc["items"][0]["cached"] and out.read_bytes() == first


# ---------------------------------------------------------------- structured output

def test_json_mode_sends_the_schema_and_writes_the_same_summary_as_markdown(runner, tmp_path):
    src, _ = write_convs(tmp_path)
    with ChatServer(lambda req: Reply(content=json_summary())) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--structured", "json")
        (req,) = server.requests
    as_json = out.read_bytes()
    assert doc["items"][0]["status"] == "SUMMARIZED", doc["items"][0]
    fmt = req["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SUMMARY_SCHEMA
    assert fmt["json_schema"]["schema"]["required"] == list(SECTIONS)
    assert "one JSON object" in req["messages"][0]["content"]
    with ChatServer() as server:
        run(runner, server, src, tmp_path, "--structured", "markdown")
        assert "response_format" not in server.requests[0]
        assert req["max_tokens"] == server.requests[0]["max_tokens"] + 100  # room for the JSON syntax
    assert out.read_bytes() == as_json  # the same canonical markdown either way


def test_auto_uses_json_when_the_server_takes_it(runner, tmp_path):
    src, _ = write_convs(tmp_path, n=2)
    with ChatServer(lambda req: Reply(content=json_summary() if "response_format" in req else "no")) as server:
        res, out, doc = run(runner, server, src, tmp_path)
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZED"] * 2
    assert all("response_format" in r for r in server.requests) and len(server.requests) == 2
    assert "structured output" not in res.stderr


def test_auto_falls_back_to_markdown_once_per_run(runner, tmp_path):
    src, _ = write_convs(tmp_path, n=3)
    with ChatServer(markdown_only()) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--concurrency", "1")
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZED"] * 3
    assert [("response_format" in r) for r in server.requests] == [True, False, False, False]
    assert [i["model_calls"] for i in doc["items"]] == [2, 1, 1]
    assert sum("rejected structured output" in line for line in res.stderr.splitlines()) == 1


def test_explicit_json_does_not_fall_back(runner, tmp_path):
    src, _ = write_convs(tmp_path, n=2)
    with ChatServer(markdown_only()) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--structured", "json")
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZE_FAILED"] * 2  # a refusal is not retried
    assert "use --structured auto" in doc["items"][0]["error"] and "server error 400" in doc["items"][0]["error"]
    assert len(server.requests) == 2 and out.read_bytes() == src.read_bytes()


def test_a_context_length_error_is_no_reason_to_leave_json(runner, tmp_path):
    src, _ = write_convs(tmp_path)
    refuse = lambda req: Reply(status=400, error="This model's maximum context length is 8192 tokens.")  # noqa: E731
    with ChatServer(refuse) as server:
        res, out, doc = run(runner, server, src, tmp_path)
    assert doc["items"][0]["status"] == "SUMMARIZE_FAILED" and "maximum context length" in doc["items"][0]["error"]
    # the window it names is learnt (one more request, chunked to it), never taken for a refusal of json
    assert len(server.requests) == 2 and "structured output" not in res.stderr
    assert all("response_format" in r for r in server.requests)
    assert "the server's context window is 8192 tokens" in res.stderr


def test_a_json_answer_missing_a_field_is_repaired_in_json(runner, tmp_path):
    replies = {2: Reply(content=json_summary(drop=("tone_context",))), 4: Reply(content=json_summary("the fix"))}
    with ChatServer(lambda req: replies[len(req["messages"])]) as server:
        res, out, doc = run(runner, server, write_convs(tmp_path)[0], tmp_path, "--structured", "json")
        first, repair = server.requests
    assert doc["items"][0]["status"] == "SUMMARIZED" and doc["items"][0]["model_calls"] == 2
    # only the missing field is asked for, constrained to it; the fields written stay
    assert "lacks the field tone_context" in repair["messages"][3]["content"]
    assert repair["response_format"]["json_schema"]["schema"]["required"] == ["tone_context"]
    assert repair["messages"][2]["content"] == orjson.dumps(
        {s: v for s, v in orjson.loads(json_summary(drop=("tone_context",))).items()}).decode()
    summary = read_jsonl(out)[0]["messages"][0]["content"]
    assert "## tone_context\ntone_context of the fix" in summary and "overview of the fix" not in summary


def test_a_server_that_ignores_response_format_is_still_read(runner, tmp_path):
    src, _ = write_convs(tmp_path)
    with ChatServer() as server:  # answers markdown whatever it is asked
        res, out, doc = run(runner, server, src, tmp_path, "--structured", "json")
    assert doc["items"][0]["status"] == "SUMMARIZED" and len(server.requests) == 1


def test_chunked_json_partials_are_merged_as_markdown(runner, tmp_path):
    conv = long_conv(rounds=60, size=3000)
    src = tmp_path / "big.json"
    src.write_bytes(orjson.dumps(conv))
    with ChatServer(lambda req: Reply(content=json_summary()), context_window=8000) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--summary-input-tokens", "7000", "--structured", "json")
        merges = [r for r in server.requests if "<partial_summaries>" in r["messages"][1]["content"]]
    assert doc["items"][0]["status"] == "SUMMARIZED" and merges
    assert "## key_facts\nkey_facts of the planted facts" in merges[0]["messages"][1]["content"]
    assert '{"system_context"' not in merges[0]["messages"][1]["content"]


# ---------------------------------------------------------------- dialects and early stops

def llama_cpp_python_like(handler=None):
    """What llama-cpp-python 0.3.36 answers (tests/test_real_llm.py checks the real one): HTTP 500
    naming response_format.type for json_schema; json_object with a schema taken."""
    def respond(req):
        fmt = req.get("response_format")
        if fmt and fmt.get("type") == "json_schema":
            return Reply(status=500, error="1 validation error: {'type': 'literal_error', 'loc': ('body', "
                                           "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                                           "'json_object'\", 'input': 'json_schema'}")
        return Reply(content=json_summary() if fmt else summary_text())
    return respond


def test_auto_negotiates_once_with_conversations_in_flight(runner, tmp_path):
    src, _ = write_convs(tmp_path, n=6)
    with ChatServer(llama_cpp_python_like(), latency=0.2) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--concurrency", "4")
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZED"] * 6
    kinds = [(r.get("response_format") or {}).get("type") for r in server.requests]
    assert kinds.count("json_schema") == 1 and kinds.count("json_object") == 6  # one refusal per run
    assert server.max_in_flight > 1  # once settled, conversations go concurrently again
    assert {i["structured"] for i in doc["items"]} == {"json_object"}
    (line,) = [x for x in res.stderr.splitlines() if "structured output" in x]
    assert "as json_schema (server error 500" in line and "asks for json_object" in line


@pytest.mark.parametrize("status, error", [(401, "Incorrect API key provided"), (404, "model 'nope' not found")])
def test_the_same_refusal_for_every_conversation_stops_the_run_early(runner, tmp_path, status, error):
    src, _ = write_convs(tmp_path, n=6)
    with ChatServer(lambda req: Reply(status=status, error=error)) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--concurrency", "1", "--retries", "4",
                            "--structured", "markdown")
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZE_FAILED"] * 6 and res.exit_code == 1
    assert len(server.requests) == 3  # not retried (not transient), and not sent after three alike
    assert all(error in i["error"] for i in doc["items"])
    assert all(i["error"].startswith("not sent") and i["model_calls"] == 0 for i in doc["items"][3:])
    assert sum("in a row with the same error" in x for x in res.stderr.splitlines()) == 1
    assert out.read_bytes() == src.read_bytes()


def test_transient_failures_are_retried_and_do_not_stop_the_run(runner, tmp_path):
    src, _ = write_convs(tmp_path, n=4)
    seen: dict[str, int] = {}

    def flaky(req):  # every request fails once with 503, then is answered
        key = orjson.dumps(req["messages"]).decode()
        seen[key] = seen.get(key, 0) + 1
        return Reply(status=503, error="overloaded") if seen[key] == 1 else Reply(content=summary_text())
    with ChatServer(flaky) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--concurrency", "1", "--structured", "markdown")
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZED"] * 4
    calls = [i["model_calls"] for i in doc["items"]]
    assert all(c % 2 == 0 for c in calls) and sum(calls) == len(server.requests)  # each request retried once


def test_a_multi_line_server_error_is_one_line_everywhere(runner, tmp_path):
    src, _ = write_convs(tmp_path, n=2)
    error = "1 validation error:\n  {'loc': ('body', 'response_format', 'type')}\n\n  File \"app.py\", line 376"
    with ChatServer(markdown_only(error=error)) as server:
        res, out, doc = run(runner, server, src, tmp_path)
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZED"] * 2
    (line,) = [x for x in res.stderr.splitlines() if "structured output" in x]
    assert "{'loc': ('body', 'response_format', 'type')} File" in line and line.endswith("for the rest of this run")
