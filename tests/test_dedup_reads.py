"""--dedup-reads (issue 30): a read of a file that a later read repeats — the same path, the
same range, the same content — becomes a placeholder naming the later read; a different range
or a file changed in between is left alone; restore gives every byte back."""

from __future__ import annotations

import json

import orjson
from helpers import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli import reclaim_tool_results, restore_conversation
from compactor_cli.cli import cli
from compactor_cli.model.tokens import counter_for
from compactor_cli.tiers.reads import read_key
from compactor_cli.tiers.store import is_placeholder_of, templated_results
from compactor_cli.tiers.toolcall import extract_tool_result

BODY = "\n".join(f"{n:6}→    line {n} of the module, long enough to count" for n in range(1, 120))


def _call(cid: str, name: str, args: dict) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _result(cid: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _reads() -> list[dict]:
    return [{"role": "user", "content": "fix the parser"},
            _call("r1", "Read", {"file_path": "/repo/parse.py"}), _result("r1", BODY),
            _call("r2", "Read", {"file_path": "/repo/parse.py", "offset": 40, "limit": 20}), _result("r2", BODY[:900]),
            _call("s1", "bash", {"command": "sed -n '1,120p' /repo/lex.py"}), _result("s1", BODY + "\nlex"),
            _call("e1", "Edit", {"file_path": "/repo/lex.py", "old_string": "a", "new_string": "b"}),
            _result("e1", "The file /repo/lex.py has been updated."),
            _call("s2", "bash", {"command": "sed -n '1,120p' /repo/lex.py"}), _result("s2", BODY + "\nlex, edited"),
            _call("r3", "Read", {"file_path": "/repo/parse.py"}), _result("r3", BODY),
            _call("r4", "Read", {"file_path": "/repo/parse.py", "offset": 40, "limit": 30}), _result("r4", BODY[:900]),
            {"role": "assistant", "content": "done"}]


def test_a_re_read_of_the_same_file_range_and_content_becomes_a_reference_to_the_later_read():
    messages = _reads()
    new, res = reclaim_tool_results(messages, keep=100, dedup_reads=True)
    out = new["messages"]
    # r1 is repeated by r3 (same file, no range, same content): it names r3
    assert res.deduped_reads == 1 and res.compacted_indices == [2]
    assert "tool call r3" in out[2]["content"] and "/repo/parse.py" in out[2]["content"]
    assert is_placeholder_of(out[2]["content"], "r1", None) or ("r1", 1) in templated_results(new)
    assert extract_tool_result(new, "r1")[0] == BODY  # extract finds it as any cleared result
    # another range (r2 vs r4: a different limit) and a changed content (s1 vs s2) are left alone
    for i in (4, 6, 10, 12, 14):
        assert out[i] == messages[i]
    restored, _ = restore_conversation(new)
    assert restored["messages"] == messages
    again, res2 = reclaim_tool_results(new, keep=100, dedup_reads=True)
    assert again == new and res2.reclaimed_count == 0  # a second run recognises its placeholder


def test_without_the_option_nothing_changes_and_a_cleared_later_read_is_not_referenced():
    messages = _reads()
    same, res = reclaim_tool_results(messages, keep=100)
    assert same == {"messages": messages} or same == messages
    # keep=0 clears r3 by age: r1 (older) is cleared by age too, never pointed at a cleared read
    new, res = reclaim_tool_results(messages, keep=0, dedup_reads=True)
    assert res.deduped_reads == 0
    assert "Superseded read" not in json.dumps(new)


def test_with_tokens_a_reference_that_costs_more_than_the_read_is_not_written():
    messages = [{"role": "user", "content": "go"},
                _call("a", "Read", {"file_path": "/r/x"}), _result("a", "ok"),
                _call("b", "Read", {"file_path": "/r/x"}), _result("b", "ok")]
    new, res = reclaim_tool_results(messages, keep=100, dedup_reads=True, counter=counter_for("cl100k_base"))
    assert res.deduped_reads == 0 and new == messages


def test_read_key_takes_reads_and_only_reads():
    assert read_key("Read", '{"file_path": "/a.py", "offset": 3}') == ("/a.py", '{"offset":3}')
    assert read_key("str_replace_editor", '{"command": "view", "path": "/a.py", "view_range": [1, 9]}')[0] == "/a.py"
    assert read_key("str_replace_editor", '{"command": "str_replace", "path": "/a.py"}') is None
    assert read_key("bash", '{"command": "cat src/a.py"}') == ("src/a.py", "cat src/a.py")
    assert read_key("bash", '{"command": "nl -ba a.py | sed -n \'10,20p\'"}')[0] == "a.py"
    assert read_key("shell", '{"command": ["bash", "-lc", "sed -n 1,40p a.py"], "workdir": "/w"}') \
        == ("a.py", "sed -n 1,40p a.py @ /w")
    assert read_key("bash", '{"command": "head -n 20 a.py"}')[0] == "a.py"
    for not_a_read in ('{"command": "cat a.py > b.py"}', '{"command": "sed -i s/a/b/ a.py"}',
                       '{"command": "cat a.py && rm a.py"}', '{"command": "cat a.py b.py"}',
                       '{"command": "python a.py"}', '{"command": "cat $(ls)"}'):
        assert read_key("bash", not_a_read) is None, not_a_read


def test_a_codex_rollout_re_read_is_deduplicated_from_the_command_line(runner, tmp_path):
    """A real Codex session (fixtures/real): one `sed -n` range read twice with the same output
    (the run's duration differs, the output does not) is deduplicated; the re-reads after the
    file changed are not; restore gives the log's conversation back exactly."""
    src = FIXTURES / "real" / "codex_rollout_reread.jsonl"
    out, report = tmp_path / "out.json", tmp_path / "r.json"
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "1000", "--dedup-reads", "-o", str(out),
                              "--report", str(report), "-q"])
    assert res.exit_code == 0, res.stderr
    doc = orjson.loads(report.read_bytes())
    assert doc["parameters"]["dedup_reads"] is True
    assert [i.get("deduped_reads") for i in doc["items"]] == [1]
    dump = orjson.loads(out.read_bytes())
    refs = [m for m in dump["messages"] if m.get("role") == "tool" and "Superseded read" in str(m.get("content"))]
    assert len(refs) == 1
    plain = tmp_path / "plain.json"
    assert runner.invoke(cli, ["convert", str(src), "--to", "openai", "-o", str(plain), "-q"]).exit_code == 0
    back = tmp_path / "back.json"
    assert runner.invoke(cli, ["restore", str(out), "-o", str(back), "-q"]).exit_code == 0
    restored = orjson.loads(back.read_bytes())
    assert restored["messages"] == orjson.loads(plain.read_bytes())["messages"]


def test_compact_and_a_config_file_carry_dedup_reads(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps({"messages": _reads()}) + b"\n")
    config = tmp_path / "xcompact.toml"
    config.write_text("[toolcall]\ndedup-reads = true\nkeep = 100\n")
    by_config = tmp_path / "a.jsonl"
    res = runner.invoke(cli, ["toolcall", str(src), "--config", str(config), "-o", str(by_config), "-q"])
    assert res.exit_code == 0, res.stderr
    by_flag = tmp_path / "b.jsonl"
    assert runner.invoke(cli, ["toolcall", str(src), "--keep", "100", "--dedup-reads", "-o", str(by_flag),
                               "-q"]).exit_code == 0
    assert by_config.read_bytes() == by_flag.read_bytes() and b"Superseded read" in by_flag.read_bytes()
    compacted = tmp_path / "c.jsonl"
    res = runner.invoke(cli, ["compact", str(src), "--token-threshold", "100000", "--keep", "100",
                              "--dedup-reads", "-o", str(compacted), "-q"])
    assert res.exit_code == 0, res.stderr
    assert b"Superseded read" not in compacted.read_bytes()  # under the threshold: compact leaves it
    res = runner.invoke(cli, ["compact", str(src), "--token-threshold", "1500", "--keep", "100",
                              "--dedup-reads", "--backend", "extractive", "-o", str(compacted), "-q"])
    assert res.exit_code == 0, res.stderr
    assert b"Superseded read" in compacted.read_bytes() or b"summarized_messages" in compacted.read_bytes()


_PATHS = st.sampled_from(["/r/a.py", "/r/b.py", "a.py"])
_RANGES = st.sampled_from([None, 1, 40])
_TEXTS = st.sampled_from([BODY, BODY[:700], BODY + "\nchanged", "short"])


@settings(deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Read", "bash"]), _PATHS, _RANGES, _TEXTS, st.booleans()),
                min_size=1, max_size=12), st.integers(0, 12), st.booleans())
def test_dedup_reads_restores_exactly_and_points_only_at_an_identical_later_read(reads, keep, tokens):
    messages: list[dict] = [{"role": "user", "content": "read things"}]
    for n, (tool, path, start, text, reuse) in enumerate(reads):
        cid = "same" if reuse else f"c{n}"  # reused IDs too
        args = ({"file_path": path} | ({"offset": start} if start else {})) if tool == "Read" \
            else {"command": f"sed -n '{start or 1},200p' {path}"}
        messages += [_call(cid, tool, args), _result(cid, text)]
    before = orjson.dumps(messages)
    new, _ = reclaim_tool_results(messages, keep=keep, dedup_reads=True,
                                    counter=counter_for("cl100k_base") if tokens else None)
    assert orjson.dumps(messages) == before  # the input is never modified
    restored, _ = restore_conversation(new)
    assert (restored["messages"] if isinstance(restored, dict) else restored) == messages
    out = new["messages"] if isinstance(new, dict) else new
    for i, m in enumerate(out):
        text = m.get("content")
        if m.get("role") != "tool" or not isinstance(text, str) or not text.startswith("[Superseded read"):
            continue
        later = text.split("(tool call ", 1)[1].split(")", 1)[0]
        # the later read it names is after it, not cleared, with the same call and the same content
        call = messages[i - 1]["tool_calls"][0]["function"]["arguments"]
        assert any(j > i and out[j].get("tool_call_id") == later and out[j]["content"] == messages[i]["content"]
                   and messages[j - 1]["tool_calls"][0]["function"]["arguments"] == call
                   for j in range(len(out)))
    again, _ = reclaim_tool_results(new, keep=keep, dedup_reads=True,
                                       counter=counter_for("cl100k_base") if tokens else None)
    assert again == new
