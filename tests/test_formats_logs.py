"""Stage A of issue 8: agent logs read as OpenAI conversations (lossy, documented), detection,
and ``xcompact convert``. Real samples in ../shared/data/raw are used when present."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from compactor_cli import formats
from compactor_cli.cli.convert import convert as convert_command
from compactor_cli.errors import InvalidInputError
from compactor_cli.model.checks import check_conversation
from compactor_cli.tiers.restore import restore_details
from compactor_cli.tiers.summarize import summarize_dump
from compactor_cli.tiers.toolcall import reclaim_tool_results

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "formats"
SHARED = ROOT.parent / "shared" / "data" / "raw"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/raw is not here")


def read_all(path: Path, from_: str = "auto") -> list[tuple[dict, formats.Codec]]:
    """The whole file (a Claude Code log across its compact boundaries: these tests count it all)."""
    return [(d, c) for _, d, c in formats.read_file(str(path), from_, history="full")]


def calls_and_results(dump: dict) -> tuple[list[str], list[str]]:
    calls = [c["id"] for m in dump["messages"] for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in dump["messages"] if m["role"] == "tool"]
    return calls, results


def assert_paired(dump: dict) -> None:
    problems = [p for p in check_conversation(dump) if "used again" not in p.message]
    assert problems == [], problems[:3]
    calls, results = calls_and_results(dump)
    assert sorted(calls) == sorted(results)


# ---------------------------------------------------------------- Claude Code

def cc_source_counts(path: Path) -> dict:
    """Counted from the raw events, independently of the reader."""
    events = [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
    dialogue = [e for e in events if e.get("type") in ("user", "assistant")]
    main = [e for e in dialogue if not e.get("isSidechain")] or dialogue
    uses, results, users, asst_ids = [], [], 0, []
    for e in main:
        content = e["message"]["content"]
        blocks = content if isinstance(content, list) else []
        if e["type"] == "assistant":
            asst_ids.append(e["message"].get("id"))
            uses += [b["id"] for b in blocks if b.get("type") == "tool_use"]
        else:
            results += [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            if isinstance(content, str) or any(b.get("type") != "tool_result" for b in blocks):
                users += 1
    return {"tool_use": uses, "tool_result": results, "user": users, "assistant": len(dict.fromkeys(asst_ids))}


def check_claude_code(path: Path) -> dict:
    [(dump, codec)] = read_all(path)
    assert codec.format == "claude-code" and codec.lossy
    src = dump["source"]
    counts = cc_source_counts(path)
    calls, results = calls_and_results(dump)
    assert calls == counts["tool_use"]  # every tool_use, in order
    real = [r for r in results if r not in src.get("unanswered", [])]
    assert sorted(real + src.get("orphan_results", [])) == sorted(counts["tool_result"])
    roles = [m["role"] for m in dump["messages"]]
    assert roles.count("assistant") == counts["assistant"]
    assert roles.count("user") == counts["user"] + len(src.get("orphan_results", []))
    assert len(src["lines"]) == len(dump["messages"])
    assert_paired(dump)
    return {"messages": len(dump["messages"]), "tool_calls": len(calls), "tool_results": len(real)}


def test_claude_code_fixture_session():
    path = FIX / "claude_code_session.jsonl"
    check_claude_code(path)
    [(dump, codec)] = read_all(path)
    src = dump["source"]
    msgs = dump["messages"]
    # one assistant message per message.id, although its blocks are spread over lines
    first = msgs[1]
    assert first["reasoning_content"] == "Search for the parser first."
    assert [c["id"] for c in first["tool_calls"]] == ["toolu_grep", "toolu_read"]
    # parallel results written in another order stay with their message
    assert [m.get("tool_call_id") for m in msgs[4:7]] == [None, "toolu_test", "toolu_edit"]
    assert src["compact_boundaries"] == [{"line": 18, "before_message": 8, "trigger": "auto", "preTokens": 170251}]
    assert msgs[8]["content"].startswith("This session is being continued")
    assert src["summaries"] == ["Fix the date parser"]
    assert src["skipped"] == {"file-history-snapshot": 1, "progress": 1, "sidechain events": 1, "system": 2}
    assert src["unanswered"] == ["toolu_demo"] and src["orphan_results"] == ["toolu_gone"]
    assert any("signature" in n for n in codec.notes) and any("redacted_thinking" in n for n in codec.notes)
    assert msgs[7]["content"][1]["type"] == "image_url"
    assert src["lines"][:3] == [3, 4, 8]
    assert "agent_id" not in src  # only the skipped sidechain line had one


def test_claude_code_real_fixture():
    stats = check_claude_code(FIX / "claude_code_tool_heavy.jsonl")
    assert stats == {"messages": 17, "tool_calls": 6, "tool_results": 6}


@needs_shared
@pytest.mark.parametrize("name", sorted(p.name for p in (SHARED / "claude-code").glob("*.jsonl"))
                         if (SHARED / "claude-code").is_dir() else [])
def test_claude_code_real_sessions(name):
    check_claude_code(SHARED / "claude-code" / name)


def test_claude_code_is_one_record_and_auto_detected(tmp_path):
    recs = list(formats.iter_records(str(FIX / "claude_code_session.jsonl")))
    assert len(recs) == 1 and recs[0].line is None and recs[0].form == "jsonl"
    assert formats.file_format(str(FIX / "claude_code_session.jsonl")) == "claude-code"
    # the same lines given one by one say what they are
    line = (FIX / "claude_code_session.jsonl").read_bytes().splitlines()[2]
    with pytest.raises(InvalidInputError, match="--from claude-code"):
        formats.parse_record(line)


# ---------------------------------------------------------------- Codex

def test_codex_rollout():
    [(dump, codec)] = read_all(FIX / "codex_rollout.jsonl")
    assert codec.format == "codex"
    assert_paired(dump)
    src = dump["source"]
    calls, results = calls_and_results(dump)
    raw = [orjson.loads(x) for x in (FIX / "codex_rollout.jsonl").read_bytes().splitlines()]
    items = [e["payload"] for e in raw if e["type"] == "response_item"]
    assert calls == [i["call_id"] for i in items if i["type"] in ("function_call", "custom_tool_call",
                                                                 "local_shell_call")]
    outputs = [i["call_id"] for i in items if i["type"].endswith("_output")]
    assert [r for r in results if r not in src["unanswered"]] == outputs
    assert src["unanswered"] == ["call_interrupted"]
    assert src["compactions"] == [{"line": 15, "before_message": 8}]
    assert dump["messages"][8]["content"].startswith("Summary so far")
    assert src["models"] == ["gpt-5-codex"] and src["session_id"].startswith("019a2d7a")
    custom = dump["messages"][6]["tool_calls"][0]
    assert custom["type"] == "custom" and custom["custom"]["name"] == "apply_patch"
    assert dump["messages"][2]["reasoning_content"].startswith("**Listing files**")
    assert "1 encrypted reasoning dropped" in codec.notes
    assert len(src["lines"]) == len(dump["messages"])
    assert src["skipped"]["event_msg:token_count"] == 1


def test_codex_older_rollout_form():
    lines = [{"id": "s1", "timestamp": "2025-05-01T00:00:00Z", "instructions": None},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]},
             {"record_type": "state"},
             {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "c1"},
             {"type": "function_call_output", "call_id": "c1", "output": {"content": "a\nb", "success": True}}]
    raw = b"\n".join(orjson.dumps(x) for x in lines) + b"\n"
    dump, codec = formats.parse_record(raw)
    assert codec.format == "codex" and dump["source"]["session_id"] == "s1"
    assert [m["role"] for m in dump["messages"]] == ["user", "assistant", "tool"]
    assert dump["messages"][2]["content"] == "a\nb"


# ---------------------------------------------------------------- SWE-agent

def swe_counts(path: Path) -> dict:
    obj = orjson.loads(path.read_bytes())
    [(dump, codec)] = read_all(path)
    assert codec.format == "swe-agent"
    assert_paired(dump)
    history = obj["history"]
    fc = any(m.get("tool_calls") for m in history)
    calls, results = calls_and_results(dump)
    if fc:
        assert calls == [c["id"] for m in history for c in m.get("tool_calls") or ()]
        assert len(results) == sum(1 for m in history if m["role"] == "tool")
        assert len(dump["messages"]) == len(history)
    else:
        actions = [m for m in history if m["role"] == "assistant" and m.get("action", "").strip()]
        assert len(calls) == len(actions)
        assert [orjson.loads(c["function"]["arguments"])["command"]
                for m in dump["messages"] for c in m.get("tool_calls") or ()] == [a["action"].strip() for a in actions]
        # every observation of the history is a result; the last one comes from the trajectory
        assert len(dump["messages"]) == len(history) + len(dump["source"].get("from_trajectory", []))
    return {"messages": len(dump["messages"]), "calls": len(calls)}


def test_swe_agent_fixtures():
    assert swe_counts(FIX / "swe_agent_function_calling.traj") == {"messages": 12, "calls": 5}
    assert swe_counts(FIX / "swe_agent_text_actions.traj") == {"messages": 10, "calls": 4}
    [(dump, _)] = read_all(FIX / "swe_agent_text_actions.traj")
    assert dump["source"]["from_trajectory"] == ["call_4"]
    assert dump["source"]["steps"][-1] == "trajectory/3"


@needs_shared
def test_swe_agent_real_trajectories_match_the_shared_conversion():
    shared = [orjson.loads(x) for x in (SHARED.parent / "swe-agent.jsonl").read_bytes().splitlines()]
    files = sorted((SHARED / "swe-agent").glob("*.traj"))
    assert len(files) == len(shared) == 16
    lengths = sorted(len(s["messages"]) for s in shared)
    ours = sorted(swe_counts(f)["messages"] for f in files)
    assert ours == lengths


# ---------------------------------------------------------------- mini-swe-agent, ShareGPT

def test_mini_swe_agent_tool_calls():
    [(dump, codec)] = read_all(FIX / "mini_swe_agent.traj.json")
    assert codec.format == "mini-swe-agent"
    assert_paired(dump)
    assert all("extra" not in m for m in dump["messages"])
    assert dump["source"]["exit"]["exit_status"] == "Submitted"
    assert dump["source"]["unanswered"] == ["call_m3"]
    assert [m["role"] for m in dump["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]


def test_mini_swe_agent_text_actions():
    [(dump, _)] = read_all(FIX / "mini_swe_agent_text.traj.json")
    assert_paired(dump)
    call = dump["messages"][2]["tool_calls"][0]
    assert orjson.loads(call["function"]["arguments"]) == {"command": "python --version"}
    assert dump["messages"][3] == {"role": "tool", "tool_call_id": "call_1",
                                   "content": "<returncode>0</returncode>\n<output>\nPython 3.12.3\n</output>"}
    assert "tool_calls" not in dump["messages"][4]  # no observation follows: kept as text


def test_mini_swe_agent_responses_items():
    obj = {"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": [
        {"role": "user", "content": "go", "extra": {}},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{\"command\":\"ls\"}", "extra": {}},
        {"role": "tool", "tool_call_id": "c1", "content": "a", "extra": {"returncode": 0}}]}
    dump, codec = formats.read(obj)
    assert codec.format == "mini-swe-agent"
    assert [m["role"] for m in dump["messages"]] == ["user", "assistant", "tool"]
    assert dump["source"]["steps"] == [0, 1, 2]


def test_sharegpt():
    recs = read_all(FIX / "sharegpt.jsonl")
    assert [c.format for _, c in recs] == ["sharegpt"] * 3
    for dump, _ in recs:
        assert_paired(dump)
    weather, _ = recs[1]
    assert weather["messages"][0] == {"role": "system", "content": "You can call tools."}
    assert weather["tools"][0]["name"] == "get_weather"
    assert orjson.loads(weather["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Oslo", "unit": "celsius"}
    parallel, _ = recs[2]
    assert [m.get("tool_call_id") for m in parallel["messages"] if m["role"] == "tool"] == ["call_1", "call_2", "call_3"]
    assert parallel["messages"][3]["content"] == "{\"temperature\":17}"
    assert parallel["source"]["record"] == {"id": "parallel-1"} and parallel["source"]["line"] == 3
    assert parallel["source"]["unanswered"] == ["call_3"]


def test_sharegpt_unknown_speaker_is_invalid():
    with pytest.raises(InvalidInputError, match="unknown speaker 'robot'"):
        formats.read({"conversations": [{"from": "robot", "value": "x"}]})


# ---------------------------------------------------------------- detection

EXISTING = [ROOT / "fixtures" / n for n in ("taubench_airline_5.jsonl", "swe_agent_3.jsonl", "claude_code_session.json",
                                            "airline_list.json")]


@pytest.mark.parametrize("path", EXISTING, ids=lambda p: p.name)
def test_existing_openai_records_are_read_as_before(path):
    from compactor_cli.files.records import iter_records, parse_record

    for rec in iter_records(str(path)):
        dump, codec = formats.parse_record(rec.raw, source=rec.source, line=rec.line)
        before, _ = parse_record(rec.raw)
        assert codec.format == "openai" and dump == before
        assert codec.to_native(dump) == orjson.loads(rec.raw)


def test_every_case_input_is_openai():
    from compactor_cli.files.records import iter_records

    cases = ROOT / "tests" / "cases"
    seen = 0
    for args in cases.glob("*/args"):
        for word in args.read_text().split():
            if word.startswith("{fixtures}/"):
                path = ROOT / "fixtures" / word[len("{fixtures}/"):]
                for rec in iter_records(str(path)):
                    try:
                        obj = orjson.loads(rec.raw)
                    except orjson.JSONDecodeError:
                        continue
                    try:
                        assert formats.detect_format(obj) == "openai"
                    except InvalidInputError:
                        pass  # a bad record stays bad (and says why)
                    seen += 1
    assert seen


@pytest.mark.parametrize("path,expected", [
    (FIX / "claude_code_session.jsonl", "claude-code"), (FIX / "claude_code_tool_heavy.jsonl", "claude-code"),
    (FIX / "codex_rollout.jsonl", "codex"), (FIX / "swe_agent_function_calling.traj", "swe-agent"),
    (FIX / "swe_agent_text_actions.traj", "swe-agent"), (FIX / "mini_swe_agent.traj.json", "mini-swe-agent"),
    (FIX / "mini_swe_agent_text.traj.json", "mini-swe-agent"), (FIX / "sharegpt.jsonl", "sharegpt"),
], ids=lambda x: x.name if isinstance(x, Path) else x)
def test_auto_detects_each_fixture(path, expected):
    assert {c.format for _, c in read_all(path)} == {expected}
    assert {c.format for _, c in read_all(path, expected)} == {expected}


@needs_shared
def test_auto_detects_every_real_sample():
    for path in sorted((SHARED / "claude-code").glob("*.jsonl")):
        assert {c.format for _, c in read_all(path)} == {"claude-code"}, path
    for path in sorted((SHARED / "swe-agent").glob("*.traj")):
        assert {c.format for _, c in read_all(path)} == {"swe-agent"}, path
    for path in (SHARED.parent / "taubench_gpt-4o-airline.jsonl", SHARED.parent / "swe-agent.jsonl",
                 SHARED.parent / "spotter-claude-code.jsonl"):
        assert {c.format for _, c in read_all(path)} == {"openai"}, path


@pytest.mark.parametrize("obj,closest", [
    ({"msgs": [{"role": "user", "content": "hi"}]}, None),
    ({"sessionId": "x", "payload": 1}, "claude-code"),
    ({"history": "not a list", "trajectory": []}, "swe-agent"),
    ({"input": 5, "previous_response_id": "r"}, "responses"),
    ({"system": "s", "max_tokens": 10}, "anthropic"),
    (42, None),
])
def test_unknown_shape_is_invalid_with_a_hint(obj, closest):
    with pytest.raises(InvalidInputError) as err:
        formats.read(obj)
    text = str(err.value)
    if closest:
        assert f"--from {closest}" in text
    else:
        assert "formats read: openai, anthropic, responses" in text


def test_ambiguous_shape_names_the_candidates():
    obj = [{"role": "tool", "tool_call_id": "a", "content": "x"},
           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]}]
    with pytest.raises(InvalidInputError, match="ambiguous record.*--from openai or --from anthropic"):
        formats.read(obj)


# ---------------------------------------------------------------- the tiers on converted logs

def test_tiers_run_on_converted_logs_and_restore():
    for path in (FIX / "claude_code_tool_heavy.jsonl", FIX / "codex_rollout.jsonl", FIX / "swe_agent_text_actions.traj"):
        [(dump, codec)] = read_all(path)
        new, res = reclaim_tool_results(dump, keep=0)
        assert res.reclaimed_count >= 1
        assert restore_details(new).dump == dump
        summarised, status, _ = summarize_dump(dump, keep_recent=4)
        assert status.value in ("SUMMARIZED", "SUMMARIZE_FAILED", "NOTHING_TO_CONDENSE")
        if status.value == "SUMMARIZED":
            assert_paired({"messages": summarised["messages"]})
            assert restore_details(summarised).dump == dump
        assert codec.to_native(new) is new  # a log is written as the OpenAI dump it became


# ---------------------------------------------------------------- convert

def run_convert(args: list[str]) -> tuple[int, str, str]:
    runner = CliRunner()
    result = runner.invoke(convert_command, args)
    return result.exit_code, result.stdout, result.stderr


def target_pairs(obj: dict, to: str) -> tuple[list, list]:
    dump, _ = formats.read(obj, to)
    return calls_and_results(dump)


@pytest.mark.parametrize("to", ["openai", "anthropic", "responses"])
@pytest.mark.parametrize("name", ["claude_code_session.jsonl", "codex_rollout.jsonl", "swe_agent_text_actions.traj",
                                  "swe_agent_function_calling.traj", "mini_swe_agent.traj.json", "sharegpt.jsonl"])
def test_convert_carries_every_call_and_result(tmp_path, name, to):
    out = tmp_path / "out.json"
    report = tmp_path / "report.json"
    code, _, err = run_convert([str(FIX / name), "--to", to, "-o", str(out), "--report", str(report),
                                "--claude-code-history", "full"])  # compared with the whole reading
    assert code == 0, err
    sources = read_all(FIX / name)
    written = [orjson.loads(x) for x in out.read_bytes().splitlines() if x.strip()] \
        if not out.read_bytes().lstrip().startswith(b"{\n") else [orjson.loads(out.read_bytes())]
    assert len(written) == len(sources)
    for (dump, _), obj in zip(sources, written):
        calls, results = calls_and_results(dump)
        got_calls, got_results = target_pairs(obj, to)
        assert got_calls == calls and sorted(got_results) == sorted(results)
    doc = json.loads(report.read_text())
    assert doc["command"] == "convert" and doc["exit_code"] == 0
    assert {i["status"] for i in doc["items"]} == {"CONVERTED"}
    assert {i["to"] for i in doc["items"]} == {to}


def test_convert_reports_what_is_not_carried_over(tmp_path):
    code, out, err = run_convert([str(FIX / "claude_code_session.jsonl"), "--to", "openai"])
    assert code == 0
    assert "not carried over: 1 redacted_thinking blocks dropped" in err
    code, out, err = run_convert([str(FIX / "claude_code_session.jsonl"), "--to", "openai", "--strict"])
    assert code == 1 and "not everything could be carried over" in err
    # a failed record is written unchanged
    assert out.encode() == (FIX / "claude_code_session.jsonl").read_bytes()


def test_convert_bad_record_is_written_unchanged(tmp_path):
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b'{"conversations": [{"from": "human", "value": "hi"}]}\n{"nothing": 1}\n')
    code, out, err = run_convert([str(src), "--to", "anthropic", "--from", "auto"])
    assert code == 1
    lines = out.splitlines()
    assert json.loads(lines[0]) == {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                                    "source": {"format": "sharegpt", "file": str(src), "line": 1, "turns": [0]}}
    assert lines[1] == '{"nothing": 1}'
    assert f"error: {src}:2:" in err


def test_convert_a_request_to_its_own_format_is_exact(tmp_path):
    src = ROOT / "fixtures" / "taubench_airline_5.jsonl"
    code, out, _ = run_convert([str(src), "--to", "openai"])
    assert code == 0
    assert [orjson.loads(x) for x in out.splitlines()] == [orjson.loads(x) for x in src.read_bytes().splitlines()]
