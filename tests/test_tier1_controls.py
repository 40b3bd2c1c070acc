"""Tier 1's controls, as Anthropic's context editing (clear_tool_uses_20250919) and LangChain's
ClearToolUsesEdit document them: exclude_tools (never cleared), clear_at_least (clear only when
it frees that many tokens, else nothing changes), trigger (only conversations over it), and
keep counted in assistant turns (OpenHands' and the masking study's window)."""

from __future__ import annotations

import shutil

import orjson
import pytest
from helpers import FIXTURES, read_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli import ORIGINALS_KEY, reclaim_tool_results, restore_conversation
from compactor_cli.cli import cli
from compactor_cli.tiers.store import is_placeholder_of
from compactor_cli.tiers.toolcall import tool_names

TAU = FIXTURES / "taubench_airline_5.jsonl"


def _run(runner, tmp_path, *args: str, src=TAU, command: str = "toolcall"):
    out = tmp_path / "out.jsonl"
    res = runner.invoke(cli, [command, str(src), *args, "-o", str(out), "--report", str(tmp_path / "r.json"), "-q"])
    assert res.exit_code in (0, 1), res.stderr
    return out.read_bytes().splitlines(), orjson.loads((tmp_path / "r.json").read_bytes())


def _results(dump: dict) -> list[tuple[int, str | None, object]]:
    names = tool_names(dump["messages"])
    return [(i, names.get(i), m.get("content")) for i, m in enumerate(dump["messages"]) if m.get("role") == "tool"]


@pytest.mark.parametrize("command, extra", [("toolcall", []),
                                            ("compact", ["--token-threshold", "500", "--backend", "extractive",
                                                         "--escalation-rounds", "99"])])
def test_exclude_tools_keeps_every_result_of_the_named_tools(runner, tmp_path, command, extra):
    excluded = {"get_reservation_details", "get_user_details"}
    lines, report = _run(runner, tmp_path, "--keep", "0", "--exclude-tools", ",".join(sorted(excluded)), *extra,
                         command=command)
    originals = {str(m.get("content")) for d in read_jsonl(TAU) for m in d["messages"] if m.get("role") == "tool"}
    cleared = kept = 0
    for line in lines:
        dump = orjson.loads(line)
        # the conversation, and (after a summary) the heads it archived: a result is in one of them
        for part in [dump["messages"]] + [e["head"] for e in dump.get("summarized_messages") or ()]:
            for i, name in tool_names(part).items():
                content = part[i]["content"]
                if name in excluded:
                    assert str(content) in originals  # never a placeholder, whatever its age
                    kept += 1
                elif is_placeholder_of(content, part[i]["tool_call_id"]):
                    cleared += 1
    assert kept >= 10 and cleared >= 5
    assert report["parameters"]["exclude_tools"] == sorted(excluded)
    if command == "toolcall":
        assert sum(i.get("excluded_count", 0) for i in report["items"]) == kept


def test_clear_at_least_above_what_is_freeable_leaves_each_conversation_byte_identical(runner, tmp_path):
    lines, report = _run(runner, tmp_path, "--keep", "0", "--clear-at-least", "1000000")
    assert lines == TAU.read_bytes().splitlines()
    for item in report["items"]:
        assert item["status"] == "NOTHING_TO_CONDENSE" and item["reclaimed_count"] == 0
        if item.get("freed_tokens"):
            assert "clear_at_least" in item["reason"] and item["freed_tokens"] < 1000000


def test_clear_at_least_below_what_is_freed_changes_nothing_about_the_run(runner, tmp_path):
    plain, _ = _run(runner, tmp_path, "--keep", "0")
    (tmp_path / "out.jsonl").unlink()
    lines, report = _run(runner, tmp_path, "--keep", "0", "--clear-at-least", "1")
    assert lines == plain
    freed = [i["freed_tokens"] for i in report["items"] if i["status"] == "RECLAIMED"]
    assert freed and all(f > 0 for f in freed)
    # a threshold between two conversations' savings clears one and leaves the other as it was
    middle = sorted(freed)[len(freed) // 2]
    (tmp_path / "out.jsonl").unlink()
    lines, report = _run(runner, tmp_path, "--keep", "0", "--clear-at-least", str(middle))
    for line, orig, item, was in zip(lines, TAU.read_bytes().splitlines(), report["items"], plain, strict=True):
        if item.get("freed_tokens") is not None and item["freed_tokens"] < middle:
            assert line == orig
        else:
            assert line == was


def test_trigger_leaves_conversations_under_it_as_they_are(runner, tmp_path):
    plain, plain_report = _run(runner, tmp_path, "--keep", "0")
    (tmp_path / "out.jsonl").unlink()
    lines, report = _run(runner, tmp_path, "--keep", "0", "--trigger", "4000")
    under = 0
    for line, orig, was, item, p in zip(lines, TAU.read_bytes().splitlines(), plain, report["items"],
                                        plain_report["items"], strict=True):
        if p["tokens_before"] <= 4000:
            assert item["status"] == "UNDER_THRESHOLD" and line == orig and item["size_before"] == p["tokens_before"]
            under += 1
        else:
            assert line == was
    assert 0 < under < len(lines)


def test_keep_turns_keeps_the_results_of_the_last_assistant_turns(runner, tmp_path):
    lines, report = _run(runner, tmp_path, "--keep-turns", "2")
    assert report["parameters"]["keep"] == 0 and report["parameters"]["keep_turns"] == 2
    for line, original in zip(lines, read_jsonl(TAU), strict=True):
        dump = orjson.loads(line)
        turns = [i for i, m in enumerate(dump["messages"]) if m.get("role") == "assistant" and m.get("tool_calls")]
        start = turns[-2] if len(turns) >= 2 else 0
        for i, _, content in _results(dump):
            if i > start:
                assert content == original["messages"][i]["content"]
            elif len(str(original["messages"][i]["content"])) > 400:
                assert is_placeholder_of(content, dump["messages"][i]["tool_call_id"])


def test_a_claude_code_log_honours_exclude_tools(runner, tmp_path):
    src = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "formats" / "claude_code_tool_heavy.jsonl", src)
    out = tmp_path / "out.json"
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "0", "--exclude-tools", "Bash", "-o", str(out), "-q"])
    assert res.exit_code == 0, res.stderr
    dump = orjson.loads(out.read_bytes())
    results = _results(dump)
    assert any(name == "Bash" for _, name, _ in results)
    for i, name, content in results:
        ph = is_placeholder_of(content, dump["messages"][i]["tool_call_id"])
        assert not ph if name == "Bash" else True
    assert any(is_placeholder_of(c, dump["messages"][i]["tool_call_id"]) for i, n, c in results if n != "Bash")


@pytest.mark.parametrize("args, message", [
    (["--trigger", "10", "--no-tokens"], "--trigger counts tokens: drop --no-tokens"),
    (["--clear-at-least", "10", "--trigger", "5", "--no-tokens"], "--trigger and --clear-at-least count tokens"),
    (["--exclude-tools", "a,,b"], "an empty tool name"),
    (["--keep-turns", "-1"], "--keep-turns"),
])
def test_controls_refuse_what_cannot_work(runner, tmp_path, args, message):
    res = runner.invoke(cli, ["toolcall", str(TAU), *args, "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and message in res.stderr
    assert not (tmp_path / "o.jsonl").exists()


@settings(deadline=None)
@given(conversations(), st.integers(0, 4), st.one_of(st.none(), st.integers(0, 3)),
       st.one_of(st.none(), st.integers(1, 60)), st.sets(st.text(min_size=1, max_size=3), max_size=3),
       st.booleans())
def test_every_combination_of_controls_restores_exactly(dump, keep, keep_turns, clear_at_least, excluded, drawn):
    names = set(tool_names(dump["messages"]).values())
    exclude = set(excluded) | ({sorted(names)[0]} if names and drawn else set())
    before = orjson.dumps(dump)
    new, res = reclaim_tool_results(dump, keep=keep, keep_turns=keep_turns, clear_at_least=clear_at_least,
                                    exclude_tools=exclude)
    assert orjson.dumps(dump) == before  # the input is never modified
    if res.below_clear_at_least or not res.reclaimed_count:
        assert new is dump
    restored, _ = restore_conversation(new)
    assert restored == dump
    excluded_idx = {i for i, n in tool_names(dump["messages"]).items() if n in exclude}
    for i in excluded_idx:
        assert new["messages"][i] == dump["messages"][i]
    if res.reclaimed_count and clear_at_least is not None:
        assert res.freed_tokens >= clear_at_least
    assert set(res.compacted_indices) <= {i for i, m in enumerate(dump["messages"]) if m.get("role") == "tool"}
    if res.reclaimed_count:
        assert ORIGINALS_KEY in new


def test_with_tokens_a_result_is_cleared_only_where_the_placeholder_costs_fewer_tokens():
    """A 160-character confirmation under a long ID is shorter than its placeholder in tokens but
    not in characters: counted in tokens it stays; with --no-tokens the character rule clears it."""
    from compactor_cli.model.tokens import counter_for
    from compactor_cli.tiers.toolcall import reclaim_tool_results

    cid = "toolu_01" + "QxR7" * 7
    confirmation = "Todos have been modified successfully. Ensure that you continue to use the todo list to " \
                   "track your progress. Please proceed with the current tasks if applicable"
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": cid, "type": "function", "function": {"name": "TodoWrite", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": cid, "content": confirmation},
                {"role": "assistant", "content": "done"}]
    counter = counter_for("cl100k_base")
    by_chars, res_chars = reclaim_tool_results({"messages": messages}, keep=0)
    assert res_chars.reclaimed_count == 1  # fewer characters...
    placeholder = by_chars["messages"][2]["content"]
    assert counter.text(placeholder) >= counter.text(confirmation)  # ...but not fewer tokens
    same, res_tokens = reclaim_tool_results({"messages": messages}, keep=0, counter=counter)
    assert res_tokens.reclaimed_count == 0 and res_tokens.kept_cheaper == 1 and same["messages"] == messages


def test_a_preview_keeps_the_outcome_of_a_cleared_result_and_restores_exactly(runner, tmp_path):
    """--preview HEAD,TAIL: the first and last lines of each cleared result stay in its
    placeholder, and the lines between that carry the outcome (the line closing a traceback, the
    exit code); restore gives the input back, a rerun changes nothing, extract finds the original."""
    import orjson

    from compactor_cli.cli import cli
    from compactor_cli.tiers.restore import restore_conversation

    run_log = ("<returncode>1</returncode>\n<output>\n" + "\n".join(f"collecting module {i}" for i in range(300))
               + "\nTraceback (most recent call last):\n  File \"t.py\", line 9, in test_url\n"
               + "requests.exceptions.InvalidURL: URL has an invalid label.\nsummary line\n</output>")
    conv = {"messages": [{"role": "user", "content": "fix the URL parsing"}]}
    for k in range(3):
        conv["messages"] += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest"}'}}]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": run_log}]
    src, out, again = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "again.jsonl"
    src.write_bytes(orjson.dumps(conv) + b"\n")
    res = runner.invoke(cli, ["toolcall", str(src), "--keep", "1", "--preview", "2,1", "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    new = orjson.loads(out.read_bytes())
    cleared = new["messages"][2]["content"]
    assert cleared.startswith("[Compacted, ID: c0.") and "requests.exceptions.InvalidURL" in cleared
    assert "<returncode>1</returncode>" in cleared and "collecting module 150" not in cleared
    assert "lines left out by xcompact" in cleared and len(cleared) < len(run_log) // 5
    assert restore_conversation(new)[0] == conv
    assert runner.invoke(cli, ["toolcall", str(out), "--keep", "1", "--preview", "2,1", "-o", str(again)]).exit_code == 0
    assert again.read_bytes() == out.read_bytes()  # a placeholder with its preview is recognised
    fetched = runner.invoke(cli, ["extract", "c0", str(out)])
    assert fetched.exit_code == 0 and fetched.stdout.rstrip("\n") == run_log
    for bad in (["--preview", "five"], ["--preview", "2,1", "--placeholder", "gone {id} {preview}"]):
        res = runner.invoke(cli, ["toolcall", str(src), *bad])
        assert res.exit_code == 2 and "Traceback" not in res.stderr, res.stderr


def test_max_result_tokens_lets_a_huge_final_output_fit_a_threshold():
    """A run whose last tool output is about 900 KB cannot get under a threshold (the last result
    is always kept whole); --max-result-tokens cuts it to a preview, its original stored."""
    from compactor_cli.model.tokens import counter_for
    from compactor_cli.status import Status
    from compactor_cli.tiers.compact import compact_dump
    from compactor_cli.tiers.options import Policy
    from compactor_cli.tiers.restore import restore_conversation

    huge = "\n".join(f"{i:06d} PASSED tests/test_big.py::test_case_{i}" for i in range(20000)) + "\nFAILED at the end"
    conv = {"messages": [{"role": "user", "content": "run the whole suite and tell me what fails"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "run", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "run", "content": huge}]}
    _, _, fields = compact_dump(conv, Policy(token_threshold=20000, keep_recent=16))  # xun's fixed keep
    assert fields["size_after"] > 20000  # whatever the rounds did
    new, status, fields = compact_dump(conv, Policy(token_threshold=20000, keep_recent=16, max_result_tokens=2000))
    assert status in (Status.RECLAIMED, Status.SUMMARIZED) and fields["size_after"] <= 20000
    kept = new["messages"][-1]["content"]
    assert kept.startswith("[Compacted, ID: run.") and "test_case_0" in kept and "FAILED at the end" in kept
    assert counter_for("cl100k_base").text(kept) < 2000
    assert restore_conversation(new)[0] == conv


def test_toolcall_max_result_tokens_from_the_command_line(runner, tmp_path):
    import orjson

    from compactor_cli.cli import cli

    big = "\n".join(f"row {i}: value {i * 7}" for i in range(5000))
    conv = {"messages": [{"role": "user", "content": "dump the table"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": big},
                         {"role": "assistant", "content": "done"}]}
    src, out, report = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "r.json"
    src.write_bytes(orjson.dumps(conv) + b"\n")
    res = runner.invoke(cli, ["toolcall", str(src), "--max-result-tokens", "500", "-o", str(out), "--report", str(report)])
    assert res.exit_code == 0, res.stderr
    item = orjson.loads(report.read_bytes())["items"][0]
    assert item["capped_count"] == 1 and item["tokens_after"] < 800
    assert orjson.loads(report.read_bytes())["parameters"]["max_result_tokens"] == 500
    res = runner.invoke(cli, ["toolcall", str(src), "--max-result-tokens", "500", "--no-tokens"])
    assert res.exit_code == 2 and "--max-result-tokens counts tokens" in res.stderr
