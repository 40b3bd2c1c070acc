"""--placeholder TEXT and --clear-tool-inputs (issue 19): LangChain's ``placeholder`` and SWE-agent's
"Old environment output: (N lines omitted)", as long as the text names what it stands for; and
Anthropic's ``clear_tool_inputs``, restorable exactly."""

from __future__ import annotations

import re

import orjson
import pytest
from helpers import FIXTURES, read_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli import reclaim_tool_results, restore_conversation
from compactor_cli.cli import cli
from compactor_cli.model.checks import check_conversation
from compactor_cli.model.conversation import META_KEY, content_text
from compactor_cli.model.placeholders import TemplateError, parse_template
from compactor_cli.tiers.store import is_input_placeholder, tool_slots

SWE = FIXTURES / "swe_agent_3.jsonl"
TAU = FIXTURES / "taubench_airline_5.jsonl"
SWE_TEXT = "Old environment output: ({lines} lines omitted) [ID {id}]"


def _run(runner, tmp_path, *args: str, src=SWE, command: str = "toolcall", code: tuple[int, ...] = (0,)):
    out = tmp_path / "out.jsonl"
    res = runner.invoke(cli, [command, str(src), *args, "-o", str(out), "--report", str(tmp_path / "r.json"), "-q"])
    assert res.exit_code in code, res.stderr
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    return [orjson.loads(line) for line in out.read_bytes().splitlines()], report


def test_swe_agent_text_counts_the_lines_it_omits_and_extract_gives_them_back(runner, tmp_path):
    dumps, report = _run(runner, tmp_path, "--keep", "0", "--placeholder", SWE_TEXT)
    originals = read_jsonl(SWE)
    shown = 0
    for line_no, (dump, before) in enumerate(zip(dumps, originals, strict=True), start=1):
        assert dump[META_KEY]["placeholder_templates"] == [SWE_TEXT]
        for i, m in enumerate(dump["messages"]):
            match = re.fullmatch(r"Old environment output: \((\d+) lines omitted\) \[ID (.+)\]", str(m.get("content")))
            if not match:
                continue
            shown += 1
            original = before["messages"][i]["content"]
            assert int(match[1]) == len(content_text(original).splitlines())
            key = match[2]
            res = runner.invoke(cli, ["extract", key, str(tmp_path / "out.jsonl"), "--line", str(line_no)])
            assert res.exit_code == 0, res.stderr
            assert res.stdout_bytes.decode().rstrip("\n") == content_text(original).rstrip("\n")
        assert restore_conversation(dump)[0] == before
    assert shown >= 10
    assert report["parameters"]["placeholder"] == SWE_TEXT


def test_a_reused_id_gets_a_placeholder_naming_its_unique_key(runner, tmp_path):
    dumps, _ = _run(runner, tmp_path, "--keep", "0", "--placeholder", "cleared {tool} result {id}", src=TAU)
    reused = 0
    for dump, before in zip(dumps, read_jsonl(TAU), strict=True):
        named = {i: m["content"].rsplit(" ", 1)[1] for i, m in enumerate(dump["messages"])
                 if m.get("role") == "tool" and str(m.get("content")).startswith("cleared ")}
        assert len(set(named.values())) == len(named)  # one key per result, within the conversation
        for i, key in named.items():  # the key names exactly this result's original
            assert dump["compacted_tool_results"][key] == before["messages"][i]["content"]
            reused += "#" in key
    assert reused  # the tau-bench runs reuse IDs


@pytest.mark.parametrize("text, message", [
    ("[cleared]", "does not name the result: put {id} in it"),
    ("{id}", "needs some text besides its fields"),
    ("{id} {name}", "unknown field {name}"),
    ("{id:>9} x", "takes no format spec"),
    ("x {id", "write a literal brace"),
])
def test_a_template_that_cannot_name_the_result_is_refused_before_any_work(runner, tmp_path, text, message):
    res = runner.invoke(cli, ["toolcall", str(SWE), "--placeholder", text, "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and message in res.stderr, res.stderr
    assert not (tmp_path / "o.jsonl").exists()
    with pytest.raises(TemplateError):
        parse_template(text)


def test_tokens_field_needs_token_counts(runner, tmp_path):
    res = runner.invoke(cli, ["toolcall", str(SWE), "--placeholder", "[{tokens} tokens, {id}]", "--no-tokens",
                              "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "--placeholder with {tokens}" in res.stderr


def test_tokens_and_chars_fields_say_what_was_cleared(runner, tmp_path):
    dumps, report = _run(runner, tmp_path, "--keep", "1", "--placeholder", "[{chars} chars, {tokens} tokens: {id}]")
    from compactor_cli.model.tokens import TokenCounter

    counter = TokenCounter(report["items"][0]["encoding"])
    seen = 0
    for dump in dumps:
        for m in dump["messages"]:
            match = re.fullmatch(r"\[(\d+) chars, (\d+) tokens: (.+)\]", str(m.get("content")))
            if match:
                original = dump["compacted_tool_results"][match[3]]
                assert int(match[1]) == len(original) and int(match[2]) == counter.content(original)
                seen += 1
    assert seen >= 5


def test_clear_tool_inputs_replaces_the_arguments_and_restore_gives_them_back(runner, tmp_path):
    dumps, report = _run(runner, tmp_path, "--keep", "0", "--clear-tool-inputs", src=TAU)
    originals = read_jsonl(TAU)
    cleared = 0
    for dump, before in zip(dumps, originals, strict=True):
        for m, b in zip(dump["messages"], before["messages"], strict=True):
            for call, orig in zip(m.get("tool_calls") or (), b.get("tool_calls") or (), strict=True):
                args = call["function"]["arguments"]
                if is_input_placeholder(args):
                    cleared += 1
                    assert orjson.loads(args)["compacted"].startswith("[Arguments compacted, ID: ")  # valid JSON
                    assert len(args) < len(orig["function"]["arguments"])
                else:
                    assert call == orig
        assert check_conversation(dump) == check_conversation(before)  # pairing as it was
        assert restore_conversation(dump)[0] == before
    assert cleared >= 5 and sum(i.get("inputs_cleared", 0) for i in report["items"]) == cleared
    assert report["parameters"]["clear_tool_inputs"] is True


def test_compact_and_the_config_file_honour_both(runner, tmp_path):
    cfg = tmp_path / "xcompact.toml"
    cfg.write_text('[compact]\nplaceholder = "gone: {id}"\nclear_tool_inputs = true\n')
    dumps, report = _run(runner, tmp_path, "--config", str(cfg), "--token-threshold", "100", "--backend",
                         "extractive", "--escalation-rounds", "99", src=TAU, command="compact", code=(0, 1))
    assert report["parameters"]["placeholder"] == "gone: {id}" and report["parameters"]["clear_tool_inputs"]
    texts = [str(m.get("content")) for d in dumps for part in
             [d["messages"]] + [e["head"] for e in d.get("summarized_messages") or ()] for m in part
             if m.get("role") == "tool"]
    assert any(t.startswith("gone: ") for t in texts)
    assert not any(t.startswith("[Compacted, ID:") for t in texts)
    for dump, before in zip(dumps, read_jsonl(TAU), strict=True):
        assert restore_conversation(dump)[0] == before


def _with_arguments(dump: dict, lengths: list[int]) -> dict:
    msgs = []
    k = 0
    for m in dump["messages"]:
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                args = orjson.dumps({"a": "x" * lengths[k % len(lengths)]}).decode()
                calls.append({**c, "function": {**c["function"], "arguments": args}})
                k += 1
            m = {**m, "tool_calls": calls}
        msgs.append(m)
    return {**dump, "messages": msgs}


TEMPLATES = st.sampled_from([None, "Old environment output: ({lines} lines omitted) {id}", "[{tool}] {id} {chars}",
                             "{id}{tool}{lines} x", "cleared {{braces}} {id} {tokens}"])


@settings(deadline=None)
@given(conversations(), st.lists(st.integers(0, 120), min_size=1, max_size=4), st.integers(0, 3), TEMPLATES,
       TEMPLATES, st.booleans(), st.booleans())
def test_every_template_and_cleared_input_restores_exactly(dump, lengths, keep, first, second, inputs, drop):
    dump = _with_arguments(dump, lengths)
    before = orjson.dumps(dump)
    new, res = reclaim_tool_results(dump, keep=keep, placeholder=first, clear_tool_inputs=inputs,
                                    keep_originals=not drop)
    assert orjson.dumps(dump) == before  # the input is never modified
    if not inputs:
        assert res.inputs_cleared == 0
    # every placeholder made is recognised as one (by the template recorded for its result), and
    # nothing else is newly taken for one
    before_ph = {s.index for s in tool_slots(dump) if s.is_placeholder}
    for slot in tool_slots(new):
        if slot.index is not None:
            assert slot.is_placeholder == (slot.index in res.compacted_indices or slot.index in before_ph)
    # a later run with another template clears nothing twice
    again, res2 = reclaim_tool_results(new, keep=keep, placeholder=second, clear_tool_inputs=inputs,
                                       keep_originals=not drop)
    assert not set(res2.compacted_indices) & set(res.compacted_indices)
    if drop:
        return
    assert restore_conversation(new)[0] == dump
    assert restore_conversation(again)[0] == dump


# ---------------------------------------------------------------- what an attack found

LONG_ARGS = orjson.dumps({"cmd": "x" * 200}).decode()


def _pair(cid: str, content: object, name: str = "bash", call: dict | None = None) -> list[dict]:
    call = call or {"id": cid, "type": "function", "function": {"name": name, "arguments": LONG_ARGS}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": cid, "content": content}]


def _round_trip(runner, tmp_path, dump: dict, *args: str) -> tuple[dict, dict]:
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(dump) + b"\n")
    out, back = tmp_path / "c.jsonl", tmp_path / "b.jsonl"
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "0", *args, "-o", str(out), "-q"])
    assert res.exit_code == 0, res.stderr
    res = runner.invoke(cli, ["restore", str(out), "-o", str(back), "--report", str(tmp_path / "r.json"), "-q"])
    assert res.exit_code == 0, res.stderr
    return orjson.loads(back.read_bytes()), orjson.loads((tmp_path / "r.json").read_bytes())["items"][0]


@pytest.mark.parametrize("real", ["[cleared bash result A]", "[cleared bash result A#2]"])
def test_a_real_result_that_reads_like_a_placeholder_is_never_taken_for_one(runner, tmp_path, real):
    # a leftover original under A's key (as xun leaves them) must not replace A's real text
    dump = {"messages": [{"role": "user", "content": "go"}, *_pair("A", real), *_pair("B", "y" * 500)],
            "compacted_tool_results": {"A": "orphan stored by xun", "A#2": "another orphan"}}
    back, item = _round_trip(runner, tmp_path, dump, "--placeholder", "[cleared {tool} result {id}]")
    assert back == dump and item.get("missing_count", 0) == 0


def test_restore_leaves_no_template_behind_when_a_real_result_matches_it(runner, tmp_path):
    dump = {"messages": [{"role": "user", "content": "go"}, *_pair("A", "gone A"), *_pair("B", "y" * 500)]}
    back, item = _round_trip(runner, tmp_path, dump, "--placeholder", "gone {id}")
    assert back == dump and item.get("missing_count", 0) == 0


@pytest.mark.parametrize("originals", ["keep", "drop"])
def test_a_stored_input_under_the_same_key_is_never_overwritten_nor_put_in_a_call(runner, tmp_path, originals):
    dump = {"messages": [{"role": "user", "content": "go"}, *_pair("A", "y" * 500), *_pair("B", "z" * 500)],
            META_KEY: {"tool_inputs": {"A": "ORPHAN"}}}
    back, _ = _round_trip(runner, tmp_path, dump, "--clear-tool-inputs", "--originals", originals)
    calls = [c for m in back["messages"] for c in m.get("tool_calls") or ()]
    assert calls[0]["function"]["arguments"] == LONG_ARGS  # never "ORPHAN"
    assert back[META_KEY]["tool_inputs"] == {"A": "ORPHAN"}
    if originals == "keep":
        assert back == dump


@pytest.mark.parametrize("option", ["--placeholder", "--exclude-tools"])
def test_text_options_that_are_not_utf8_are_usage_errors(runner, tmp_path, option):
    res = runner.invoke(cli, ["toolcall", str(SWE), option, "gone \udcff {id}", "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "not valid UTF-8" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_a_custom_tool_call_is_named_by_its_custom_name(runner, tmp_path):
    custom = {"id": "o2", "type": "custom", "custom": {"name": "g", "input": "q" * 300}}
    dump = {"messages": [{"role": "user", "content": "go"}, *_pair("o1", "y" * 500, name="f"),
                         *_pair("o2", "z" * 500, call=custom)]}
    src = tmp_path / "in.json"
    src.write_bytes(orjson.dumps(dump))
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "0", "--placeholder", "[{tool}: {id}]", "-o", "-"])
    assert res.exit_code == 0, res.stderr
    out = orjson.loads(res.stdout_bytes)
    assert [m["content"] for m in out["messages"] if m["role"] == "tool"] == ["[f: o1]", "[g: o2]"]
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "0", "--exclude-tools", "g", "-o", "-"])
    assert orjson.loads(res.stdout_bytes)["messages"][4]["content"] == "z" * 500
