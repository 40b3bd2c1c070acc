"""The library API at its boundary (issue 28): a wrong type or value from a caller raises one of
the package's own exceptions with a message naming the argument — never an AttributeError,
KeyError or TypeError from deep inside — and negative counts are refused, not accepted."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli import (
    InvalidInputError,
    Policy,
    UsageError,
    XCompactError,
    compact_dump,
    reclaim_tool_results,
    restore_conversation,
    summarize_dump,
)
from compactor_cli.batch import process_lines, report_for

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | st.binary(max_size=5)
JUNK = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                          max_size=3),
                    max_leaves=8) | st.builds(object)
VALID = {"messages": [{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
                      {"role": "tool", "tool_call_id": "c1", "content": "x" * 900},
                      {"role": "assistant", "content": "done"}]}

def _with(function, *args):
    """``function(*args, NAME=value)`` for one keyword NAME, as a call taking the value."""
    def bind(name):
        return lambda value: function(*args, **{name: value})
    return bind


CALLS = {
    "reclaim_tool_results": lambda j: reclaim_tool_results(j),
    "summarize_dump": lambda j: summarize_dump(j),
    "compact_dump": lambda j: compact_dump(j),
    "restore_conversation": lambda j: restore_conversation(j),
    "process_lines": lambda j: process_lines(j, "toolcall"),
    "process_lines settings": lambda j: process_lines([b'{"messages": []}'], j),
    "report_for": lambda j: report_for("toolcall", j),
    "compact_dump policy": lambda j: compact_dump(VALID, j),
    "Policy": lambda j: Policy(token_threshold=j),
    **{f"reclaim {k}": _with(reclaim_tool_results, VALID)(k)
       for k in ("keep", "keep_originals", "key_offsets", "exclude_tools", "keep_turns", "clear_at_least",
                 "placeholder", "clear_tool_inputs", "max_result_tokens", "dedup_reads", "truncate_inputs",
                 "images_keep", "thinking_keep")},
    **{f"summarize {k}": _with(summarize_dump, VALID)(k)
       for k in ("keep_recent", "max_summary_tokens", "preserve_system", "keep_originals", "backend", "encoding",
                 "keep_task", "evidence", "keep_user_tokens")},
    **{f"Policy {k}": _with(Policy)(k)
       for k in ("keep", "keep_recent", "escalation_rounds", "max_retries", "max_summary_tokens", "exclude_tools",
                 "placeholder", "images_keep", "dedup_reads")},
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_any_value_gives_a_result_or_the_packages_own_error(call):
    @settings(deadline=None)
    @given(JUNK)
    def check(value):
        try:
            CALLS[call](value)
        except XCompactError as exc:
            assert str(exc) and "\n" not in str(exc)  # one line, for users

    check()


@pytest.mark.parametrize("make", [lambda: reclaim_tool_results(VALID, keep=-1),
                                  lambda: reclaim_tool_results(VALID, truncate_inputs=0),
                                  lambda: summarize_dump(VALID, keep_recent=-3),
                                  lambda: Policy(token_threshold=-5),
                                  lambda: Policy(max_retries=-1),
                                  lambda: Policy(keep=math.inf),
                                  lambda: reclaim_tool_results(VALID, exclude_tools="bash")])
def test_negative_counts_and_wrong_kinds_are_refused_naming_the_argument(make):
    with pytest.raises(UsageError, match=r"^(keep|truncate_inputs|keep_recent|token_threshold|max_retries|"
                                         r"exclude_tools) must be"):
        make()


def test_summarize_offers_no_none_it_would_refuse():
    """keep_recent=None is compact's Policy's (fit to the threshold), not summarize's: the
    message for a wrong value does not offer it."""
    for value in ("x", None):
        with pytest.raises(UsageError, match=r"^keep_recent must be a non-negative integer, got"):
            summarize_dump(VALID, keep_recent=value)


@settings(deadline=None)
@given(conversations())
def test_valid_conversations_still_pass_the_boundary(dump):
    new, _ = reclaim_tool_results(dump, keep=1)
    assert restore_conversation(new)[0] == dump


def test_a_message_that_is_not_an_object_is_named():
    with pytest.raises(InvalidInputError, match=r"at /messages/1: a message must be an object"):
        summarize_dump({"messages": [{"role": "user", "content": "a"}, 7]})
