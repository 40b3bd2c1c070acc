"""The conversation model: what a dump looks like, its keys, and how it is measured.

A *dump* is the dict that ``dumps()`` writes: ``messages`` plus any other keys (``tokens_used``,
``compaction_counter``, ``compacted_tool_results``...). A bare list of messages is normalised
to ``{"messages": [...]}`` and remembered as such so it can be written back as a list.

The record loop's one walk of the messages (``prescan``) is here; the detailed checks it sends
anything it does not vouch for to are in ``checks.py``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError
from .compiled import extension

#: A conversation as xcompact holds it (xun's dumps() form: "messages" and bookkeeping keys), and
#: one of its messages: plain JSON objects, typed by these names where they cross a module.
Dump = dict[str, Any]
Message = dict[str, Any]

KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
#: Keys whose string values count towards ``estimated_message_length`` (as in xun).
LENGTH_KEYS = frozenset({"content", "text", "reasoning", "reasoning_content"})
#: Dump key holding the originals of compacted tool results: key -> original content.
ORIGINALS_KEY = "compacted_tool_results"
#: Dump key where xcompact remembers facts needed to give back the exact input.
META_KEY = "xcompact"
#: Dump key of the tier-2 archive: one entry per summary round (see restore.py).
ARCHIVE_KEY = "summarized_messages"
#: Dump key of xun's round counters: ``{"summary_rounds": n, "toolcall_rounds": n}``.
COUNTER_KEY = "compaction_counter"
#: Keys whose values compact and summarize replace; their earlier values are kept for restore.
REPLACED_KEYS = ("tokens_used", COUNTER_KEY)
#: ``xcompact`` field mapping tool results to a store key other than their usual one (restore.py).
ALIASES_FIELD = "tool_result_keys"
#: ``xcompact`` field: the input had an empty ``compacted_tool_results`` (restore gives it back).
EMPTY_STORE_FIELD = "empty_store"
#: ``xcompact`` field: the placeholder templates of the user's own its placeholders use (model/placeholders.py).
TEMPLATES_FIELD = "placeholder_templates"
#: ``xcompact`` field: which results were cleared with which of those templates (by ID and occurrence).
TEMPLATED_FIELD = "templated_results"
#: ``xcompact`` field: store key -> original arguments of a call whose input --clear-tool-inputs cleared.
INPUTS_FIELD = "tool_inputs"
#: ``xcompact`` field: how many summary rounds were archived when compact recorded ``replaced``.
ARCHIVED_FIELD = "archived_rounds"
#: ``xcompact`` field: the serialisation style of the input of a rewritten record (files/style.py).
STYLE_FIELD = "style"

PLACEHOLDER_TEMPLATE = (
    "[Compacted, ID: {id}. If this content is still needed, call extract_compacted_tool_result "
    "with this ID or re-run the tool.]"
)


def placeholder_for(tool_call_id: str) -> str:
    """Exactly xun's placeholder for a compacted tool result."""
    return PLACEHOLDER_TEMPLATE.format(id=tool_call_id)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a conversation: where (JSON pointer) and what."""

    pointer: str
    message: str
    fatal: bool  # False: a structural warning, fatal only with --strict

    def __str__(self) -> str:
        return f"at {self.pointer}: {self.message}" if self.pointer else self.message


def normalize_record(obj: Any) -> tuple[dict[str, Any], str]:
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


def denormalize_record(dump: dict[str, Any], form: str) -> Any:
    """Inverse of normalize_record: a list-form dump with no extra keys goes back to a list."""
    if form == "list" and list(dump.keys()) == ["messages"]:
        return dump["messages"]
    return dump


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            int: "integer", float: "number"}.get(type(v), type(v).__name__)



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


# ---- one walk of a record's messages (the step's hot path): shapes, pairing, length, marks

@dataclass(frozen=True)
class Scan:
    """What one walk over a conversation's messages found, when it found nothing wrong: no shape
    error (check_messages_shape) and no pairing warning (check_pairing) would be reported."""

    length: int  # estimated_message_length of the messages
    openai: bool  # the messages bear an OpenAI mark (a tool role, tool_calls, tool_call_id, function_call)
    plain: bool  # no content parts and no "type" key: ``openai`` is every request-format mark they bear
    paired: bool  # check_pairing finds nothing either
    tools: list[int]  # the indices of the tool results


#: (messages, their number, Scan or None) of the record the step is on; see prescan.
_MEMO: list[Any] = [None, -1, None]
_SCOPE = [0]


def begin_record() -> None:
    """The record loop (engine/step.py) starts one record: prescan may walk and remember."""
    _SCOPE[0] += 1


def end_record() -> None:
    """The record is done: nothing of it is remembered."""
    _SCOPE[0] -= 1
    _MEMO[0], _MEMO[1], _MEMO[2] = None, -1, None


#: The compiled walk (model/_walk.c), or None (compiled.py).
_WALK = extension("_walk")


#: The compiled walk gives back values nested deeper than 200 levels; below this recursion limit
#: (a program that lowered it) the Python could fail on less, and must be the one to say so.
_WALK_RECURSION = 1000


def _compiled() -> Any:
    """The compiled walk where it may decide: built, and the recursion limit not lowered."""
    return _WALK if sys.getrecursionlimit() >= _WALK_RECURSION else None


def walk(messages: list[Any]) -> Scan | None:
    """_scan(messages): compiled where the extension is built, the Python where it is not or where
    the compiled walk gives the case back (a value nested very deep, a key that is not a str)."""
    compiled = _compiled()
    if compiled is not None:
        found = compiled.scan(messages, KNOWN_ROLES, LENGTH_KEYS, _DIRECT_KEYS)
        if found is None:
            return None
        if found is not NotImplemented:
            return Scan(*found)
    return _scan(messages)


def prescan(messages: Any) -> Scan | None:
    """The Scan of ``messages`` within one record of the record loop, walked once and shared by
    format detection, the checks, tier 1's length estimate; None when something is wrong with
    them (the detailed checks then say what, as they always did) or outside the loop (a library
    call: every check as it always was). The record loop owns the dump it parsed, and the tiers
    never change a dump in place, so the list it walked is the list they read."""
    if type(messages) is not list:
        return None
    memo = _MEMO
    if memo[0] is messages and memo[1] == len(messages):
        return memo[2]  # type: ignore[no-any-return]
    if not _SCOPE[0]:
        return None
    scan = walk(messages)
    memo[0], memo[1], memo[2] = messages, len(messages), scan
    return scan


def _parts_ok(content: list[Any]) -> bool:
    """checks._check_content finds nothing in a list of parts."""
    for part in content:
        if type(part) is not dict:
            return False
        t = part.get("type")
        if type(t) is not str or (t == "text" and type(part.get("text")) is not str):
            return False
    return True


def _scan(messages: list[Any]) -> Scan | None:
    """check_messages_shape, estimated_message_length, the marks of formats/detect.py, whether
    check_pairing finds anything and where the tool results are, in one walk; None at the first
    shape error. Hot path: the usual keys are looked at directly, any other in a loop."""
    total = 0
    openai = False
    plain = True
    paired = True
    open_calls: dict[str, None] = {}
    seen: set[str] = set()
    tools: list[int] = []
    roles = KNOWN_ROLES
    for i, m in enumerate(messages):
        if type(m) is not dict:
            return None
        role = m.get("role")
        if type(role) is not str or role not in roles:
            return None
        n = len(m) - 1
        if "content" in m:
            n -= 1
            content = m["content"]
            tc = type(content)
            if tc is str:
                total += len(content)
            elif content is not None:
                if tc is not list or not _parts_ok(content):
                    return None
                plain = False
                total += _length(content)
        calls = None
        if n:  # more than role and content
            calls = m.get("tool_calls")
            if calls is not None:
                n -= 1
                if type(calls) is not list or role != "assistant":
                    return None
                length = _calls_length(calls)
                if length < 0:
                    return None  # a call check_messages_shape refuses
                total += length
            elif "tool_calls" in m:
                n -= 1
            if "tool_call_id" in m:
                n -= 1
                if type(m["tool_call_id"]) is not str:
                    return None
            if n:
                extra = _other_keys(m)
                if extra < 0:
                    return None
                total += extra
                if "type" in m:
                    plain = False
            if not openai and ("tool_calls" in m or "tool_call_id" in m or "function_call" in m):
                openai = True
        if role == "tool":
            openai = True
            tools.append(i)
            if paired:
                cid = m.get("tool_call_id")
                if cid in open_calls:
                    del open_calls[cid]
                else:  # None (no ID) included
                    paired = False
            continue
        if paired:
            if open_calls:
                paired = False  # a call of the assistant message before has no result
            elif calls and role == "assistant":
                for call in calls:
                    cid = call["id"]
                    if cid in seen:
                        paired = False
                        break
                    seen.add(cid)
                    open_calls[cid] = None
    return Scan(total, openai, plain, paired and not open_calls, tools)


def _calls_length(calls: list[Any]) -> int:
    """_length(calls), or -1 when check_messages_shape would refuse one of them."""
    total = 0
    length_keys = LENGTH_KEYS
    for call in calls:
        if type(call) is not dict or type(call.get("id")) is not str:
            return -1
        if "function" in call:
            fn = call["function"]
            if type(fn) is not dict or type(fn.get("name")) is not str:
                return -1
            if "arguments" in fn and type(fn["arguments"]) is not str:
                return -1
        for k, v in call.items():
            t = type(v)
            if t is str:
                if k in length_keys:
                    total += len(v)
            elif t is dict or t is list:
                total += _length(v)
    return total


#: Message keys the walk looks at directly.
_DIRECT_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id"})


def _other_keys(m: dict[str, Any]) -> int:
    """The length estimate of a message's keys other than role, content, tool_calls and
    tool_call_id, or -1 when check_messages_shape would refuse one of them (name, reasoning)."""
    total = 0
    length_keys, direct = LENGTH_KEYS, _DIRECT_KEYS
    for k, v in m.items():
        if k in direct:
            continue
        t = type(v)
        if t is str:
            if k in length_keys:
                total += len(v)
        elif k == "name" or ((k == "reasoning" or k == "reasoning_content") and v is not None):
            return -1
        elif t is dict or t is list:
            total += _length(v)
    return total


def estimated_message_length(messages: list[dict[str, Any]]) -> int:
    """xun's estimate: characters of string values under content/text/reasoning/reasoning_content,
    recursing into nested dicts and lists. Cheap, model-free, good for ratios."""
    compiled = _compiled()
    if compiled is not None:
        found = compiled.length(messages, LENGTH_KEYS)
        if found is not NotImplemented:
            return found  # type: ignore[no-any-return]
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


def call_parts(call: Any) -> tuple[str, str] | None:
    """(tool name, input text) of a tool call: a function call's name and arguments, or an OpenAI
    custom tool call's (``{"type": "custom", "custom": {"name", "input"}}``: Codex's
    ``apply_patch``) name and free-form input; None for anything else."""
    if not isinstance(call, dict):
        return None
    fn = call.get("function")
    if isinstance(fn, dict):
        args = fn.get("arguments")
        return (fn["name"] if isinstance(fn.get("name"), str) else "?"), (args if isinstance(args, str) else "")
    custom = call.get("custom")
    if isinstance(custom, dict):
        text = custom.get("input")
        return (custom["name"] if isinstance(custom.get("name"), str) else "?"), (text if isinstance(text, str) else "")
    return None
