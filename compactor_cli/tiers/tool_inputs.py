"""The input text of tool calls (a function's arguments, a custom tool's input such as Codex's
apply_patch patch): cleared to a placeholder (``--clear-tool-inputs``) or cut to a legible prefix
(``--truncate-inputs``), the originals stored for restore."""

from __future__ import annotations

from typing import Any

from ..model.placeholders import is_truncated_input, truncated_arguments
from .store import input_placeholder, is_input_placeholder, originals_key


def truncate_old_inputs(messages: list[dict], old: list[int], calls: dict[int, tuple[int, int]], limit: int,
                        stored_inputs: dict, inputs: dict[str, Any], keep_originals: bool,
                        occurrence: dict[int, int], aliases: dict[tuple[str, int], str | None]) -> int:
    """Cut the long arguments of the calls the ``old`` results answer (in ``messages``, copying
    what it changes), storing the originals in ``inputs``; how many calls were cut."""
    cut_calls = 0
    for i in old:
        cid = messages[i].get("tool_call_id")
        if i not in calls or not isinstance(cid, str):
            continue
        k = occurrence.get(i, 1)
        key = aliases.get((cid, k), originals_key(cid, k))
        if key is None:
            continue
        mi, ci = calls[i]
        msg = messages[mi]
        call = msg["tool_calls"][ci]
        field = input_field(call)
        if key in stored_inputs or key in inputs or field is None:
            continue  # a key in use is never reused; only a call's arguments or custom input text is cut
        part, name = field
        args = call[part][name]
        if is_input_placeholder(args) or is_truncated_input(args):
            continue
        cut = truncated_arguments(args, limit, key)
        if cut is None:
            continue
        new_calls = list(msg["tool_calls"])
        new_calls[ci] = {**call, part: {**call[part], name: cut}}
        messages[mi] = {**msg, "tool_calls": new_calls}
        if keep_originals:
            inputs[key] = args
        cut_calls += 1
    return cut_calls


def input_field(call: Any) -> tuple[str, str] | None:
    """Where a call's input text is: a function call's ``function.arguments``, or a custom tool
    call's ``custom.input`` (Codex's apply_patch: its patch). None for anything else."""
    if not isinstance(call, dict):
        return None
    kind = call.get("type", "function")
    if kind == "function" and isinstance(call.get("function"), dict) \
            and isinstance(call["function"].get("arguments"), str):
        return "function", "arguments"
    if kind == "custom" and isinstance(call.get("custom"), dict) and isinstance(call["custom"].get("input"), str):
        return "custom", "input"
    if kind == "custom" and isinstance(call.get("function"), dict) \
            and isinstance(call["function"].get("arguments"), str):
        return "function", "arguments"  # a Responses request's custom call: its input, read as a function's
    return None


def clear_input(messages: list[dict], at: tuple[int, int], key: str) -> tuple[str, str] | None:
    """Replace the input text of the call at ``at`` (a function's arguments or a custom tool's
    input; in ``messages``, copying what it changes) by the input placeholder naming ``key``;
    (original text, placeholder), or None when there is no such text, it is cleared already,
    or it is shorter."""
    mi, ci = at
    msg = messages[mi]
    call = msg["tool_calls"][ci]
    field = input_field(call)
    if field is None:
        return None
    part, name = field
    args = call[part][name]
    marker = input_placeholder(key)
    if is_input_placeholder(args) or len(marker) >= len(args):
        return None
    new_calls = list(msg["tool_calls"])
    new_calls[ci] = {**call, part: {**call[part], name: marker}}
    messages[mi] = {**msg, "tool_calls": new_calls}
    return args, marker
