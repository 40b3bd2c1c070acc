"""One odd value never kills the batch (issue 16): a value of the wrong type anywhere in a
record of any format is that record's INVALID_INPUT (written unchanged, one line naming the
file, the line and the problem); every other record of the batch is processed as without it.
Through the real CLI (click's runner, in process, so hypothesis can try many values)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import FIXTURES, tool_conv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_dumps import ANTHROPIC, RESPONSES

from compactor_cli.cli import cli

FORMATS_DIR = FIXTURES / "formats"

#: One record (or whole log) per format; the values under each path are replaced in turn.
BASES: dict[str, tuple[str, Any]] = {
    "openai": ("r.jsonl", tool_conv(4, size=200)),
    "anthropic": ("r.jsonl", ANTHROPIC),
    "responses": ("r.jsonl", RESPONSES),
    "swe-agent": ("r.traj", json.loads((FORMATS_DIR / "swe_agent_function_calling.traj").read_text())),
    "mini-swe-agent": ("r.traj.json", json.loads((FORMATS_DIR / "mini_swe_agent.traj.json").read_text())),
    "sharegpt": ("r.jsonl", json.loads((FORMATS_DIR / "sharegpt.jsonl").read_text().splitlines()[0])),
    "claude-code": ("r.jsonl", [json.loads(ln) for ln in
                                (FORMATS_DIR / "claude_code_session.jsonl").read_text().splitlines() if ln.strip()]),
    "codex": ("r.jsonl", [json.loads(ln) for ln in
                          (FORMATS_DIR / "codex_rollout.jsonl").read_text().splitlines() if ln.strip()]),
}
LINE_LOGS = ("claude-code", "codex")

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=5), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["type", "role", "id", "url", "text", "content", "x"]),
                                      inner, max_size=3), max_leaves=6)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:8]):
            found += _paths(v, prefix + (i,))
    return found


PATHS = {fmt: _paths(base) for fmt, (_, base) in BASES.items()}


def _set(obj: Any, path: tuple, value: Any) -> Any:
    obj = copy.deepcopy(obj)
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


def _encode(fmt: str, obj: Any, name: str) -> bytes:
    if fmt in LINE_LOGS:
        return b"".join(json.dumps(o).encode() + b"\n" for o in obj)
    if name.endswith(".jsonl"):
        return json.dumps(obj).encode() + b"\n"
    return json.dumps(obj, indent=2).encode() + b"\n"


COMMANDS = [["toolcall", "--keep", "0"], ["restore"], ["validate"], ["convert", "--to", "anthropic"],
            ["convert", "--to", "responses"], ["convert", "--to", "openai"]]


def _check_batch(tmp_path: Path, fmt: str, mutated: Any, command: list[str]) -> None:
    name, base = BASES[fmt]
    work = tmp_path / "w"
    if work.exists():
        import shutil

        shutil.rmtree(work)
    (work / "in").mkdir(parents=True)
    good = orjson.dumps(tool_conv(3, size=200)) + b"\n"
    odd = work / "in" / name
    odd.write_bytes(_encode(fmt, mutated, name) + (good if name.endswith(".jsonl") and fmt not in LINE_LOGS else b""))
    (work / "in" / "good.jsonl").write_bytes(good)
    args = [*command, str(work / "in")]
    if command[0] != "validate":
        args += ["-o", str(work / "out")]
    res = CliRunnerOnce.invoke(cli, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.stderr
    assert res.exit_code in (0, 1), res.stderr
    if command[0] != "validate":  # the good file, and the good line after the odd one, were processed
        alone = CliRunnerOnce.invoke(cli, [*command, str(work / "in" / "good.jsonl")])
        assert (work / "out" / "good.jsonl").read_bytes() == alone.stdout_bytes
        if name.endswith(".jsonl") and fmt not in LINE_LOGS:
            assert (work / "out" / name).read_bytes().splitlines()[-1] == alone.stdout_bytes.splitlines()[-1]
    for line in res.stderr.splitlines():
        if line.startswith("error:") and not line.startswith("error: more records"):
            assert str(work / "in") in line  # names the file (and the line)


from click.testing import CliRunner  # noqa: E402

CliRunnerOnce = CliRunner()


@pytest.mark.parametrize("fmt", list(BASES))
# a fixed count, not the profile's: every example runs every command, for each format
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_arbitrary_value_in_any_field_fails_only_its_record(tmp_path, fmt, data):
    path = data.draw(st.sampled_from(PATHS[fmt]), label="path")
    value = data.draw(JSON, label="value")
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    _check_batch(tmp_path, fmt, _set(BASES[fmt][1], path, value), command)


ISSUE_CASES = {
    "role-object": ("openai", ("messages", 1, "role"), {"a": 1}),
    "part-type-list": ("openai", ("messages", 1, "content"), [{"type": ["text"], "text": "x"}]),
    "tool-call-id-list": ("openai", ("messages", 2, "tool_calls", 0, "id"), ["c1"]),
    "image-url-string": ("openai", ("messages", 1, "content"), [{"type": "image_url", "image_url": "http://x/y.png"}]),
    "anthropic-block-type-list": ("anthropic", ("messages", 1, "content", 1, "type"), ["text"]),
    "responses-item-type-object": ("responses", ("input", 2, "type"), {"a": 1}),
    "anthropic-tool-use-id-list": ("anthropic", ("messages", 1, "content", 2, "id"), ["toolu_01"]),
    "anthropic-tool-use-id-list-result": ("anthropic", ("messages", 2, "content", 0, "tool_use_id"), ["toolu_01"]),
    "responses-call-id-list": ("responses", ("input", 2, "call_id"), ["call_1"]),
    "responses-output-call-id-list": ("responses", ("input", 3, "call_id"), ["call_1"]),
    "claude-code-tool-use-id-list": ("claude-code", (7, "message", "content", 0, "tool_use_id"), ["toolu_x"]),
}


@pytest.mark.parametrize("case", list(ISSUE_CASES))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:3:2]))
def test_the_issue_s_odd_values_fail_only_their_record(tmp_path, case, command):
    fmt, path, value = ISSUE_CASES[case]
    _check_batch(tmp_path, fmt, _set(BASES[fmt][1], path, value), command)


def test_swe_agent_tool_call_ids_as_an_object_fails_only_its_record(tmp_path):
    base = BASES["swe-agent"][1]
    history = base["history"]
    index = next(i for i, m in enumerate(history) if "tool_call_ids" in m)
    for command in COMMANDS:
        for odd in ({"a": 1}, {"a": "call_1", "b": "call_2"}, "call_1", 5):
            _check_batch(tmp_path, "swe-agent", _set(base, ("history", index, "tool_call_ids"), odd), command)


@pytest.mark.parametrize("odd", [{"messages": "x"}, {"messages": [None]}, {"messages": [[]]}, {"messages": None},
                                 {"messages": [{"role": "tool", "tool_call_id": ["c"], "content": "x"}]}])
def test_extract_past_an_odd_record_finds_the_result(tmp_path, odd):
    """extract stopped with a traceback at the first record of an unexpected shape."""
    from compactor_cli import reclaim_tool_results

    compacted, _ = reclaim_tool_results(tool_conv(3, size=300), keep=0)
    src = tmp_path / "c.jsonl"
    src.write_bytes(orjson.dumps(odd) + b"\n" + orjson.dumps(compacted) + b"\n")
    res = CliRunnerOnce.invoke(cli, ["extract", "call_0", str(src)])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.stdout.startswith("result 0 ")
    assert res.exit_code == 1 and f"error: {src}:1:" in res.stderr
