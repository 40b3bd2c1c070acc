"""What xcompact accepts and the problems it names, and agreement with the JSON Schema."""

from __future__ import annotations

import pytest
from helpers import tool_conv
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import conversations

from compactor_cli import check_conversation, normalize_record
from compactor_cli.errors import InvalidInputError
from compactor_cli.model.schema import load_schema, schema_problems


def fatal(dump):
    return [str(p) for p in check_conversation(dump) if p.fatal]


def warnings(dump):
    return [str(p) for p in check_conversation(dump) if not p.fatal]


@pytest.mark.parametrize("messages, expected", [
    ([{"role": "bot", "content": "x"}], "at /messages/0/role: unknown role 'bot'"),
    ([{"content": "x"}], "at /messages/0/role: a message needs a string 'role'"),
    (["hello"], "at /messages/0: a message must be an object, got string"),
    ([{"role": "user", "content": 5}], "at /messages/0/content: content must be a string, null or a list of parts, got integer"),
    ([{"role": "user", "content": [{"type": "text"}]}], "at /messages/0/content/0/text: a text part needs a string 'text'"),
    ([{"role": "assistant", "tool_calls": {"id": "x"}}], "at /messages/0/tool_calls: tool_calls must be an array, got object"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}],
     "at /messages/0/tool_calls/0/function/arguments: arguments must be a JSON-encoded string, got object"),
    ([{"role": "tool", "tool_call_id": 7, "content": "x"}], "at /messages/0/tool_call_id: tool_call_id must be a string, got integer"),
    ([{"role": "user", "content": "x", "tool_calls": []}], "at /messages/0/tool_calls: only assistant messages carry tool_calls, not user"),
])
def test_shape_errors_name_the_pointer_and_the_problem(messages, expected):
    problems = fatal({"messages": messages})
    assert problems and problems[0].startswith(expected)


def test_developer_role_and_unknown_keys_are_accepted():
    dump = {"messages": [{"role": "developer", "content": "be brief", "x-custom": 1}], "other": {"a": 1}}
    assert check_conversation(dump) == []


def test_messages_must_be_a_list_and_records_an_object_or_list():
    assert fatal({"messages": {"role": "user"}}) == ["at /messages: messages must be an array, got object"]
    with pytest.raises(InvalidInputError, match="no 'messages' key"):
        normalize_record({"msgs": []})
    with pytest.raises(InvalidInputError, match="got integer"):
        normalize_record(3)


def test_pairing_problems_are_warnings_not_errors():
    dump = tool_conv(n_tools=2)
    dump["messages"].insert(1, {"role": "tool", "tool_call_id": "ghost", "content": "?"})
    del dump["messages"][-2]  # the result of call_1
    assert fatal(dump) == []
    assert warnings(dump) == [
        "at /messages/1/tool_call_id: tool result 'ghost' answers no call of the assistant message before it",
        "at /messages/6: tool call 'call_1' has no result",
    ]


def test_a_result_after_a_user_message_is_orphaned():
    dump = tool_conv(n_tools=1)
    dump["messages"].insert(3, {"role": "user", "content": "interrupt"})
    assert any("answers no call" in w for w in warnings(dump))


def test_repeated_ids_are_a_warning():
    dump = tool_conv(n_tools=2, ids=["same", "same"])
    assert warnings(dump) == ["at /messages/5/tool_calls/0/id: tool-call ID 'same' is used again"]


def test_parallel_results_in_any_order_pair_up():
    dump = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
    ]}
    assert check_conversation(dump) == []


# ---- the hand-written checks and schemas/conversation.schema.json give the same verdicts

JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                       max_leaves=6)
ROLE = st.sampled_from(["system", "developer", "user", "assistant", "tool", "bot", 3])


@st.composite
def mutated_messages(draw):
    """Messages that are right or wrong in the ways the schema can say."""
    msgs = []
    for _ in range(draw(st.integers(0, 3))):
        m = {"role": draw(ROLE)}
        if draw(st.booleans()):
            m["content"] = draw(st.one_of(st.text(max_size=4), st.none(), JSONISH,
                                          st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", 1])},
                                                                         optional={"text": JSONISH}), max_size=2)))
        if draw(st.integers(0, 3)) == 0:
            m["tool_calls"] = draw(st.one_of(JSONISH, st.lists(st.fixed_dictionaries(
                {"id": st.one_of(st.text(max_size=3), st.integers())},
                optional={"function": st.one_of(JSONISH, st.fixed_dictionaries(
                    {"name": st.one_of(st.text(max_size=3), st.none())},
                    optional={"arguments": st.one_of(st.text(max_size=3), JSONISH)}))}), max_size=2)))
        if draw(st.integers(0, 3)) == 0:
            m[draw(st.sampled_from(["name", "tool_call_id", "reasoning", "reasoning_content"]))] = draw(JSONISH)
        msgs.append(draw(st.one_of(st.just(m), JSONISH)) if draw(st.integers(0, 9)) == 0 else m)
    return msgs


@settings(deadline=None)
@given(mutated_messages())
def test_hand_checks_agree_with_the_schema(messages):
    dump = {"messages": messages}
    assert bool(fatal(dump)) == bool(schema_problems(dump))


@settings(deadline=None)
@given(conversations())
def test_generated_conversations_are_valid_for_both(dump):
    assert fatal(dump) == [] and schema_problems(dump) == []


def test_schema_is_a_valid_json_schema():
    import jsonschema

    for name in ("conversation", "report"):
        schema = load_schema(name)
        jsonschema.validators.validator_for(schema).check_schema(schema)
