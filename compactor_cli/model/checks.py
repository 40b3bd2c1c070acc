"""The checks of a record, like the schema in ``schemas/conversation.schema.json``: errors
(shapes and types: the conversation cannot be processed) and structural warnings (tool pairing,
repeated IDs: processed unless ``--strict``), and the shapes of the keys xcompact and xun own,
which restore and the tiers trust. Mirrored by hand because it runs on every record of multi-GB
datasets (a test asserts both agree); the record loop's one walk (``conversation.prescan``)
sends here only what it does not vouch for."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, TypeGuard

from .conversation import (
    ALIASES_FIELD,
    ARCHIVE_KEY,
    ARCHIVED_FIELD,
    COUNTER_KEY,
    EMPTY_STORE_FIELD,
    INPUTS_FIELD,
    KNOWN_ROLES,
    META_KEY,
    ORIGINALS_KEY,
    REPLACED_KEYS,
    STYLE_FIELD,
    TEMPLATED_FIELD,
    TEMPLATES_FIELD,
    Problem,
    _compiled,
    _type_name,
    prescan,
)
from .placeholders import TemplateError, template

_ITEM_SEP = re.compile(r"[ \t]*,[ \t]*")
_KEY_SEP = re.compile(r"[ \t]*:[ \t]*")
_INDENT = re.compile(r"[ \t]{0,16}")
_END = {"jsonl": re.compile(r"\r?\n"), "json": re.compile(r"[ \t\r\n]{0,64}")}
_MAX_INDENT = 16


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
        if "function" not in call:
            continue  # custom tool calls carry other payloads
        fn = call["function"]
        if not isinstance(fn, dict):  # null included: the schema refuses it too
            yield Problem(f"{cptr}/function", f"function must be an object, got {_type_name(fn)}", True)
            continue
        if not isinstance(fn.get("name"), str):
            yield Problem(f"{cptr}/function/name", "function needs a string 'name'", True)
        if "arguments" in fn and not isinstance(fn["arguments"], str):
            yield Problem(f"{cptr}/function/arguments",
                          f"arguments must be a JSON-encoded string, got {_type_name(fn['arguments'])}", True)


def check_messages_shape(messages: Any, base: str = "/messages") -> Iterator[Problem]:
    """Shape and type errors (fatal), in message order. ``base``: the pointer of the list."""
    if not isinstance(messages, list):
        name = "messages" if base == "/messages" else base.rsplit("/", 1)[-1]
        yield Problem(base, f"{name} must be an array, got {_type_name(messages)}", True)
        return
    for i, m in enumerate(messages):
        # Hot path (every message of every record): the pointer string is built and the
        # detailed generators entered only when a check fails.
        if type(m) is not dict:
            yield Problem(f"{base}/{i}", f"a message must be an object, got {_type_name(m)}", True)
            continue
        role = m.get("role")
        if type(role) is not str or role not in KNOWN_ROLES:
            if not isinstance(role, str):
                yield Problem(f"{base}/{i}/role", "a message needs a string 'role'", True)
            else:
                yield Problem(f"{base}/{i}/role",
                              f"unknown role {role!r}; expected one of {', '.join(sorted(KNOWN_ROLES))}", True)
            continue
        content = m.get("content")
        if content is not None and type(content) is not str:
            yield from _check_content(content, f"{base}/{i}/content", role)
        if len(m) > (2 if "content" in m else 1):  # role and content only: nothing more to check
            yield from _check_other_keys(m, f"{base}/{i}", role)


def _check_other_keys(m: dict[str, Any], ptr: str, role: str) -> Iterator[Problem]:
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


def check_pairing(messages: list[dict[str, Any]]) -> Iterator[Problem]:
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
                yield Problem(f"/messages/{i}", "tool message has no tool_call_id; it cannot be paired or fetched back",
                              False)
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


def pairing_problems(messages: list[dict[str, Any]]) -> list[Problem]:
    """``list(check_pairing(messages))``, compiled where the walk is (model/_walk.c: a run whose
    tool-call IDs repeat, as tau-bench's do, has these warnings on most records)."""
    compiled = _compiled()
    if compiled is not None:
        found = compiled.pairing(messages)  # pointer, message, pointer, message, ...
        if found is not NotImplemented:
            return [Problem(found[i], found[i + 1], False) for i in range(0, len(found), 2)]
    return list(check_pairing(messages))


def check_conversation(dump: dict[str, Any]) -> list[Problem]:
    """All problems of a normalised dump: fatal shape errors first; warnings only if none."""
    scan = prescan(dump.get("messages"))
    if scan is not None:  # walked once already: no shape error in the messages
        fatal = list(check_owned_keys(dump)) if len(dump) > 1 else []
        if fatal or scan.paired:
            return fatal
        return pairing_problems(dump["messages"])
    fatal = list(check_messages_shape(dump.get("messages")))
    if len(dump) > 1:  # the keys xcompact reads and writes besides messages (usually absent)
        fatal.extend(check_owned_keys(dump))
    if fatal:
        return fatal
    return pairing_problems(dump["messages"])


# ---- the keys xcompact and xun own: restore and the tiers trust their shapes, so a malformed
# one makes the record INVALID_INPUT (written unchanged) instead of a crash or a silent mangle.

def _pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _is_int(v: Any) -> TypeGuard[int]:
    return type(v) is int


def _check_tokens_used(value: Any, ptr: str) -> Iterator[Problem]:
    # as the schema: an integer (a float without fraction is one for JSON Schema) or null
    if value is None or _is_int(value) or (type(value) is float and value.is_integer()):
        return
    yield Problem(ptr, f"tokens_used must be an integer or null, got {_type_name(value)}", True)


def _check_counter(value: Any, ptr: str) -> Iterator[Problem]:
    if not isinstance(value, dict):
        yield Problem(ptr, f"{COUNTER_KEY} must be an object, got {_type_name(value)}", True)
        return
    for field in ("summary_rounds", "toolcall_rounds"):
        v = value.get(field)
        if v is not None and not (_is_int(v) and v >= 0):
            yield Problem(f"{ptr}/{field}", f"{COUNTER_KEY}.{field} must be a non-negative integer or null, "
                                            f"got {_describe(v)}", True)


def _check_replaced_value(key: str, value: Any, ptr: str) -> Iterator[Problem]:
    if key == "tokens_used":
        yield from _check_tokens_used(value, ptr)
    else:
        yield from _check_counter(value, ptr)


def _describe(v: Any) -> str:
    return f"{v!r}" if _is_int(v) else _type_name(v)


def _check_originals(value: Any) -> Iterator[Problem]:
    ptr = f"/{ORIGINALS_KEY}"
    if not isinstance(value, dict):
        yield Problem(ptr, f"{ORIGINALS_KEY} must be an object (tool-call ID -> original content), "
                           f"got {_type_name(value)}", True)
        return
    for key, content in value.items():
        if content is not None and type(content) is not str:
            if not isinstance(content, list):
                yield Problem(f"{ptr}/{_pointer_token(key)}",
                              f"{ORIGINALS_KEY} holds original contents: a string, null or a list of parts, "
                              f"got {_type_name(content)}", True)
            else:
                yield from _check_content(content, f"{ptr}/{_pointer_token(key)}", "tool")


def _check_archive(value: Any) -> Iterator[Problem]:
    ptr = f"/{ARCHIVE_KEY}"
    if not isinstance(value, list):
        yield Problem(ptr, f"{ARCHIVE_KEY} must be an array of summary rounds, got {_type_name(value)}", True)
        return
    for j, entry in enumerate(value):
        eptr = f"{ptr}/{j}"
        if not isinstance(entry, dict):
            yield Problem(eptr, f"a {ARCHIVE_KEY} entry must be an object, got {_type_name(entry)}", True)
            continue
        rnd = entry.get("round")
        if not (_is_int(rnd) and rnd >= 1):
            yield Problem(f"{eptr}/round", f"{ARCHIVE_KEY} entry needs a positive integer 'round', "
                                           f"got {_describe(rnd)}", True)
        dropped = entry.get("dropped", False)
        if type(dropped) is not bool:
            yield Problem(f"{eptr}/dropped", f"{ARCHIVE_KEY} entry 'dropped' must be a boolean, "
                                             f"got {_type_name(dropped)}", True)
            continue
        if dropped:  # a round summarised with --originals drop: only its tool-call IDs are known
            ids = entry.get("tool_call_ids")
            if not isinstance(ids, list) or not all(type(x) is str for x in ids):
                yield Problem(f"{eptr}/tool_call_ids", f"a {ARCHIVE_KEY} entry with dropped: true needs "
                                                   "'tool_call_ids', an array of strings", True)
            continue
        head = entry.get("head")
        if not isinstance(head, list):
            yield Problem(f"{eptr}/head", f"{ARCHIVE_KEY} entry needs 'head', an array of messages, "
                                          f"got {_type_name(head)}", True)
        else:
            yield from check_messages_shape(head, f"{eptr}/head")
        system = entry.get("system")
        if system is not None:
            if not isinstance(system, dict):
                yield Problem(f"{eptr}/system", f"{ARCHIVE_KEY} entry 'system' must be a message object or null, "
                                                f"got {_type_name(system)}", True)
            else:
                for p in check_messages_shape([system], f"{eptr}/system"):
                    yield Problem(f"{eptr}/system" + p.pointer[len(eptr) + 9:], p.message, True)
        at = entry.get("forced_user_at")
        if at is not None and not (_is_int(at) and isinstance(head, list) and 0 <= at <= len(head)):
            span = f" (the head has {len(head)} messages)" if isinstance(head, list) else ""
            yield Problem(f"{eptr}/forced_user_at", f"{ARCHIVE_KEY} entry 'forced_user_at' must be null or an "
                                                    f"index into the head{span}, "
                                                    f"got {_describe(at)}", True)
        kept_at = entry.get("kept_at")
        if kept_at is not None:
            size = (len(head) if isinstance(head, list) else 0) + (len(kept_at) if isinstance(kept_at, list) else 0)
            if not (isinstance(kept_at, list) and all(_is_int(k) and 0 <= k < size for k in kept_at)
                    and kept_at == sorted(set(kept_at))):
                yield Problem(f"{eptr}/kept_at", f"{ARCHIVE_KEY} entry 'kept_at' must be a list of increasing "
                                                 f"indices into the restored head ({size} messages), "
                                                 f"got {_describe(kept_at)}", True)
        replaced = entry.get("replaced_keys")
        if replaced is not None:
            if not isinstance(replaced, dict):
                yield Problem(f"{eptr}/replaced_keys", f"{ARCHIVE_KEY} entry 'replaced_keys' must be an object, "
                                                       f"got {_type_name(replaced)}", True)
            else:
                for key in REPLACED_KEYS:
                    if key in replaced:
                        yield from _check_replaced_value(key, replaced[key], f"{eptr}/replaced_keys/{key}")


def _check_meta(value: Any, dump: dict[str, Any]) -> Iterator[Problem]:
    ptr = f"/{META_KEY}"
    if not isinstance(value, dict):
        yield Problem(ptr, f"{META_KEY} must be an object, got {_type_name(value)}", True)
        return
    replaced = value.get("replaced", {})
    if not isinstance(replaced, dict):
        yield Problem(f"{ptr}/replaced", f"{META_KEY}.replaced must be an object, got {_type_name(replaced)}", True)
        replaced = {}
    for key, v in replaced.items():
        if key not in REPLACED_KEYS:
            yield Problem(f"{ptr}/replaced/{_pointer_token(key)}",
                          f"{META_KEY}.replaced may only hold {' and '.join(REPLACED_KEYS)}, not {key!r}", True)
        else:
            yield from _check_replaced_value(key, v, f"{ptr}/replaced/{key}")
    absent = value.get("absent", [])
    if not isinstance(absent, list) or not all(type(k) is str and k in REPLACED_KEYS for k in absent):
        yield Problem(f"{ptr}/absent", f"{META_KEY}.absent must be an array of key names among "
                                       f"{', '.join(REPLACED_KEYS)}", True)
    elif any(k in replaced for k in absent):
        yield Problem(f"{ptr}/absent", f"a key cannot be both in {META_KEY}.replaced and {META_KEY}.absent", True)
    if "input_form" in value and value["input_form"] != "list":
        yield Problem(f"{ptr}/input_form", f"{META_KEY}.input_form can only be \"list\", "
                                           f"got {_type_name(value['input_form'])}", True)
    if ARCHIVED_FIELD in value:
        n, archived = value[ARCHIVED_FIELD], dump.get(ARCHIVE_KEY)
        if not (_is_int(n) and 0 <= n <= (len(archived) if isinstance(archived, list) else 0)):
            yield Problem(f"{ptr}/{ARCHIVED_FIELD}", f"{META_KEY}.{ARCHIVED_FIELD} must be an integer between 0 and "
                                                     f"the number of {ARCHIVE_KEY} entries, got {_describe(n)}", True)
    if EMPTY_STORE_FIELD in value and value[EMPTY_STORE_FIELD] is not True:
        yield Problem(f"{ptr}/{EMPTY_STORE_FIELD}", f"{META_KEY}.{EMPTY_STORE_FIELD} can only be true, "
                                                    f"got {_type_name(value[EMPTY_STORE_FIELD])}", True)
    if ALIASES_FIELD in value:
        yield from _check_aliases(value[ALIASES_FIELD], f"{ptr}/{ALIASES_FIELD}")
    if TEMPLATES_FIELD in value or TEMPLATED_FIELD in value:
        yield from _check_templates(value.get(TEMPLATES_FIELD, []), f"{ptr}/{TEMPLATES_FIELD}")
        yield from _check_templated(value.get(TEMPLATED_FIELD, []), value.get(TEMPLATES_FIELD),
                                    f"{ptr}/{TEMPLATED_FIELD}")
    if STYLE_FIELD in value:
        problem = style_problem(value[STYLE_FIELD])
        if problem is not None:
            yield Problem(f"{ptr}/{STYLE_FIELD}", f"{META_KEY}.{STYLE_FIELD} (the input's serialisation) {problem}",
                          True)
    if INPUTS_FIELD in value and not isinstance(value[INPUTS_FIELD], dict):
        yield Problem(f"{ptr}/{INPUTS_FIELD}", f"{META_KEY}.{INPUTS_FIELD} must be an object (store key -> original "
                                               f"arguments), got {_type_name(value[INPUTS_FIELD])}", True)


def style_problem(style: Any, form: str | None = None) -> str | None:
    """What is wrong with a recorded style (read from data), or None."""
    if not isinstance(style, dict) or set(style) != {"separators", "ensure_ascii", "indent", "end"}:
        return "must be an object with separators, ensure_ascii, indent and end"
    seps = style["separators"]
    if not (isinstance(seps, list) and len(seps) == 2 and all(isinstance(s, str) for s in seps)
            and _ITEM_SEP.fullmatch(seps[0]) and _KEY_SEP.fullmatch(seps[1])):
        return "separators must be two strings: a comma and a colon with spaces or tabs around them"
    if type(style["ensure_ascii"]) is not bool:
        return "ensure_ascii must be true or false"
    indent = style["indent"]
    if not (indent is None or (type(indent) is int and 0 <= indent <= _MAX_INDENT)
            or (isinstance(indent, str) and _INDENT.fullmatch(indent))):
        return f"indent must be null, a number of spaces up to {_MAX_INDENT} or a string of spaces and tabs"
    end = style["end"]
    forms = [form] if form else list(_END)
    if not (isinstance(end, str) and any(_END[f].fullmatch(end) for f in forms)):
        return "end must be a line end or white space"
    return None


def _check_templated(value: Any, templates: Any, ptr: str) -> Iterator[Problem]:
    n = len(templates) if isinstance(templates, list) else 0
    if not isinstance(value, list):
        yield Problem(ptr, f"{META_KEY}.{TEMPLATED_FIELD} must be an array, got {_type_name(value)}", True)
        return
    seen: set[tuple[str, int]] = set()
    for j, e in enumerate(value):
        ok = (isinstance(e, dict) and type(e.get("id")) is str and _is_int(e.get("occurrence"))
              and e["occurrence"] >= 1 and _is_int(e.get("template")) and 0 <= e["template"] < n
              and (e["id"], e["occurrence"]) not in seen)
        if not ok:
            yield Problem(f"{ptr}/{j}", f"a {META_KEY}.{TEMPLATED_FIELD} entry must be "
                                        '{"id": string, "occurrence": integer >= 1, "template": index into '
                                        f"{TEMPLATES_FIELD}}}, each result once", True)
            continue
        seen.add((e["id"], e["occurrence"]))


def _check_templates(value: Any, ptr: str) -> Iterator[Problem]:
    if not isinstance(value, list) or not all(type(t) is str for t in value):
        yield Problem(ptr, f"{META_KEY}.{TEMPLATES_FIELD} must be an array of strings", True)
        return
    for j, text in enumerate(value):
        try:
            template(text)
        except TemplateError as exc:
            yield Problem(f"{ptr}/{j}", str(exc), True)


def _check_aliases(value: Any, ptr: str) -> Iterator[Problem]:
    if not isinstance(value, list):
        yield Problem(ptr, f"{META_KEY}.{ALIASES_FIELD} must be an array, got {_type_name(value)}", True)
        return
    seen: set[tuple[str, int]] = set()
    keys: set[str] = set()
    for j, entry in enumerate(value):
        ok = (isinstance(entry, dict) and type(entry.get("id")) is str and _is_int(entry.get("occurrence"))
              and entry["occurrence"] >= 1 and (entry.get("key") is None or type(entry.get("key")) is str))
        if not ok:
            yield Problem(f"{ptr}/{j}", f"a {META_KEY}.{ALIASES_FIELD} entry must be "
                                        '{"id": string, "occurrence": integer >= 1, "key": string or null}', True)
            continue
        slot = (entry["id"], entry["occurrence"])
        if slot in seen or (entry.get("key") is not None and entry["key"] in keys):
            yield Problem(f"{ptr}/{j}", f"{META_KEY}.{ALIASES_FIELD} names occurrence {slot[1]} of ID {slot[0]!r} "
                                        "or its key twice", True)
        seen.add(slot)
        if entry.get("key") is not None:
            keys.add(entry["key"])


def check_owned_keys(dump: dict[str, Any]) -> Iterator[Problem]:
    """Shapes of ``tokens_used``, ``compacted_tool_results``, ``summarized_messages``,
    ``compaction_counter`` and ``xcompact`` (each may be absent)."""
    if "tokens_used" in dump:
        yield from _check_tokens_used(dump["tokens_used"], "/tokens_used")
    if ORIGINALS_KEY in dump:
        yield from _check_originals(dump[ORIGINALS_KEY])
    if ARCHIVE_KEY in dump:
        yield from _check_archive(dump[ARCHIVE_KEY])
    if COUNTER_KEY in dump:
        yield from _check_counter(dump[COUNTER_KEY], f"/{COUNTER_KEY}")
    if META_KEY in dump:
        yield from _check_meta(dump[META_KEY], dump)
