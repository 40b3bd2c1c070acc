"""OpenAI chat completions: today's dumps, plus the legacy ``function`` role and ``function_call``.

A dump without legacy messages is read exactly as the pipeline always read it (same checks,
same bytes). Legacy messages are mapped to tool calls for the tiers and back when written:

- an assistant message with ``function_call`` {name, arguments} becomes one with ``tool_calls``
  holding one call whose ID is ``function_call_<n>`` (the n-th legacy call of the conversation,
  counting those archived by earlier summary rounds, so the ID stays the same from run to run);
- a ``function`` message becomes a ``tool`` message answering the latest legacy call (its
  ``name`` is kept), so tier 1 can replace its content by the placeholder naming that ID.

Both remember their native keys, so the written record has the legacy shape again.
"""

from __future__ import annotations

import re
from typing import Any, cast

from ..model.conversation import ARCHIVE_KEY, META_KEY, denormalize_record, normalize_record, prescan
from .base import MSG_KEY, Codec, jdump, jload

LEGACY = "openai-function"
_SID = re.compile(r"function_call_(\d+)\Z")


def has_legacy(messages: Any) -> bool:
    """Does the conversation hold a ``function`` message (the legacy function-calling form)?"""
    if type(messages) is not list:
        return False
    if prescan(messages) is not None:  # the record loop's walk found every role a known one: none is "function"
        return False
    return any(type(m) is dict and m.get("role") == "function" for m in messages)


def _next_sid(dump: dict) -> int:
    """1 + the largest n of a ``function_call_<n>`` ID already archived (0 when none)."""
    best = -1
    archive = dump.get(ARCHIVE_KEY)
    for entry in archive if isinstance(archive, list) else ():
        if not isinstance(entry, dict):
            continue
        ids = list(entry.get("tool_call_ids") or ()) if entry.get("dropped") else []
        head = entry.get("head")
        for m in head if isinstance(head, list) else ():
            calls = m.get("tool_calls") if isinstance(m, dict) else None
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict):
                    ids.append(call.get("id"))
        for cid in ids:
            found = _SID.match(cid) if isinstance(cid, str) else None
            if found:
                best = max(best, int(found.group(1)))
    return best + 1


def legacy_to_internal(dump: dict) -> dict:
    """A dump with legacy messages, its legacy messages mapped to tool calls (new dict)."""
    n = _next_sid(dump)
    used = {c.get("id") for m in dump["messages"] if isinstance(m, dict)
            for c in (m.get("tool_calls") or () if isinstance(m.get("tool_calls"), list) else ())
            if isinstance(c, dict)}
    current: str | None = None
    out = []
    for m in dump["messages"]:
        if type(m) is not dict:
            out.append(m)
            continue
        if m.get("role") == "assistant" and isinstance(m.get("function_call"), dict):
            sid = f"function_call_{n}"
            while sid in used:
                n += 1
                sid = f"function_call_{n}"
            n += 1
            current = sid
            new = {k: v for k, v in m.items() if k != "function_call"}
            new["tool_calls"] = [{"id": sid, "type": "function", "function": m["function_call"]}]
            new[MSG_KEY] = jdump({"f": LEGACY, "keys": list(m)})
            out.append(new)
        elif m.get("role") == "function":
            new = {k: v for k, v in m.items() if k != "role"}
            new = {"role": "tool", **new}
            if current is not None:
                new["tool_call_id"] = current
            new[MSG_KEY] = jdump({"f": LEGACY, "keys": list(m)})
            out.append(new)
            current = None  # a legacy call has one result
        else:
            out.append(m)
            current = None
    return {**dump, "messages": out}


def legacy_message_to_native(m: dict) -> dict:
    memo = jload(m[MSG_KEY])
    native: dict[str, Any] = {}
    for k in memo["keys"]:
        if k == "role":
            native[k] = "function" if m.get("role") == "tool" else m.get("role")
        elif k == "function_call":
            native[k] = m["tool_calls"][0]["function"]
        elif k in m:
            native[k] = m[k]
    return native


def _legacy_back(messages: list) -> list:
    out = []
    for m in messages:
        if type(m) is dict and MSG_KEY in m and isinstance(m[MSG_KEY], str) \
                and m[MSG_KEY].startswith('{"f":"' + LEGACY):
            out.append(legacy_message_to_native(m))
        else:
            out.append(m)
    return out


class OpenAICodec(Codec):
    """Today's pipeline behaviour: the bare-list / object shape rules of ``engine.step``."""

    format = "openai"

    def __init__(self, original: Any, shape: str, out_shape: str, legacy: bool = False) -> None:
        super().__init__(original)
        self.shape, self.out_shape, self.legacy = shape, out_shape, legacy

    def to_native(self, dump: dict) -> Any:
        new = dump
        if self.legacy or any(type(m) is dict and MSG_KEY in m for m in new["messages"]):
            # legacy messages (also those a restore brought back from the archive) in their own shape
            new = {**new, "messages": _legacy_back(new["messages"])}
        if self.out_shape == "list" and list(new.keys()) != ["messages"]:
            meta = cast(dict, new.get(META_KEY)) if isinstance(new.get(META_KEY), dict) else {}
            new = {"messages": new["messages"], **{k: v for k, v in new.items() if k not in ("messages", META_KEY)},
                   META_KEY: {**meta, "input_form": "list"}}
        return denormalize_record(new, self.out_shape)


def read_openai(obj: Any) -> tuple[dict, OpenAICodec]:
    """(internal dump, codec) of an OpenAI record; InvalidInputError as normalize_record."""
    dump, shape = normalize_record(obj)
    meta = dump.get(META_KEY)
    out_shape = "list" if isinstance(meta, dict) and meta.get("input_form") == "list" else shape
    legacy = has_legacy(dump.get("messages"))
    if legacy:
        dump = legacy_to_internal(dump)
    return dump, OpenAICodec(obj, shape, out_shape, legacy)
