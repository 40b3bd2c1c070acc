"""The record loop's one walk of the messages (model/conversation.py ``prescan``) says exactly what
the separate checks say: no shape error and the same pairing verdict, the same length estimate
and the same format marks; anything it does not vouch for goes to the detailed checks, whose
messages are unchanged (issue 32)."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli.files.exact import RISKY_NUMBER, risky_number
from compactor_cli.formats.detect import _message_marks
from compactor_cli.model.checks import check_conversation, check_messages_shape, check_pairing
from compactor_cli.model.conversation import (
    begin_record,
    end_record,
    estimated_message_length,
    prescan,
)

ODD_VALUES = [None, 0, 1.5, True, "x", "", [], {}, [{}], [1], {"a": "b"}, {"text": "t"},
              [{"type": "text"}], [{"type": "text", "text": "hi"}], [{"type": 3}], [{"type": "image", "source": {}}],
              [{"type": "input_text", "text": "t"}], [{"type": "tool_use", "id": "a", "name": "n", "input": {}}],
              [{"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
              [{"id": "c9", "function": None}], [{"id": 5}], [{"id": "c9", "function": {"name": "f", "arguments": {}}}],
              [{"id": "c9", "custom": {"name": "p", "input": "x"}}], [{"id": "c9", "function": {"name": 1}}]]
KEYS = ["role", "content", "name", "reasoning", "reasoning_content", "tool_calls", "tool_call_id", "function_call",
        "type", "text", "extra"]
ROLES = ["user", "assistant", "tool", "system", "developer", "function", "bot", 7]


@st.composite
def messages(draw) -> list:
    """Valid conversations, then some of them broken: a value of a key replaced, a key added or
    removed, a message dropped, moved or replaced by a non-object."""
    dump = draw(conversations())
    msgs = copy.deepcopy(dump["messages"])
    for _ in range(draw(st.integers(0, 3))):
        if not msgs:
            break
        i = draw(st.integers(0, len(msgs) - 1))
        what = draw(st.sampled_from(["value", "value", "role", "drop", "move", "not-object", "del"]))
        m = msgs[i]
        if type(m) is not dict and what in ("value", "role", "del"):
            continue
        if what == "drop":
            del msgs[i]
        elif what == "move":
            msgs.insert(draw(st.integers(0, len(msgs))), msgs.pop(i))
        elif what == "not-object":
            msgs[i] = draw(st.sampled_from([None, "text", [], 3]))
        elif what == "role":
            m["role"] = draw(st.sampled_from(ROLES))
        elif what == "del":
            m.pop(draw(st.sampled_from(KEYS)), None)
        else:
            m[draw(st.sampled_from(KEYS))] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))
    return msgs


def _scanned(msgs: list):
    begin_record()
    try:
        return prescan(msgs), _message_marks(msgs), check_conversation({"messages": msgs})
    finally:
        end_record()


@given(messages())
def test_one_walk_agrees_with_the_checks(msgs):
    shape = list(check_messages_shape(msgs))
    scan, marks, problems = _scanned(msgs)
    assert prescan(msgs) is None  # outside the record loop nothing is remembered
    if scan is None:
        assert shape, "the walk refused messages the shape check takes"
    else:
        assert not shape
        assert scan.length == estimated_message_length(msgs)
        assert scan.paired == (not list(check_pairing(msgs)))
    assert marks == _message_marks(msgs)  # outside the loop: the detailed walk
    assert problems == check_conversation({"messages": msgs})


@given(st.binary(max_size=60) | st.text(alphabet="0123456789.eE+-:,[ ]x\"", max_size=60).map(str.encode))
def test_risky_number_is_the_regex(raw):
    assert risky_number(raw) == (RISKY_NUMBER.search(raw) is not None)
