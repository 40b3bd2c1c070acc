"""Tier 2 against a real model server: llama-cpp-python's OpenAI-compatible server with
Qwen2.5-Coder-0.5B-Instruct on 127.0.0.1 (tests/llm/setup.sh installs both; .ci/run does).

Nothing is faked: the server refuses what it refuses, and the 0.5B model writes what it writes.
So these tests assert what a real model can be held to (the request accepted, the dialect
negotiated without retries, the output valid, within budget and restorable, or the input
untouched), never facts a model this small gets wrong. Prompts are a few hundred tokens: on 2
cores the model reads ~85 tokens/s and writes ~5-15. The full measurement is bench/bench_llm.py."""

from __future__ import annotations

import re
import subprocess
import sys

import orjson
import pytest
from helpers import FIXTURES
from llm import server as llm

from compactor_cli.backends.dialects import MAX_FIELD_CHARS, RESPONSE_FORMATS, response_format, window_of
from compactor_cli.backends.openai_backend import ANTI_LOOP_PENALTY
from compactor_cli.backends.sections import SECTIONS, parse_sections
from compactor_cli.model.checks import check_pairing

pytestmark = [pytest.mark.real_llm, pytest.mark.slow]


@pytest.fixture(scope="session")
def model_server():
    if llm.installed() is None:
        pytest.skip("real model server not installed: " + llm.SETUP_HINT)
    with llm.start(n_ctx=4096) as server:
        yield server


@pytest.fixture(scope="session")
def check_server():
    """A second instance with a 256-token context: it validates a request and applies the chat
    template, then refuses it for length without evaluating anything."""
    if llm.installed() is None:
        pytest.skip("real model server not installed: " + llm.SETUP_HINT)
    with llm.start(n_ctx=256) as server:
        yield server


def tau(line: int) -> bytes:
    return (FIXTURES / "taubench_airline_5.jsonl").read_bytes().splitlines()[line - 1] + b"\n"


def xcompact(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, text=True, timeout=1500,
                          env=env)


def posts(server: llm.LlamaServer) -> list[str]:
    """The status of every chat request the server has answered (its access log)."""
    with open(server.log_path, encoding="utf-8", errors="replace") as fh:
        return re.findall(r'"POST /v1/chat/completions HTTP/1.1" (\d{3})', fh.read())


def summarize(server, src, out, report, *extra):
    return xcompact("summarize", str(src), "--backend", "openai", "--base-url", server.base_url, "--model", "local",
                    "--seed", "0", "--no-cache", "-o", str(out), "--report", str(report), *extra)


def test_the_real_server_refuses_json_schema_as_the_issue_says(model_server):
    """The premise: llama-cpp-python 0.3.36 answers response_format json_schema with HTTP 500
    naming response_format.type, and takes json_object with a schema."""
    body = {"model": "local", "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4, "temperature": 0}
    status, answer = llm.chat(model_server.base_url, {**body, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}})
    assert status == 500 and "response_format" in orjson.dumps(answer).decode()
    assert "json_object" in orjson.dumps(answer).decode()
    status, _ = llm.chat(model_server.base_url, {**body, "response_format": {"type": "json_object", "schema": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}, "max_tokens": 12})
    assert status == 200


def test_the_real_server_takes_the_anti_loop_penalty_with_the_schema(model_server):
    """An answer cut off at the token limit (a loop, with this model) is asked again with
    frequency_penalty beside the json_object schema: the server takes both."""
    body = {"model": "local", "messages": [{"role": "user", "content": "Summarise: the user booked flight HAT136."}],
            "max_tokens": 8, "temperature": 0, "seed": 0, "response_format": RESPONSE_FORMATS["json_object"]}
    status, answer = llm.chat(model_server.base_url, body)
    assert status == 200 and answer["choices"][0]["finish_reason"] == "length"
    status, answer = llm.chat(model_server.base_url, {**body, "frequency_penalty": ANTI_LOOP_PENALTY})
    assert status == 200 and answer["choices"][0]["message"]["content"].startswith("{")


def test_the_real_server_bounds_each_field_by_its_max_length(model_server):
    """The premise of the field caps: llama-cpp-python turns maxLength into its grammar, so a
    field the model would go on writing (copying, looping) is closed and the next one written."""
    fields = ("story", "moral")
    ask = [{"role": "user", "content": "Write a long story about a cat, then its moral."}]
    body = {"model": "local", "messages": ask, "max_tokens": 200, "temperature": 0, "seed": 0,
            "response_format": response_format("json_object", fields)}
    body["response_format"]["schema"]["properties"] = {f: {"type": "string", "maxLength": 60} for f in fields}
    status, answer = llm.chat(model_server.base_url, body)
    assert status == 200 and answer["choices"][0]["finish_reason"] == "stop", answer
    got = orjson.loads(answer["choices"][0]["message"]["content"])
    assert list(got) == list(fields) and all(len(v) <= 60 for v in got.values())
    assert len(got["story"]) == 60  # the story was stopped by the cap, not by the model


def test_the_largest_field_caps_xcompact_sends_leave_the_real_server_alive(model_server):
    """A maxLength much above 1,000 makes llama-cpp-python 0.3.36 segfault (its grammar of nested
    groups is refused by llama.cpp, and the server process dies): the caps of the largest
    budget are taken, and the server answers the next request."""
    fmt = response_format("json_object", SECTIONS, 1_000_000)
    assert {p["maxLength"] for p in fmt["schema"]["properties"].values()} == {MAX_FIELD_CHARS}
    body = {"model": "local", "messages": [{"role": "user", "content": "Summarise: the user booked HAT136."}],
            "max_tokens": 4, "temperature": 0, "seed": 0, "response_format": fmt}
    assert llm.chat(model_server.base_url, body)[0] == 200
    assert llm.chat(model_server.base_url, {**body, "response_format": RESPONSE_FORMATS["json_object"]})[0] == 200


def test_defaults_summarise_a_real_run_with_the_negotiated_dialect(model_server, check_server, tmp_path):
    src, out, report = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "report.json"
    src.write_bytes(tau(1))
    before = len(posts(model_server))
    res = summarize(model_server, src, out, report, "--keep-recent", "24", "--max-summary-tokens", "400")
    item = orjson.loads(report.read_bytes())["items"][0]
    assert item["status"] == "SUMMARIZED", (item, res.stderr)
    assert res.returncode == 0
    # one refusal of json_schema (500, not retried), then json_object for the rest of the run
    statuses = posts(model_server)[before:]
    assert statuses[0] == "500" and statuses[1:] and set(statuses[1:]) == {"200"}, statuses
    assert item["structured"] == "json_object" and item["model_calls"] == len(statuses)
    (line,) = [x for x in res.stderr.splitlines() if "structured output" in x]
    assert "as json_schema" in line and "asks for json_object" in line
    dump = orjson.loads(out.read_bytes())
    system = dump["messages"][0]["content"]
    original = orjson.loads(src.read_bytes())["messages"]
    assert system.startswith(original[0]["content"] + "\n\n## system_context\n")  # the policy stays verbatim
    sections = parse_sections(system[len(original[0]["content"]) + 2:].split("\n\n[Compaction note")[0])
    assert list(sections) == list(SECTIONS)
    assert item["summary_tokens"] <= 400 and item["tokens_after"] < item["tokens_before"]
    assert not [p for p in check_pairing(dump["messages"]) if "used again" not in p.message]
    # the same server takes the compacted conversation as a chat request (llama-cpp-python refuses
    # content null beside tool calls, which OpenAI allows and the input has too: sent as "")
    messages = [dict(m, content="") if m.get("content") is None else m for m in dump["messages"]]
    status, body = llm.chat(check_server.base_url, {"model": "local", "messages": messages, "max_tokens": 1})
    assert status == 200 or (status == 400 and "context_length_exceeded" in orjson.dumps(body).decode()), body
    restored = xcompact("restore", str(out), "-o", str(tmp_path / "back.jsonl"))
    assert restored.returncode == 0  # the input's value exactly (written compactly, as restore writes)
    assert orjson.loads((tmp_path / "back.jsonl").read_bytes()) == orjson.loads(src.read_bytes())


def test_an_explicit_refused_dialect_is_not_retried_and_the_run_stops_early(model_server, tmp_path):
    src, out, report = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "report.json"
    src.write_bytes(tau(1) + tau(3) + tau(5) + tau(1) + tau(4))
    before = len(posts(model_server))
    res = summarize(model_server, src, out, report, "--structured", "json_schema", "--retries", "4",
                    "--concurrency", "1")
    items = orjson.loads(report.read_bytes())["items"]
    assert res.returncode == 1 and [i["status"] for i in items] == ["SUMMARIZE_FAILED"] * 5
    assert posts(model_server)[before:] == ["500"] * 3  # one request each, then the run stopped sending
    assert "use --structured auto" in items[0]["error"] and "response_format" in items[0]["error"]
    assert all(i["error"].startswith("not sent") for i in items[3:])
    assert sum("in a row with the same error" in x for x in res.stderr.splitlines()) == 1
    assert out.read_bytes() == src.read_bytes()  # every record as it was


def test_markdown_answers_of_the_real_model_are_valid_or_leave_the_input(model_server, tmp_path):
    """--structured markdown: the 0.5B model drops or repeats sections at times; whatever it
    writes, a record is a valid summary within budget (the model's, or the offline sections when its
    answer could not be used even after the repair turn, which the item says)."""
    src, out, report = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "report.json"
    src.write_bytes(tau(5))
    before = len(posts(model_server))
    res = summarize(model_server, src, out, report, "--structured", "markdown", "--keep-recent", "20",
                    "--max-summary-tokens", "300")
    (item,) = orjson.loads(report.read_bytes())["items"]
    assert set(posts(model_server)[before:]) == {"200"}  # markdown requests are taken as they are
    # the answer, once more with the anti-loop penalty if it ran to the token limit, and at most
    # one repair turn
    assert item["model_calls"] in (1, 2, 3)
    assert item["status"] == "SUMMARIZED", item
    assert item["summary_tokens"] <= 300 and res.returncode == 0
    dump = orjson.loads(out.read_bytes())
    assert not [p for p in check_pairing(dump["messages"]) if "used again" not in p.message]
    if "could not be used" in item.get("self_check", ""):
        assert item["fallback"] == "extractive" and "(after a repair turn)" in item["self_check"]


def test_the_window_a_real_server_names_is_read(check_server):
    """The context window is learnt from the server's own refusal text."""
    status, body = llm.chat(check_server.base_url, {"model": "local", "max_tokens": 1, "messages": [
        {"role": "user", "content": "word " * 600}]})
    message = body["error"]["message"]
    assert status == 400 and window_of(message) == 256, message
