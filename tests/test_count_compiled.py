"""A conversation's token count summed in C (model/_count.c, issue 32) is the Python's sum, to the
token: the same count (or the same exception) for generated messages of every shape the counter
reads (plain, content parts, names, reasonings, function and custom tool calls, values of odd
types, str subclasses), counted cold and again from warm memos, and on the fixtures' real runs."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from helpers import fixture_records
from hypothesis import given, settings
from hypothesis import strategies as st
from test_walk_compiled import Str, conversations, near_valid, turns

from compactor_cli.model import tokens
from compactor_cli.model.tokens import REPLY_PRIMING, MemoTokens, TokenCounter


def test_the_compiled_sum_is_built() -> None:
    assert tokens._COUNT is not None, (
        "compactor_cli.model._count is not in the installed package: the wheel was built without a C "
        "compiler, or XCOMPACT_PURE_PYTHON is set")


def _python(counter: TokenCounter, msgs: Any) -> int:
    return REPLY_PRIMING + sum(counter.message(m) for m in msgs)


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001  the same failure either way is the same answer
        return type(exc)


def _same(msgs: Any) -> None:
    compiled, python = TokenCounter("cl100k_base"), TokenCounter("cl100k_base")
    for _ in range(2):  # cold, then from the memos the first count filled
        assert _outcome(lambda: compiled.conversation(msgs)) == _outcome(lambda: _python(python, msgs))
    # a record's counts per message (MemoTokens: the C's list of each message's count), cold and warm
    for counter in (TokenCounter("cl100k_base"), compiled):
        memo = MemoTokens(counter)
        want = _outcome(lambda: [python.message(m) for m in msgs])
        got = _outcome(lambda: (memo.conversation(msgs), [memo.memo[id(m)][1] for m in msgs]))
        assert got == (REPLY_PRIMING + sum(want), want) if isinstance(want, list) else got == want


LONG = ["x" * 40, "the same long text that the memo holds " * 2, "é" * 33, "a\ud800b" * 12]
texts = st.one_of(st.text(max_size=6), st.sampled_from(LONG), st.builds(Str, st.sampled_from(["s", "y" * 40])))
odd = st.one_of(st.none(), st.integers(-1, 3), st.booleans(), st.just([]), st.just({}), st.just(["a"]))
function_calls = st.fixed_dictionaries({"id": st.just("c1"), "type": st.just("function"), "function": st.one_of(
    st.fixed_dictionaries({}, optional={"name": st.one_of(texts, odd), "arguments": st.one_of(texts, odd)}),
    odd)})
custom_calls = st.fixed_dictionaries({"type": st.just("custom"), "custom": st.one_of(
    st.fixed_dictionaries({"name": texts, "input": texts}), odd)})
tool_calls = st.one_of(st.lists(st.one_of(function_calls, custom_calls, odd, texts), max_size=3), odd, texts)
parts = st.lists(st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
                           st.fixed_dictionaries({"type": st.just("image_url"),
                                                  "image_url": st.just({"url": "data:x"})})), max_size=2)


@st.composite
def counted_messages(draw: Any) -> Any:
    m: dict[Any, Any] = {}
    if draw(st.integers(0, 6)):
        m["role"] = draw(st.one_of(st.sampled_from(["user", "assistant", "tool", "system", ""]), texts, odd))
    if draw(st.integers(0, 4)):
        m["content"] = draw(st.one_of(texts, texts, parts, odd))
    for key, values in (("name", st.one_of(texts, odd)), ("reasoning", st.one_of(texts, odd)),
                        ("reasoning_content", texts), ("tool_calls", tool_calls), ("tool_call_id", texts),
                        ("extra", odd)):
        if draw(st.integers(0, 3)) == 0:
            m[key] = draw(values)
    return m


@settings(max_examples=1500, deadline=None)
@given(st.lists(counted_messages(), max_size=6))
def test_on_every_shape_the_counter_reads(msgs: list[Any]) -> None:
    _same(msgs)


@settings(max_examples=300, deadline=None)
@given(st.one_of(conversations, near_valid(), turns()))
def test_on_the_walks_conversations(msgs: list[Any]) -> None:
    _same(msgs)


def test_a_list_subclass_and_a_non_list_go_to_the_python() -> None:
    class Messages(list):  # type: ignore[type-arg]
        pass

    msgs = [{"role": "user", "content": "hi"}]
    assert tokens._COUNT is not None
    counter = TokenCounter("cl100k_base")
    assert tokens._COUNT.conversation(Messages(msgs), {}, {}, counter.text, counter.short, 32, 3, 1, 3,
                                      counter.message) is NotImplemented
    assert counter.conversation(Messages(msgs)) == _python(counter, msgs)


def test_a_count_that_is_not_an_int_is_an_error() -> None:
    assert tokens._COUNT is not None
    with pytest.raises(ValueError, match="token count"):
        tokens._COUNT.conversation([{"role": "user", "content": "hi"}], {}, {}, lambda s: -1, lambda s: 1, 32,
                                   3, 1, 3, lambda m: 0)


def test_on_the_real_transcripts() -> None:
    seen = 0
    for _path, rec in fixture_records():
        msgs = rec.get("messages") if isinstance(rec, dict) else rec
        if isinstance(msgs, list):
            _same(msgs)
            seen += 1
    assert seen > 20


def test_callbacks_that_change_the_messages_free_nothing_it_reads() -> None:
    """The texts are counted by Python callbacks, which may run any code: one that empties the
    message being read and replaces the list and its tool calls must not make the sum read freed
    memory (every object the walk is on is held by a reference of its own)."""
    calls: list[Any] = [{"function": {"name": "f" * 40, "arguments": "y" * 40}}, {"function": {"name": "g"}}]
    msgs: list[Any] = [{"role": "assistant", "content": "x" * 40, "name": "n" * 40, "tool_calls": calls},
                       {"role": "user", "content": "z"}]

    def text(s: str) -> int:
        msgs[0].clear()
        msgs[:] = [{"role": "tool"}]
        calls.clear()
        gc.collect()
        return 1

    assert tokens._COUNT is not None
    found = tokens._COUNT.conversation(msgs, {}, {}, text, lambda s: 1, 1, 3, 1, 3, lambda m: 2)
    assert isinstance(found, int) and found > 0
    calls[:] = [{"function": {"name": "f" * 40, "arguments": "y" * 40}}, {"function": {"name": "g"}}]
    msgs[:] = [{"role": "assistant", "content": "x" * 40, "name": "n" * 40, "tool_calls": calls},
               {"role": "user", "content": "z"}]
    each = tokens._COUNT.each(msgs, {}, {}, text, lambda s: 1, 1, 3, 1, 3, lambda m: 2)
    assert isinstance(each, list) and each and all(isinstance(n, int) and n > 0 for n in each)


# ---- found by an attack on the extension: each gave another count than the Python


def test_a_str_subclass_is_never_a_memo_key() -> None:
    """A str subclass counted once stayed in the memo, and its __eq__ ran (and changed the next
    message) inside the compiled look-up, at another moment than in the Python."""
    target: dict[str, Any] = {}

    class Text(str):
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            target.pop("content", None)
            return str.__eq__(self, other)

    def run(counter: TokenCounter, count: Any) -> int:
        count([{"role": "user", "content": Text("hello")}])
        target.clear()
        target.update({"role": "user", "content": "hello", "name": "bob"})
        return count([target])  # type: ignore[no-any-return]

    compiled, python = TokenCounter("cl100k_base"), TokenCounter("cl100k_base")
    assert run(compiled, compiled.conversation) == run(python, lambda ms: _python(python, ms))
    assert not [k for k in compiled._memo if type(k) is not str]


def test_values_whose_class_lies_go_to_the_python() -> None:
    """isinstance() believes an object's __class__; the C's type tests do not: such a value is
    the Python's to count."""
    class FakeStr:
        __class__ = property(lambda self: str)  # type: ignore[assignment]

        def __len__(self) -> int:
            return 0

    class FakeDict:
        __class__ = property(lambda self: dict)  # type: ignore[assignment]

        def get(self, key: str, default: Any = None) -> Any:
            return {"name": "f", "arguments": "{}"} if key == "function" else default

    for msgs in ([{"role": "user", "name": FakeStr()}], [{"role": "a", "tool_calls": [FakeDict()]}]):
        _same(msgs)


def test_a_subclass_of_the_counter_and_counts_beyond_any_text_are_the_pythons() -> None:
    for value in (2**62, 2**64, 1.0, -1, True):
        class Counter(TokenCounter):
            def text(self, s: str, value: Any = value) -> Any:
                return value

        msgs = [{"role": "user", "content": "a"}] * 3
        assert Counter("cl100k_base").conversation(msgs) == _python(Counter("cl100k_base"), msgs)
    assert tokens._COUNT is not None
    huge = tokens._COUNT.conversation([{"role": "user", "content": "a"}], {}, {}, lambda s: 2**62, lambda s: 1,
                                      1, 3, 1, 3, lambda m: 0)
    assert huge is NotImplemented
