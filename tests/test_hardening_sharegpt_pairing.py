"""Issue 28: a ShareGPT record where several function calls precede their observations pairs
each observation with its own call, in order; never a result attached silently to another
tool. Where the pairing cannot be told, the record fails with an error naming it."""

from __future__ import annotations

import orjson
import pytest

from compactor_cli import formats
from compactor_cli.cli import cli
from compactor_cli.errors import InvalidInputError


def _call(name: str, **args: object) -> dict:
    return {"from": "function_call", "value": orjson.dumps({"name": name, "arguments": args}).decode()}


def _obs(value: object) -> dict:
    return {"from": "observation", "value": value if isinstance(value, str) else orjson.dumps(value).decode()}


def _pairs(dump: dict) -> list[tuple[str, str]]:
    """(tool name, its result) for every call, through the IDs."""
    names = {c["id"]: c["function"]["name"] for m in dump["messages"] if m["role"] == "assistant"
             for c in m.get("tool_calls") or ()}
    return [(names[m["tool_call_id"]], m["content"]) for m in dump["messages"] if m["role"] == "tool"]


def test_two_call_turns_then_two_observations_pair_in_order():
    rec = {"conversations": [{"from": "human", "value": "Weather in Oslo, and the time there?"},
                             _call("get_weather", city="Oslo"), _call("get_time", tz="Europe/Oslo"),
                             _obs("weather: 4 C"), _obs("time: 10:02"),
                             {"from": "gpt", "value": "4 C at 10:02."}]}
    dump, codec = formats.read(rec)
    assert codec.format == "sharegpt"
    assert _pairs(dump) == [("get_weather", "weather: 4 C"), ("get_time", "time: 10:02")]
    assert "unanswered" not in dump["source"] and "orphan_results" not in dump["source"]
    calls = [m for m in dump["messages"] if m.get("tool_calls")]
    assert len(calls) == 1 and len(calls[0]["tool_calls"]) == 2  # one assistant turn calling both


def test_observations_that_are_json_lists_are_not_split_when_each_call_has_its_own():
    """A list call then two observations, the first of which happens to be a JSON list of two."""
    rec = {"conversations": [{"from": "human", "value": "Files in a and b?"},
                             {"from": "function_call", "value": orjson.dumps([
                                 {"name": "ls", "arguments": {"dir": "a"}},
                                 {"name": "stat", "arguments": {"path": "b"}}]).decode()},
                             _obs(["x.py", "y.py"]), _obs({"size": 3})]}
    dump, _ = formats.read(rec)
    assert _pairs(dump) == [("ls", '["x.py","y.py"]'), ("stat", '{"size":3}')]
    assert "orphan_results" not in dump["source"]


def test_one_observation_holding_a_list_still_answers_parallel_calls():
    rec = {"conversations": [{"from": "human", "value": "Rome and Madrid?"},
                             _call("get_weather", city="Rome"), _call("get_weather", city="Madrid"),
                             _obs([{"t": 14}, {"t": 17}])]}
    dump, _ = formats.read(rec)
    assert _pairs(dump) == [("get_weather", '{"t":14}'), ("get_weather", '{"t":17}')]


@pytest.mark.parametrize("observations", [["only one"], ["one", "two", "three"]])
def test_an_ambiguous_pairing_is_an_error_naming_the_record(observations):
    rec = {"conversations": [{"from": "human", "value": "go"}, _call("a"), _call("b"),
                             *[_obs(o) for o in observations]]}
    with pytest.raises(InvalidInputError, match="ambiguous") as caught:
        formats.read(rec)
    assert "/conversations/3" in str(caught.value)


def test_through_the_cli_the_record_is_named_and_the_batch_goes_on(runner, tmp_path):
    good = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    bad = {"conversations": [{"from": "human", "value": "go"}, _call("a"), _call("b"), _obs("which?")]}
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in (good, bad)))
    res = runner.invoke(cli, ["convert", "--to", "openai", str(src), "-o", str(tmp_path / "out.jsonl")])
    assert res.exit_code == 1, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "in.jsonl:2" in errors[0] and "ambiguous" in errors[0], res.stderr
    assert "Traceback" not in res.stderr
