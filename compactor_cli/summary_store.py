"""Where tier 2 keeps what it replaced, so that ``restore`` gives the input back exactly.

``summarized_messages`` is a list with one entry per summary round::

    {"round": 1, "system": <the replaced system message or null>, "head": [<summarised messages>],
     "forced_user_at": <index in head where the force-kept user message sat, or null>,
     "replaced_keys": {"tokens_used": ..., "compaction_counter": ...}}   # their values before

Restore undoes the rounds newest first, then the tier-1 placeholders."""

from __future__ import annotations

ARCHIVE_KEY = "summarized_messages"
COUNTER_KEY = "compaction_counter"
_REPLACED = ("tokens_used", COUNTER_KEY)


def restore_summaries(dump: dict) -> tuple[dict, int]:
    """Undo every summary round recorded in the dump, newest first. Returns (dump, rounds)."""
    archive = dump.get(ARCHIVE_KEY)
    if not archive:
        return dump, 0
    dump = dict(dump)
    rounds = 0
    for entry in reversed(archive):
        kept = dump["messages"][1:]  # messages[0] is the summary's system message
        head = list(entry["head"])
        at = entry.get("forced_user_at")
        if at is not None:
            head.insert(at, kept[0])
            kept = kept[1:]
        system = [entry["system"]] if entry.get("system") is not None else []
        dump["messages"] = system + head + kept
        replaced = entry.get("replaced_keys") or {}
        for key in _REPLACED:
            if key in replaced:
                dump[key] = replaced[key]
            else:
                dump.pop(key, None)
        rounds += 1
    del dump[ARCHIVE_KEY]
    return dump, rounds
