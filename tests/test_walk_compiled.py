"""The record loop's walk compiled (model/_walk.c, issue 32) finds exactly what the Python walk
finds: the same Scan, the same None for a conversation the checks refuse, the same length estimate,
on generated conversations (valid ones and every way of breaking one), on the fixtures' real runs,
and whole runs write the same bytes with either. The extension must be in the installed package:
a wheel built without it would run, slower, and these comparisons would compare the Python with
itself."""

from __future__ import annotations

import gc
import glob
import os
import subprocess
import sys
from typing import Any

import pytest
from helpers import fixture_records
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.model import conversation
from compactor_cli.model.checks import check_pairing, pairing_problems
from compactor_cli.model.conversation import _length, _scan, walk

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")
KEYS = ["role", "content", "tool_calls", "tool_call_id", "function_call", "type", "name", "reasoning",
        "reasoning_content", "text", "id", "function", "arguments", "input", "custom", "extra"]
ROLES = ["system", "developer", "user", "assistant", "tool", "bot", ""]


class Str(str):
    """A str that is not exactly a str (the walks decide on exact types)."""


class Dict(dict):  # type: ignore[type-arg]
    """A dict that is not exactly a dict."""


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=8), st.sampled_from(["call_1", "call_2", "text", "tool"]),
                    st.builds(Str, st.text(max_size=3)))
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=3))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4),
    st.builds(Dict, st.dictionaries(keys, inner, max_size=2))), max_leaves=12)
ids = st.sampled_from(["call_1", "call_2", "call_3"])
calls = st.lists(st.one_of(
    st.fixed_dictionaries({"id": ids, "type": st.just("function"),
                           "function": st.fixed_dictionaries({"name": st.sampled_from(["ls", "cat"]),
                                                              "arguments": st.sampled_from(["{}", '{"a": 1}'])})}),
    st.fixed_dictionaries({"id": ids, "type": st.just("custom"), "custom": st.fixed_dictionaries(
        {"name": st.just("apply_patch"), "input": st.text(max_size=5)})}),
    st.dictionaries(keys, json_values, max_size=4)), max_size=3)
parts = st.lists(st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=6)}),
                           st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]), "text": json_values}),
                           st.dictionaries(keys, json_values, max_size=3)), max_size=3)


@st.composite
def messages(draw: Any) -> Any:
    m: dict[Any, Any] = {}
    if draw(st.integers(0, 9)):
        m["role"] = draw(st.sampled_from(ROLES))
    if draw(st.booleans()):
        m["content"] = draw(st.one_of(st.text(max_size=10), st.none(), parts, json_values))
    if draw(st.integers(0, 3)) == 0:
        m["tool_calls"] = draw(st.one_of(calls, st.none(), json_values))
    if draw(st.integers(0, 3)) == 0:
        m["tool_call_id"] = draw(st.one_of(ids, json_values))
    for k, v in draw(st.dictionaries(st.one_of(keys, st.integers(0, 3)), json_values, max_size=2)).items():
        m.setdefault(k, v)
    return draw(st.sampled_from([m, m, m, m, Dict(m), m.get("content")]))


conversations = st.lists(messages(), max_size=6)


def test_the_compiled_walk_is_built() -> None:
    assert conversation._WALK is not None, (
        "compactor_cli.model._walk is not in the installed package: the wheel was built without a C "
        "compiler, or XCOMPACT_PURE_PYTHON is set")


@settings(max_examples=600)
@given(conversations)
def test_the_compiled_walk_finds_what_the_python_walk_finds(msgs: list[Any]) -> None:
    assert walk(msgs) == _scan(msgs)
    assert conversation.estimated_message_length(msgs) == _length(msgs)
    _same_pairing(msgs)


def _same_pairing(msgs: list[Any]) -> None:
    """Where the walk finds no shape error, the compiled pairing check decides, and says what
    check_pairing says, in its order (elsewhere it may give the case back, never answer wrongly)."""
    compiled = conversation._WALK
    assert compiled is not None
    found = compiled.pairing(msgs)
    if found is not NotImplemented:
        assert found == [s for p in check_pairing(msgs) for s in (p.pointer, p.message)]
    walked = compiled.scan(msgs, conversation.KNOWN_ROLES, conversation.LENGTH_KEYS, conversation._DIRECT_KEYS)
    if walked is not None and walked is not NotImplemented:  # the compiled walk vouched for the shapes
        assert found is not NotImplemented
        assert pairing_problems(msgs) == list(check_pairing(msgs))


extras = st.dictionaries(st.sampled_from(["name", "reasoning", "reasoning_content", "type", "function_call",
                                          "metadata", "text", 7]),
                         st.one_of(st.none(), st.text(max_size=4), json_values), max_size=2)
valid_messages = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "developer"]),
                           "content": st.one_of(st.text(max_size=8), parts)}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": st.one_of(st.none(), st.text(max_size=4), parts),
                           "tool_calls": st.one_of(calls, st.none())}),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": ids, "content": st.text(max_size=6)}))


@st.composite
def near_valid(draw: Any) -> Any:
    """Conversations the checks mostly pass, each message with a few more keys and, now and then,
    one value replaced or one key removed: where the walks' decisions lie."""
    msgs = []
    for m in draw(st.lists(valid_messages, max_size=8)):
        m = {**m, **draw(extras)}
        if draw(st.integers(0, 5)) == 0:
            key = draw(st.sampled_from(sorted(m, key=str)))
            if draw(st.booleans()):
                del m[key]
            else:
                m[key] = draw(json_values)
        msgs.append(m)
    return msgs


@settings(max_examples=600)
@given(near_valid())
def test_on_conversations_near_the_checks(msgs: list[Any]) -> None:
    assert walk(msgs) == _scan(msgs)
    assert conversation.estimated_message_length(msgs) == _length(msgs)
    _same_pairing(msgs)


@st.composite
def turns(draw: Any) -> Any:
    """Conversations of tool-call turns whose results mostly answer them: IDs reused across turns
    and within one, results missing, repeated or out of turn (the pairing check's cases)."""
    msgs: list[Any] = [{"role": "user", "content": "go"}]
    pool = st.sampled_from([f"call_{i}" for i in range(6)])
    for _ in range(draw(st.integers(0, 4))):
        call_ids = draw(st.lists(pool, min_size=1, max_size=3))
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "ls", "arguments": "{}"}} for i in call_ids]})
        answered = draw(st.one_of(st.just(call_ids), st.permutations(call_ids), st.lists(pool, max_size=3)))
        msgs.extend({"role": "tool", "tool_call_id": i, "content": "out"} for i in answered)
        if draw(st.booleans()):
            msgs.append({"role": "assistant", "content": "ok"})
    return msgs


@settings(max_examples=400)
@given(turns())
def test_on_tool_call_turns(msgs: list[Any]) -> None:
    assert walk(msgs) == _scan(msgs)
    _same_pairing(msgs)


def _nested(depth: int) -> Any:
    v: Any = {"text": "x"}
    for _ in range(depth):
        v = {"content": [v]}
    return v


@pytest.mark.parametrize("depth", [50, 99, 100, 101, 140])  # levels of containers: 2 x depth + 1
def test_a_deep_value_gets_the_python_answer(depth: int) -> None:
    msgs = [{"role": "user", "content": "hi", "meta": _nested(depth)}, {"role": "assistant", "content": "ok"}]
    assert walk(msgs) == _scan(msgs)
    assert walk(msgs) is not None and walk(msgs).length == 2 + 2 + 1  # type: ignore[union-attr]
    assert conversation.estimated_message_length(msgs) == _length(msgs)
    compiled = conversation._WALK
    assert compiled is not None
    gives_back = depth >= 100  # deeper than MAX_DEPTH (200 levels): the Python decides
    found = compiled.scan(msgs, conversation.KNOWN_ROLES, conversation.LENGTH_KEYS, conversation._DIRECT_KEYS)
    assert (found is NotImplemented) == gives_back
    assert (compiled.length(msgs, conversation.LENGTH_KEYS) is NotImplemented) == gives_back


def test_a_value_deeper_than_python_recurses_fails_as_before() -> None:
    msgs = [{"role": "user", "content": "hi", "meta": _nested(sys.getrecursionlimit() + 10)}]
    with pytest.raises(RecursionError):
        _scan(msgs)
    with pytest.raises(RecursionError):
        walk(msgs)


# ---- keys and lists that run Python code while the walk holds references (found by an attack on
# the extension: a use-after-free, a wrong answer, a SystemError): the walk must give them back


def _both(make: Any) -> tuple[Any, Any]:
    """(walk's answer, _scan's answer) on fresh inputs from ``make``; an exception as its type and text."""
    out = []
    for fn in (walk, _scan):
        try:
            out.append(fn(make()))
        except Exception as exc:  # noqa: BLE001  compared, not raised
            out.append((type(exc).__name__, str(exc)))
    return out[0], out[1]


def test_a_collection_during_the_pairing_check_frees_nothing_it_reads() -> None:
    """On 3.11 the cyclic collector runs inside an allocation of a tracked object (a tuple), and
    with it any __del__: one that replaced the message being read made pairing() read freed
    memory (a segfault; found by an attack on the extension). It now allocates no tracked object
    while it holds borrowed references."""
    msgs: list[Any] = [{"role": "assistant", "tool_calls": [{"id": "a"}]}, None]

    class Bomb:  # cyclic garbage: each collection replaces (frees) the message pairing() is on
        def __del__(self) -> None:
            msgs[1] = {"role": "".join(["assis", "tant"]), "tool_calls": [{"id": "b"}]}
            again = Bomb()
            again.me = again  # type: ignore[attr-defined]

    pairing = conversation._WALK.pairing  # type: ignore[union-attr]
    threshold = gc.get_threshold()
    Bomb.__del__(None)  # type: ignore[arg-type]
    keep = [(object(), object()) for _ in range(3000)]  # empty the 2-tuple free list
    gc.set_threshold(1)
    try:
        found = pairing(msgs)
    finally:
        gc.set_threshold(*threshold)
        del keep
    if found is not NotImplemented:  # no crash, and an answer only for what it read
        assert found == [s for p in check_pairing(msgs) for s in (p.pointer, p.message)]


def test_a_key_whose_eq_replaces_the_content_being_read() -> None:
    """A part's key collides with "type" and its __eq__ replaces the message's content, freeing the
    parts list the walk was reading (before: a wrong length, or a use-after-free)."""
    box: dict[str, Any] = {}

    class Key:
        armed = False

        def __hash__(self) -> int:
            return hash("type")

        def __eq__(self, other: object) -> bool:
            if Key.armed:
                Key.armed = False
                box["m"]["content"] = "replaced"
            return False

    def make() -> Any:
        parts = [{Key(): 0, "type": "text", "text": "abc"}] + [{"type": "text", "text": "x" * 40} for _ in range(3)]
        box["m"] = {"role": "user", "content": parts}
        box["keep"] = parts[:]
        Key.armed = True
        return [box["m"]]

    compiled, python = _both(make)
    assert compiled == python


def test_a_str_subclass_key_whose_eq_clears_the_messages() -> None:
    box: dict[str, Any] = {}

    class Key(str):
        armed = False
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            if Key.armed:
                Key.armed = False
                box["msgs"].clear()
            return str.__eq__(self, other)

    def make() -> Any:
        box["msgs"] = [{"role": "".join(["to", "ol"]), Key("content"): "hello", "tool_call_id": "c1"}]
        Key.armed = True
        return box["msgs"]

    compiled, python = _both(make)
    assert compiled == python


def test_a_key_equal_only_the_first_time_it_is_compared() -> None:
    """A lookup finds the key and the next one does not: the Python's KeyError, not a SystemError."""

    class Once(str):
        n = 0
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            Once.n += 1
            return Once.n == 1

    def make() -> Any:
        call: dict[Any, Any] = {"id": "c1"}
        call[Once("function")] = {"name": "f"}
        Once.n = 0
        return [{"role": "assistant", "content": None, "tool_calls": [call]}]

    compiled, python = _both(make)
    assert compiled == python


def test_a_list_subclass_is_walked_as_it_iterates() -> None:
    class Listed(list):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            return iter([{"role": "user", "content": "hello"}])

    assert walk(Listed()) == _scan(Listed())
    assert walk(Listed([{"role": "bot"}])) == _scan(Listed([{"role": "bot"}]))


def test_out_of_memory_leaves_the_messages_alive() -> None:
    """Each allocation of the walk failing in turn: a MemoryError each time, and the list's
    reference count as it was (before: one reference too few per failure, then a crash)."""
    testcapi = pytest.importorskip("_testcapi")
    msgs = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "a", "content": "x"}]
    before = sys.getrefcount(msgs)
    assert conversation._WALK is not None
    for start in range(6):
        testcapi.set_nomemory(start, start + 1)
        try:
            conversation._WALK.scan(msgs, conversation.KNOWN_ROLES, conversation.LENGTH_KEYS,
                                    conversation._DIRECT_KEYS)
        except MemoryError:
            pass
        finally:
            testcapi.remove_mem_hooks()
        assert sys.getrefcount(msgs) == before


def test_under_a_lowered_recursion_limit_the_python_decides() -> None:
    msgs = [{"role": "user", "content": "hi", "meta": _nested(60)}]  # 121 levels: the compiled walk's to decide
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100)
    try:
        with pytest.raises(RecursionError):
            walk(msgs)
        with pytest.raises(RecursionError):
            conversation.estimated_message_length(msgs)
    finally:
        sys.setrecursionlimit(limit)


def test_on_the_real_transcripts() -> None:
    seen = 0
    for path, rec in fixture_records():
        msgs = rec.get("messages") if isinstance(rec, dict) else rec
        if isinstance(msgs, list):
            assert walk(msgs) == _scan(msgs), f"{path}"
            assert conversation.estimated_message_length(msgs) == _length(msgs)
            _same_pairing(msgs)
            seen += walk(msgs) is not None
    assert seen > 20


@pytest.mark.slow
@pytest.mark.parametrize("command", [["toolcall", "--keep", "2"], ["summarize"],
                                     ["compact", "--token-threshold", "2000", "--backend", "extractive"]])
def test_whole_runs_write_the_same_bytes_with_either_walk(command: list[str], tmp_path: Any) -> None:
    inputs = sorted(glob.glob(os.path.join(FIXTURES, "*.jsonl")) + glob.glob(os.path.join(FIXTURES, "real", "*"))
                    + glob.glob(os.path.join(FIXTURES, "formats", "*")))
    assert len(inputs) > 10
    outs = []
    for pure in ("", "1"):
        out = tmp_path / f"out{pure}"
        env = {**os.environ, "XCOMPACT_PURE_PYTHON": pure}
        done = subprocess.run([sys.executable, "-m", "compactor_cli", *command, *inputs, "-o", str(out), "-q",
                               "--report", str(tmp_path / f"report{pure}.json")],
                              env=env, capture_output=True, text=True)
        files = sorted((str(p.relative_to(out)), p.read_bytes()) for p in out.rglob("*") if p.is_file())
        outs.append((done.returncode, done.stderr, files))
    assert outs[0] == outs[1]
    assert outs[0][2], "the runs wrote outputs"
