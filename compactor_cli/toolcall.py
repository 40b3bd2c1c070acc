"""Tier 1: replace old tool results by a placeholder naming their tool-call ID.

Pure functions over dumps (dicts); nothing here reads or writes files. The originals are kept
in the dump under ``compacted_tool_results`` so that ``extract`` and ``restore`` can give them
back exactly. Tool-call IDs are reused in real transcripts, so the key of a result is its ID for
the first result with that ID in the conversation and ``"<ID>#<k>"`` for the k-th (k >= 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .conversation import META_KEY, ORIGINALS_KEY, content_length, estimated_message_length
from .errors import InvalidInputError
from .summary_store import restore_summaries

PLACEHOLDER_TEMPLATE = (
    "[Compacted, ID: {id}. If this content is still needed, call extract_compacted_tool_result "
    "with this ID or re-run the tool.]"
)
DEFAULT_KEEP = 12  # xun's toolcall_keep_max


def placeholder_for(tool_call_id: str) -> str:
    return PLACEHOLDER_TEMPLATE.format(id=tool_call_id)


def originals_key(tool_call_id: str, occurrence: int) -> str:
    """Key under which the original of the ``occurrence``-th result with this ID is kept."""
    return tool_call_id if occurrence == 1 else f"{tool_call_id}#{occurrence}"


def tool_result_keys(messages: list[dict], first_occurrence: dict[str, int] | None = None) -> dict[int, str]:
    """Map index of each tool message with an ID to its originals key, counting repeated IDs.

    ``first_occurrence`` carries counts of results that came earlier (e.g. summarised away)."""
    seen = dict(first_occurrence or {})
    keys: dict[int, str] = {}
    for i, m in enumerate(messages):
        if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            cid = m["tool_call_id"]
            seen[cid] = seen.get(cid, 0) + 1
            keys[i] = originals_key(cid, seen[cid])
    return keys


@dataclass
class ToolCallCompactResult:
    """What tier 1 did to one conversation (xun returns reclaimed_count and reclaimed_fraction)."""

    reclaimed_count: int = 0
    reclaimed_fraction: float = 0.0
    length_before: int = 0
    length_after: int = 0
    skipped_no_id: int = 0
    compacted_indices: list[int] = field(default_factory=list)


def reclaim_tool_results(dump: dict, keep: int = DEFAULT_KEEP, keep_originals: bool = True,
                         key_offsets: dict[str, int] | None = None) -> tuple[dict, ToolCallCompactResult]:
    """Replace tool results older than the most recent ``keep`` by placeholders.

    A result is replaced only where the placeholder is shorter; one already compacted is left
    alone and not counted. Returns a new dump; the input is not modified.
    """
    if keep < 0:
        raise ValueError("keep must be >= 0")
    messages: list[dict] = dump["messages"]
    tool_indices = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    old = tool_indices[: max(0, len(tool_indices) - keep)]
    result = ToolCallCompactResult()
    before = estimated_message_length(messages)
    result.length_before = result.length_after = before
    if not old:
        return dump, result
    keys = tool_result_keys(messages, key_offsets) if keep_originals else {}
    new_messages = list(messages)
    originals = dict(dump.get(ORIGINALS_KEY) or {})
    saved = 0
    for i in old:
        m = messages[i]
        cid = m.get("tool_call_id")
        if not isinstance(cid, str):
            result.skipped_no_id += 1
            continue
        content = m.get("content")
        placeholder = placeholder_for(cid)
        if content == placeholder:
            continue
        old_len = content_length(content)
        if len(placeholder) >= old_len:
            continue
        new_messages[i] = {**m, "content": placeholder}
        if keep_originals:
            originals.setdefault(keys[i], content)
        saved += old_len - len(placeholder)
        result.compacted_indices.append(i)
    result.reclaimed_count = len(result.compacted_indices)
    if not result.reclaimed_count:
        return dump, result
    result.length_after = before - saved
    result.reclaimed_fraction = saved / before if before else 0.0
    new_dump = dict(dump)
    new_dump["messages"] = new_messages
    if keep_originals:
        new_dump[ORIGINALS_KEY] = originals
    return new_dump, result


def restore_tool_results(dump: dict) -> tuple[dict, int]:
    """Put back every placeholder whose original is stored; drop the store once empty.

    Returns the new dump and how many results were restored."""
    originals = dump.get(ORIGINALS_KEY)
    if not originals:
        return dump, 0
    messages = dump["messages"]
    keys = tool_result_keys(messages)  # after restore_summaries: the whole conversation is back
    remaining = dict(originals)
    new_messages = list(messages)
    restored = 0
    for i, key in keys.items():
        m = messages[i]
        if key in remaining and m.get("content") == placeholder_for(m["tool_call_id"]):
            new_messages[i] = {**m, "content": remaining.pop(key)}
            restored += 1
    new_dump = dict(dump)
    new_dump["messages"] = new_messages
    if remaining:
        new_dump[ORIGINALS_KEY] = remaining
    else:
        del new_dump[ORIGINALS_KEY]
    return new_dump, restored


def restore_conversation(dump: dict) -> tuple[dict, int]:
    """Give back the conversation as it was before xcompact (and xun) compacted it."""
    dump, rounds = restore_summaries(dump)  # the tier-2 archive first, then the placeholders
    dump, restored = restore_tool_results(dump)
    meta = dump.get(META_KEY)
    if META_KEY in dump:
        dump = {k: v for k, v in dump.items() if k != META_KEY}
        replaced = meta.get("replaced") if isinstance(meta, dict) else None
        for key, value in (replaced or {}).items():  # keys compact changed, as they were first
            dump[key] = value
        for key in (meta.get("absent") or []) if isinstance(meta, dict) else []:
            dump.pop(key, None)
    return dump, restored + rounds


def extract_tool_result(dump: dict, tool_call_id: str, occurrence: int | None = None) -> tuple[Any, int]:
    """The original content of a compacted result, and how many compacted results share the ID.

    With a repeated ID and no ``occurrence``, the first (oldest) result with that ID is returned,
    as a plain ``compacted_tool_results[ID]`` look-up (what xun's extract tool does) gives."""
    originals = dump.get(ORIGINALS_KEY) or {}
    prefix = tool_call_id + "#"
    shared = sum(1 for k in originals if k == tool_call_id or
                 (k.startswith(prefix) and k[len(prefix):].isdigit()))
    key = originals_key(tool_call_id, occurrence or 1)
    if key not in originals:
        if shared and occurrence is None:  # only later occurrences were compacted
            key = min((k for k in originals if k.startswith(prefix) and k[len(prefix):].isdigit()),
                      key=lambda k: int(k[len(prefix):]))
        else:
            which = f" (occurrence {occurrence})" if occurrence else ""
            raise InvalidInputError(f"no compacted tool result with ID {tool_call_id!r}{which}")
    return originals[key], shared
