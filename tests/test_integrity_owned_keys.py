"""Malformed keys that xcompact (and xun) own — compacted_tool_results, summarized_messages,
compaction_counter, xcompact, tokens_used — make a record INVALID_INPUT with a message naming the
key, written unchanged, while the batch goes on; they never crash a command or get mangled."""

from __future__ import annotations

import copy

import orjson
import pytest
from helpers import long_conv, tool_conv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import TEXT, conversations

from compactor_cli import check_conversation, placeholder_for, reclaim_tool_results
from compactor_cli.cli import cli
from compactor_cli.errors import InvalidInputError

OWNED = ("compacted_tool_results", "summarized_messages", "compaction_counter", "xcompact", "tokens_used")

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10)

MESSAGE = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": TEXT}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": st.sampled_from(["a", "b", "a#2", ""]),
                           "content": st.one_of(TEXT, st.sampled_from([placeholder_for("a"), placeholder_for("b")]))}),
    JSON)


def maybe(strategy):
    """Plausible values most of the time, anything JSON sometimes."""
    return st.one_of(strategy, strategy, JSON)


ARCHIVE_ENTRY = st.one_of(
    st.fixed_dictionaries({}, optional={
        "round": maybe(st.integers(0, 4)),
        "system": maybe(st.one_of(st.none(), st.fixed_dictionaries({"role": st.just("system"), "content": TEXT}))),
        "head": maybe(st.lists(MESSAGE, max_size=4)),
        "forced_user_at": maybe(st.one_of(st.none(), st.integers(-1, 5))),
        "replaced_keys": maybe(st.fixed_dictionaries({}, optional={"tokens_used": maybe(st.integers(0, 99)),
                                                                   "compaction_counter": JSON})),
    }),
    st.fixed_dictionaries({"round": maybe(st.integers(0, 4)), "dropped": maybe(st.just(True)),
                           "tool_call_ids": maybe(st.lists(st.sampled_from(["a", "b", "a#2"]), max_size=3))}),
    JSON)

COUNTER = st.fixed_dictionaries({}, optional={"summary_rounds": maybe(st.integers(0, 4)),
                                              "toolcall_rounds": maybe(st.integers(0, 4))})

ALIAS = st.fixed_dictionaries({"id": maybe(st.sampled_from(["a", "b", "a#2"])), "occurrence": maybe(st.integers(0, 3)),
                               "key": maybe(st.one_of(st.none(), st.sampled_from(["a", "a~1", "b#2~1"])))})

META = st.fixed_dictionaries({}, optional={
    "replaced": maybe(st.dictionaries(st.sampled_from(["tokens_used", "compaction_counter", "messages"]), JSON,
                                      max_size=2)),
    "absent": maybe(st.lists(st.sampled_from(["tokens_used", "compaction_counter", "messages", "x"]), max_size=2)),
    "input_form": maybe(st.just("list")),
    "tool_result_keys": maybe(st.lists(ALIAS, max_size=3)),
    "archived_rounds": maybe(st.integers(0, 3)),
    "empty_store": maybe(st.just(True)),
})

OWNED_VALUES = {
    "compacted_tool_results": maybe(st.dictionaries(st.sampled_from(["a", "b", "a#2", "a~1", ""]),
                                                    st.one_of(TEXT, JSON), max_size=3)),
    "summarized_messages": maybe(st.lists(ARCHIVE_ENTRY, max_size=3)),
    "compaction_counter": maybe(COUNTER),
    "xcompact": maybe(META),
    "tokens_used": maybe(st.integers(0, 10**6)),
}


@st.composite
def fuzzed_records(draw) -> dict:
    """A conversation — fresh, or already through toolcall/summarize — with some owned keys
    set, replaced or deleted."""
    base = draw(st.sampled_from(["fresh", "toolcall", "summarized"]))
    if base == "fresh":
        dump = draw(conversations())
    else:
        dump = _compacted(base, draw(st.integers(0, 2)))
    for key in draw(st.lists(st.sampled_from(OWNED), min_size=1, max_size=3, unique=True)):
        action = draw(st.sampled_from(["set", "set", "delete", "poke"]))
        if action == "delete":
            dump.pop(key, None)
        elif action == "poke" and isinstance(dump.get(key), (dict, list)) and dump[key]:
            _poke(draw, dump[key])  # one field deep inside a real value
        else:
            dump[key] = draw(OWNED_VALUES[key])
    return dump


def _poke(draw, value) -> None:
    while True:
        if isinstance(value, dict) and value:
            k = draw(st.sampled_from(sorted(value)))
        elif isinstance(value, list) and value:
            k = draw(st.integers(0, len(value) - 1))
        else:
            return
        if isinstance(value[k], (dict, list)) and value[k] and draw(st.booleans()):
            value = value[k]
            continue
        value[k] = draw(JSON)
        return


_COMPACTED: dict = {}


def _compacted(kind: str, variant: int) -> dict:
    """Real outputs of toolcall and summarize+toolcall to mutate (built once)."""
    key = (kind, variant)
    if key not in _COMPACTED:
        from compactor_cli import summarize_dump

        if variant:
            dump = long_conv(rounds=6 + 2 * variant, size=300)
        else:
            dump = tool_conv(n_tools=4, ids=["a", "b", "a", "a#2"])
        dump, _ = reclaim_tool_results(dump, keep=1)
        if kind == "summarized":
            dump, _, _ = summarize_dump(dump, keep_recent=4)
            dump, _ = reclaim_tool_results(dump, keep=0)
        _COMPACTED[key] = dump
    return copy.deepcopy(_COMPACTED[key])


COMMANDS = {
    "toolcall": ["toolcall", "--keep", "1"],
    "toolcall-drop": ["toolcall", "--keep", "0", "--originals", "drop"],
    "summarize": ["summarize", "--backend", "extractive", "--keep-recent", "2"],
    "compact": ["compact", "--backend", "extractive", "--token-threshold", "50", "--keep", "1", "--keep-recent", "2"],
    "restore": ["restore"],
    "validate": ["validate"],
}

def processed(status: str) -> bool:
    from compactor_cli.status import Status

    return status in {s.value for s in Status} and status != "INVALID_INPUT"


def run(runner, tmp_path, name: str, lines: list[bytes]):
    src = tmp_path / f"in-{name}.jsonl"
    out = tmp_path / f"out-{name}.jsonl"
    report = tmp_path / f"report-{name}.json"
    src.write_bytes(b"".join(line + b"\n" for line in lines))
    for p in (out, report):
        if p.exists():
            p.unlink()
    args = [*COMMANDS[name], "-q", str(src), "--report", str(report)]
    if name != "validate":
        args += ["-o", str(out)]
    result = runner.invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"{name} crashed: {result.exception!r}\n{result.stderr}"
    assert result.exit_code in (0, 1), (name, result.exit_code, result.stderr)
    items = orjson.loads(report.read_bytes())["items"]
    written = out.read_bytes().splitlines() if name != "validate" else None
    return items, written


@pytest.mark.slow
# a fixed count, not the profile's: every example runs every command (~0.1 s each)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(fuzzed_records())
def test_every_command_survives_anything_in_the_owned_keys(runner, tmp_path, record):
    good = orjson.dumps(tool_conv(n_tools=3))
    raw = orjson.dumps(record)
    lines = [good, raw]
    for name in COMMANDS:
        items, written = run(runner, tmp_path, name, lines)
        assert [i["line"] for i in items] == [1, 2]
        assert processed(items[0]["status"]), (name, items[0])  # the batch goes on
        item = items[1]
        if item["status"] == "INVALID_INPUT":
            assert any(key in item["error"] for key in OWNED), item["error"]  # names the key
            if written is not None:
                assert written[1] == raw, f"{name} changed an invalid record"
            assert [p for p in check_conversation(record) if p.fatal], "refused, but check_conversation is happy"
        else:
            assert processed(item["status"]), (name, item)
            assert not [p for p in check_conversation(record) if p.fatal]
            if written is not None:  # what is written is a valid record again
                out = orjson.loads(written[1])
                out = {"messages": out} if isinstance(out, list) else out
                assert not [p for p in check_conversation(out) if p.fatal], (name, check_conversation(out))


# ---- the cases reported, each by name

@pytest.mark.parametrize("key, value, pointer", [
    ("summarized_messages", 5, "/summarized_messages"),
    ("summarized_messages", "oops", "/summarized_messages"),
    ("summarized_messages", [3], "/summarized_messages/0"),
    ("summarized_messages", [{"round": 1, "head": "oops"}], "/summarized_messages/0/head"),
    ("summarized_messages", [{"round": 1, "head": [], "forced_user_at": 3}], "/summarized_messages/0/forced_user_at"),
    ("summarized_messages", [{"round": 1, "head": [{"role": "robot"}]}], "/summarized_messages/0/head/0/role"),
    ("compaction_counter", "x", "/compaction_counter"),
    ("compaction_counter", {"summary_rounds": "x"}, "/compaction_counter/summary_rounds"),
    ("xcompact", {"replaced": "x"}, "/xcompact/replaced"),
    ("xcompact", {"replaced": {"messages": []}}, "/xcompact/replaced/messages"),
    ("xcompact", {"absent": "oops"}, "/xcompact/absent"),
    ("xcompact", {"absent": ["messages"]}, "/xcompact/absent"),
    ("xcompact", {"tool_result_keys": [{"id": "a"}]}, "/xcompact/tool_result_keys/0"),
    ("compacted_tool_results", [], "/compacted_tool_results"),
    ("compacted_tool_results", {"a": 5}, "/compacted_tool_results/a"),
    ("tokens_used", "many", "/tokens_used"),
])
def test_malformed_owned_keys_are_named_by_check_conversation(key, value, pointer):
    dump = tool_conv(n_tools=2)
    dump[key] = value
    fatal = [p for p in check_conversation(dump) if p.fatal]
    assert fatal and fatal[0].pointer == pointer and key in str(fatal[0])
    # the library's tier 1 checks them as summarize_dump and restore_conversation do: its own
    # error, naming where, not a ValueError or AttributeError from inside, nor a store accepted
    with pytest.raises(InvalidInputError) as raised:
        reclaim_tool_results(dump, keep=0)
    assert raised.value.pointer == pointer and dump[key] == value


@pytest.mark.parametrize("command", ["toolcall", "restore", "validate", "compact"])
def test_a_malformed_record_is_written_unchanged_and_the_batch_goes_on(runner, tmp_path, command):
    bad = tool_conv(n_tools=4)
    bad["summarized_messages"] = [{"round": 1, "head": "oops"}]
    lines = [orjson.dumps(tool_conv(n_tools=4)), orjson.dumps(bad), orjson.dumps(tool_conv(n_tools=5))]
    items, written = run(runner, tmp_path, command, lines)
    assert [i["status"] == "INVALID_INPUT" for i in items] == [False, True, False]
    assert "/summarized_messages/0/head" in items[1]["error"]
    if written is not None:
        assert written[1] == lines[1]
