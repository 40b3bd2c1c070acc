"""The extract command's look-up: the original of a compacted tool result, by its ID (and
occurrence, for a reused ID), as xun's ``extract_compacted_tool_result`` tool finds it."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from ..model.conversation import ORIGINALS_KEY
from .store import find_stored, originals_key, read_aliases, slot_key, tool_slots


def extract_tool_result(dump: dict, tool_call_id: str, occurrence: int | None = None) -> tuple[Any, int]:
    """The original content of a compacted result, and how many compacted results share the ID.

    With a repeated ID and no ``occurrence``, the first (oldest) stored result with that ID is
    returned, as a plain ``compacted_tool_results[ID]`` look-up (what xun's extract tool does)
    gives; an original stored by xun for a result no longer in the conversation is found by
    that look-up too."""
    originals = dump.get(ORIGINALS_KEY) or {}
    found = find_stored(dump, tool_call_id)
    if not found and occurrence is None:
        keyed = _by_key(dump, tool_call_id)  # the key a placeholder names for a reused ID: ID#k
        if keyed is not None:
            return originals[keyed], 1
    if occurrence is None:
        if found:
            return originals[found[0][1]], len(found)
        if tool_call_id in originals and _unclaimed(dump, tool_call_id):
            return originals[tool_call_id], 1
    else:
        for k, key in found:
            if k == occurrence:
                return originals[key], len(found)
    which = f" (occurrence {occurrence})" if occurrence else ""
    raise InvalidInputError(f"no compacted tool result with ID {tool_call_id!r}{which}")


def _by_key(dump: dict, key: str) -> str | None:
    """``key`` when it is the store key of a compacted result (``ID#2``, an alias), else None."""
    if key not in (dump.get(ORIGINALS_KEY) or {}):
        return None
    aliases = read_aliases(dump)
    for slot in tool_slots(dump):
        if slot_key(slot, aliases) == key and (slot.message is None or slot.is_placeholder):
            return key
    return None


def _unclaimed(dump: dict, key: str) -> bool:
    """True when no result of the conversation (nor any alias) uses ``key``: an original stored
    by xun under the plain ID for a result its summary removed."""
    aliases = read_aliases(dump)
    if key in aliases.values():
        return False
    return all(slot_key(s, aliases) != key and originals_key(s.cid, s.occurrence) != key for s in tool_slots(dump))
