"""A JSON summary cut off in a loop keeps what comes before the loop; the repair turn asks only
for the fields still missing, and never shows the model its loop (issue 14: long Claude Code
heads looped past the frequency penalty, and so did the repair turn that saw the loop)."""

from __future__ import annotations

import orjson
from chat_server import ChatServer, Reply
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_runs import summarize_once

from compactor_cli.backends import SummaryRequest
from compactor_cli.backends.dialects import MAX_FIELD_CHARS, MIN_FIELD_CHARS, field_chars
from compactor_cli.backends.openai_backend import ANTI_LOOP_PENALTY, OpenAIBackend, OpenAIOptions
from compactor_cli.backends.repair_turns import MISSING_TURNS
from compactor_cli.backends.salvage import read_bounded, salvage_json, salvaged_reading, trim_loop
from compactor_cli.backends.sections import SECTIONS
from compactor_cli.errors import BackendError
from compactor_cli.model.tokens import TokenCounter

LOOP = "- The agent reads the file src/app.py to find the bug.\n"


def looping_answer(kept: int = 2) -> str:
    """A JSON answer whose field after the first ``kept`` ones loops until the token limit."""
    head = {s: f"{s} before the loop" for s in SECTIONS[:kept]}
    looped = SECTIONS[kept]
    text = orjson.dumps(head).decode()[:-1] + f',"{looped}":"- The agent opened the repository.\\n'
    return text + (LOOP.replace("\n", "\\n") * 40) + "- The agent rea"


# ---------------------------------------------------------------- reading a cut-off answer

@settings(deadline=None)
@given(st.lists(st.text(max_size=40), min_size=8, max_size=8), st.integers(min_value=0, max_value=10_000))
def test_any_cut_keeps_every_complete_field_exactly_and_a_prefix_of_the_cut_one(values, cut_at):
    original = dict(zip(SECTIONS, values, strict=True))
    whole = orjson.dumps(original).decode()
    cut = whole[:cut_at % (len(whole) + 1)]
    # where each field's value ends in the JSON text
    ends = [len(orjson.dumps(dict(zip(SECTIONS[:i + 1], values[:i + 1], strict=True))).decode()) - 1 for i in range(8)]
    fields, partial, rest = salvage_json(cut)
    assert fields == {s: original[s].strip() for s, end in zip(SECTIONS, ends, strict=True) if end <= len(cut)}
    if partial is not None:
        assert partial == SECTIONS[len(fields)] and original[partial].startswith(rest)
    else:  # cut outside a value: nothing of the next field was written yet
        nxt = len(fields)
        assert nxt == 8 or f'"{SECTIONS[nxt]}":"' not in cut


def test_a_loop_is_cut_where_it_starts_repeating():
    text = "- one fact.\n- two facts.\n" + "- the same again.\n" * 30 + "- the sa"
    assert trim_loop(text) == "- one fact.\n- two facts.\n- the same again."
    # a sentence loop inside one line, with no newline at all
    assert trim_loop("The agent runs pytest. The agent reads app.py. " * 50) == \
        "The agent runs pytest. The agent reads app.py."
    # text that does not repeat loses only the unit the model did not finish
    assert trim_loop("First. Second. Thi") == "First. Second."
    assert trim_loop("First. Second.", cut=False) == "First. Second."


def test_the_salvaged_reading_names_what_is_missing():
    reading, cut_field = salvaged_reading(looping_answer(kept=2))
    assert cut_field == "key_facts" and reading.missing == list(SECTIONS[3:])
    assert reading.sections["key_facts"] == "- The agent opened the repository.\n" + LOOP.strip()
    assert salvaged_reading('{"overv') is None and salvaged_reading("no json at all") is None


# ---------------------------------------------------------------- the repair turns

def _backend(server) -> OpenAIBackend:
    return OpenAIBackend(OpenAIOptions(model="m", base_url=server.base_url, retries=0, structured="json_object"),
                         TokenCounter().text)


HEAD = [{"role": "user", "content": f"step {i} " + "words " * 40} for i in range(6)]


def test_a_loop_that_survives_the_penalty_is_trimmed_and_only_the_missing_fields_are_asked_for():
    def respond(req: dict) -> Reply:
        if len(req["messages"]) == 2:  # the answer, and its re-ask with the penalty: both loop
            return Reply(content=looping_answer(kept=2), finish_reason="length")
        asked = req["response_format"]["schema"]["required"]
        return Reply(content=orjson.dumps({s: f"{s} from the repair" for s in asked}).decode())

    with ChatServer(respond) as server:
        got = summarize_once(_backend(server), SummaryRequest(HEAD, "", 600))
        first, again, repair = server.requests
    assert got.calls == 3 and got.repaired
    assert again["frequency_penalty"] == ANTI_LOOP_PENALTY
    # constrained to the five missing fields; the chat shows the kept fields, not the loop
    assert repair["response_format"]["schema"]["required"] == list(SECTIONS[3:])
    shown = orjson.loads(repair["messages"][2]["content"])
    assert list(shown) == list(SECTIONS[:3]) and LOOP.strip() in shown["key_facts"]
    assert shown["key_facts"].count("reads the file") == 1
    assert "lacks the fields user_preferences, decisions" in repair["messages"][3]["content"]
    assert repair["max_tokens"] < first["max_tokens"]
    assert "## key_facts\n- The agent opened the repository.\n" + LOOP.strip() + "\n\n## user_preferences\n" \
        "user_preferences from the repair" in got.text
    assert "overview before the loop" in got.text and got.text.count("reads the file") == 1


def test_a_repair_that_loops_too_is_salvaged_and_asked_again_until_no_field_is_added():
    def respond(req: dict) -> Reply:
        if len(req["messages"]) == 2:
            return Reply(content=looping_answer(kept=1), finish_reason="length")
        asked = req["response_format"]["schema"]["required"]
        # every repair completes one field and loops in the next
        text = orjson.dumps({asked[0]: "done"}).decode()[:-1] + f',"{asked[1]}":"' if len(asked) > 1 else ""
        if not text:
            return Reply(content=orjson.dumps({asked[0]: "done"}).decode())
        return Reply(content=text + "- same line.\\n" * 30, finish_reason="length")

    with ChatServer(respond) as server:
        try:
            summarize_once(_backend(server), SummaryRequest(HEAD, "", 600))
        except BackendError as exc:
            error = str(exc)
        else:
            error = ""
        requests = server.requests
    # the answer and its re-ask, then MISSING_TURNS repairs; each repair's loop is trimmed too
    assert len(requests) == 2 + MISSING_TURNS
    assert all(m["content"].count("same line") <= 2 for r in requests for m in r["messages"])
    asked = [r["response_format"]["schema"]["required"] for r in requests[2:]]
    assert asked == [list(SECTIONS[2:]), list(SECTIONS[4:])]  # each turn added two fields
    assert error == "the summary lacks the sections open_questions, tone_context (after a repair turn)"


# ---------------------------------------------------------------- fields bounded by maxLength

def test_json_object_requests_bound_every_field_and_json_schema_requests_do_not():
    """llama-cpp-python turns maxLength into its grammar; strict json_schema modes take only a
    subset of JSON Schema, so json_schema is sent as before."""
    requests = {}
    for mode in ("json_object", "json_schema"):
        with ChatServer(lambda req: Reply(content=orjson.dumps(dict.fromkeys(SECTIONS, "short.")).decode())) as server:
            backend = OpenAIBackend(OpenAIOptions(model="m", base_url=server.base_url, retries=0, structured=mode),
                                    TokenCounter().text)
            summarize_once(backend, SummaryRequest(HEAD, "", 600))
            requests[mode] = server.requests[0]
    req = requests["json_object"]
    caps = {p.get("maxLength") for p in req["response_format"]["schema"]["properties"].values()}
    assert caps == {field_chars(req["max_tokens"], 8)} and field_chars(req["max_tokens"], 8) >= 4 * 600 // 8
    schema = requests["json_schema"]["response_format"]["json_schema"]["schema"]
    assert all("maxLength" not in p for p in schema["properties"].values())


def test_a_field_stopped_by_its_cap_ends_at_its_last_whole_sentence():
    cap = 200
    full = ("The agent fixed the parser. " * 10)[:cap]  # stopped mid-sentence by the grammar
    assert len(full) == cap
    reading, _, _ = read_bounded(orjson.dumps({"overview": full, "key_facts": "A fact without a full stop",
                                               "decisions": ",", "tone_context": "Calm."}).decode(), False, cap)
    assert reading.sections["overview"] == "The agent fixed the parser."  # whole, and said once
    assert reading.sections["key_facts"] == "A fact without a full stop"  # under its cap: as written
    assert reading.sections["decisions"] == "" and reading.sections["tone_context"] == "Calm."
    ended = ("One. Two. Three. " * 20)[:cap - 1] + "."
    assert read_bounded(orjson.dumps({"overview": ended}).decode(), False, len(ended))[0].sections["overview"] \
        == "One. Two. Three."


@given(st.integers(min_value=1, max_value=1_000_000), st.integers(min_value=1, max_value=8))
def test_no_field_cap_is_one_a_llama_cpp_python_server_dies_of(max_tokens, n_fields):
    """Above about 1,000 characters, llama-cpp-python 0.3.36's grammar for maxLength is refused by
    its llama.cpp and the server process segfaults (the first benchmark run with the caps lost
    its server on a 1,074-token request); the default 1,024-token budget must stay below."""
    assert MIN_FIELD_CHARS <= field_chars(max_tokens, n_fields) <= MAX_FIELD_CHARS < 1000
