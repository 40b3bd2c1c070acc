"""The conversation model: what a dump looks like, how it is checked and measured.

A *dump* is the dict that ``dumps()`` writes: ``messages`` plus any other keys (``tokens_used``,
``compaction_counter``, ``compacted_tool_results``...). A bare list of messages is normalised
to ``{"messages": [...]}`` and remembered as such so it can be written back as a list.

Checks are split in two, like the schema in ``schemas/conversation.schema.json``:
errors (shapes and types: the conversation cannot be processed) and structural warnings
(tool pairing, repeated IDs: the conversation is processed unless ``--strict``).
``check_conversation`` mirrors the schema by hand because it runs on every record of
multi-GB datasets; a test asserts both agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from .errors import InvalidInputError

KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
#: Keys whose string values count towards ``estimated_message_length`` (as in xun).
LENGTH_KEYS = frozenset({"content", "text", "reasoning", "reasoning_content"})
#: Dump key holding the originals of compacted tool results: key -> original content.
ORIGINALS_KEY = "compacted_tool_results"
#: Dump key where xcompact remembers facts needed to give back the exact input.
META_KEY = "xcompact"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a conversation: where (JSON pointer) and what."""

    pointer: str
    message: str
    fatal: bool  # False: a structural warning, fatal only with --strict

    def __str__(self) -> str:
        return f"at {self.pointer}: {self.message}" if self.pointer else self.message


def normalize_record(obj: Any) -> tuple[dict, str]:
    """Return ``(dump, form)`` where form is ``"object"`` or ``"list"``.

    Raises InvalidInputError when the record is neither a dumps() object nor a list.
    """
    if isinstance(obj, list):
        return {"messages": obj}, "list"
    if isinstance(obj, dict):
        if "messages" not in obj:
            raise InvalidInputError(
                "object has no 'messages' key; expected a dumps() object or a list of messages", "")
        return obj, "object"
    raise InvalidInputError(
        f"expected a dumps() object or a list of messages, got {_type_name(obj)}", "")


def denormalize_record(dump: dict, form: str) -> Any:
    """Inverse of normalize_record: a list-form dump with no extra keys goes back to a list."""
    if form == "list" and list(dump.keys()) == ["messages"]:
        return dump["messages"]
    return dump


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            int: "integer", float: "number"}.get(type(v), type(v).__name__)


def _check_content(content: Any, ptr: str, role: str) -> Iterator[Problem]:
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        yield Problem(ptr, f"content must be a string, null or a list of parts, got {_type_name(content)}", True)
        return
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            yield Problem(f"{ptr}/{j}", f"a content part must be an object, got {_type_name(part)}", True)
        elif not isinstance(part.get("type"), str):
            yield Problem(f"{ptr}/{j}/type", "a content part needs a string 'type'", True)
        elif part["type"] == "text" and not isinstance(part.get("text"), str):
            yield Problem(f"{ptr}/{j}/text", "a text part needs a string 'text'", True)


def _check_tool_calls(calls: Any, ptr: str) -> Iterator[Problem]:
    if not isinstance(calls, list):
        yield Problem(ptr, f"tool_calls must be an array, got {_type_name(calls)}", True)
        return
    for j, call in enumerate(calls):
        cptr = f"{ptr}/{j}"
        if not isinstance(call, dict):
            yield Problem(cptr, f"a tool call must be an object, got {_type_name(call)}", True)
            continue
        if not isinstance(call.get("id"), str):
            yield Problem(f"{cptr}/id", "a tool call needs a string 'id'", True)
        fn = call.get("function")
        if fn is None:
            continue  # custom tool calls carry other payloads
        if not isinstance(fn, dict):
            yield Problem(f"{cptr}/function", f"function must be an object, got {_type_name(fn)}", True)
            continue
        if not isinstance(fn.get("name"), str):
            yield Problem(f"{cptr}/function/name", "function needs a string 'name'", True)
        if "arguments" in fn and not isinstance(fn["arguments"], str):
            yield Problem(f"{cptr}/function/arguments",
                          f"arguments must be a JSON-encoded string, got {_type_name(fn['arguments'])}", True)


def check_messages_shape(messages: Any) -> Iterator[Problem]:
    """Shape and type errors (fatal), in message order."""
    if not isinstance(messages, list):
        yield Problem("/messages", f"messages must be an array, got {_type_name(messages)}", True)
        return
    for i, m in enumerate(messages):
        # Hot path (every message of every record): the pointer string is built and the
        # detailed generators entered only when a check fails.
        if type(m) is not dict:
            yield Problem(f"/messages/{i}", f"a message must be an object, got {_type_name(m)}", True)
            continue
        role = m.get("role")
        if type(role) is not str or role not in KNOWN_ROLES:
            if not isinstance(role, str):
                yield Problem(f"/messages/{i}/role", "a message needs a string 'role'", True)
            else:
                yield Problem(f"/messages/{i}/role",
                              f"unknown role {role!r}; expected one of {', '.join(sorted(KNOWN_ROLES))}", True)
            continue
        content = m.get("content")
        if content is not None and type(content) is not str:
            yield from _check_content(content, f"/messages/{i}/content", role)
        if len(m) > (2 if "content" in m else 1):  # role and content only: nothing more to check
            yield from _check_other_keys(m, i, role)


def _check_other_keys(m: dict, i: int, role: str) -> Iterator[Problem]:
    ptr = f"/messages/{i}"
    if "name" in m and not isinstance(m["name"], str):
        yield Problem(f"{ptr}/name", f"name must be a string, got {_type_name(m['name'])}", True)
    for key in ("reasoning", "reasoning_content"):
        if key in m and m[key] is not None and not isinstance(m[key], str):
            yield Problem(f"{ptr}/{key}", f"{key} must be a string or null, got {_type_name(m[key])}", True)
    if m.get("tool_calls") is not None:
        if role != "assistant":
            yield Problem(f"{ptr}/tool_calls", f"only assistant messages carry tool_calls, not {role}", True)
        else:
            yield from _check_tool_calls(m["tool_calls"], f"{ptr}/tool_calls")
    if "tool_call_id" in m and not isinstance(m["tool_call_id"], str):
        yield Problem(f"{ptr}/tool_call_id",
                      f"tool_call_id must be a string, got {_type_name(m['tool_call_id'])}", True)


def check_pairing(messages: list[dict]) -> Iterator[Problem]:
    """Structural warnings: every tool result answers a call of the assistant message before it
    (only tool messages in between), every call gets a result, tool-call IDs are unique.
    Assumes check_messages_shape found nothing."""
    pending: dict[str, int] = {}  # call id -> index of its assistant message
    open_calls: dict[str, None] = {}  # calls awaiting a result, in call order (deterministic output)
    seen_ids: set[str] = set()
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid is None:
                yield Problem(f"/messages/{i}", "tool message has no tool_call_id; it cannot be paired or fetched back", False)
            elif cid in open_calls:
                del open_calls[cid]
            else:
                yield Problem(f"/messages/{i}/tool_call_id",
                              f"tool result {cid!r} answers no call of the assistant message before it", False)
            continue
        for cid in open_calls:
            yield Problem(f"/messages/{pending[cid]}", f"tool call {cid!r} has no result", False)
        open_calls.clear()
        if role == "assistant" and m.get("tool_calls"):
            for j, call in enumerate(m["tool_calls"]):
                cid = call.get("id")
                if cid in seen_ids:
                    yield Problem(f"/messages/{i}/tool_calls/{j}/id", f"tool-call ID {cid!r} is used again", False)
                seen_ids.add(cid)
                pending[cid] = i
                open_calls[cid] = None
    for cid in open_calls:
        yield Problem(f"/messages/{pending[cid]}", f"tool call {cid!r} has no result", False)


def check_conversation(dump: dict) -> list[Problem]:
    """All problems of a normalised dump: fatal shape errors first; warnings only if none."""
    fatal = list(check_messages_shape(dump.get("messages")))
    originals = dump.get(ORIGINALS_KEY)
    if originals is not None and not isinstance(originals, dict):
        fatal.append(Problem(f"/{ORIGINALS_KEY}", f"must be an object, got {_type_name(originals)}", True))
    if fatal:
        return fatal
    return list(check_pairing(dump["messages"]))


def _length(obj: Any) -> int:
    # Hot path of every command: explicit loops and exact type checks, no generators.
    total = 0
    if type(obj) is dict:
        for k, v in obj.items():
            t = type(v)
            if t is str:
                if k in LENGTH_KEYS:
                    total += len(v)
            elif t is dict or t is list:
                total += _length(v)
    elif type(obj) is list:
        for x in obj:
            t = type(x)
            if t is dict or t is list:
                total += _length(x)
    return total


def estimated_message_length(messages: list[dict]) -> int:
    """xun's estimate: characters of string values under content/text/reasoning/reasoning_content,
    recursing into nested dicts and lists. Cheap, model-free, good for ratios."""
    return _length(messages)


def content_length(content: Any) -> int:
    """The estimate of one message's content value (string, parts or null)."""
    if isinstance(content, str):
        return len(content)
    return _length(content) if isinstance(content, (list, dict)) else 0


def content_text(content: Any) -> str:
    """The text of a content value: the string itself, or the ``text`` of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
