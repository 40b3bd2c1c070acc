"""The preview a cleared result keeps (--preview, --max-result-tokens): the lines that carry
the outcome survive whatever else must go, and a Codex result is previewed as its output's
lines with its exit code, not as one line of JSON (issue 30)."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli import reclaim_tool_results, restore_conversation
from compactor_cli.model.conversation import PLACEHOLDER_TEMPLATE
from compactor_cli.model.tokens import counter_for
from compactor_cli.tiers.preview import PREVIEW_LINE_CHARS, result_preview


def test_the_outcome_lines_go_in_first_when_head_and_tail_do_not_fit():
    long = "x" * (PREVIEW_LINE_CHARS + 50)
    lines = [f"{n} {long}" for n in range(30)] + ["AssertionError: expected 3, got 4"] \
        + [f"{n} {long}" for n in range(30, 60)]
    preview = result_preview("\n".join(lines), 5, 5, max_chars=600)
    assert len(preview) <= 600
    assert "AssertionError: expected 3, got 4" in preview
    assert "lines left out by xcompact" in preview
    # what fits of the last lines comes before the first lines
    assert "59 x" in preview


def test_a_short_result_is_shown_whole_and_an_empty_one_stays_empty():
    assert result_preview("a\nb", 5, 5) == "a\nb"
    assert result_preview("", 2, 2) == ""


def test_a_codex_result_is_previewed_as_its_output_with_the_exit_code():
    output = "\n".join([f"line {n}" for n in range(40)] + ["FAILED tests/test_x.py::test_y - boom"]
                       + [f"tail {n}" for n in range(40)])
    content = orjson.dumps({"output": output, "metadata": {"exit_code": 1, "duration_seconds": 0.4}}).decode()
    messages = [{"role": "user", "content": "run the tests"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "shell", "arguments": '{"command":["bash","-lc","pytest"]}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": content},
                {"role": "assistant", "content": "it fails"}]
    new, res = reclaim_tool_results(messages, keep=0,
                                    placeholder=PLACEHOLDER_TEMPLATE + "\n{preview:2,2}")
    text = new["messages"][2]["content"]
    assert res.reclaimed_count == 1
    assert "Exit code: 1\nline 0" in text and "FAILED tests/test_x.py::test_y - boom" in text
    assert "tail 39" in text and '"metadata"' not in text
    assert restore_conversation(new)[0]["messages"] == messages


@settings(deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=80), st.text(max_size=600)), min_size=1, max_size=6),
       st.sampled_from([None, PLACEHOLDER_TEMPLATE + "\n{preview:1,1}"]))
def test_with_tokens_no_placeholder_costs_more_tokens_than_its_original(results, placeholder):
    """Issue 30: counted in tokens, a placeholder is written only where it is cheaper, whatever
    the IDs (long, odd, reused) and the texts."""
    counter = counter_for("cl100k_base")
    messages: list[dict] = [{"role": "user", "content": "go"}]
    for cid, text in results:
        messages += [{"role": "assistant", "content": None,
                      "tool_calls": [{"id": cid, "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": cid, "content": text}]
    new, res = reclaim_tool_results(messages, keep=0, counter=counter, placeholder=placeholder)
    out = new["messages"] if isinstance(new, dict) else new
    for i in res.compacted_indices:
        assert counter.text(out[i]["content"]) < counter.text(messages[i]["content"])
    restored, _ = restore_conversation(new)
    assert (restored["messages"] if isinstance(restored, dict) else restored) == messages
