"""Undo compaction exactly: give back the conversation as it was before tiers 1 and 2.

Restore undoes the summary rounds newest first — as long as the newest archived round is the
conversation's latest summary (``compaction_counter.summary_rounds``; a later round by xun or a
dropped round cannot be undone) — then puts back every stored original in place of its
placeholder. Shapes are checked beforehand by ``checks.check_conversation``.
The store it reads is described in store.py.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..errors import InvalidInputError
from ..files.style import STYLE_FIELD
from ..model.conversation import (
    ARCHIVE_KEY,
    ARCHIVED_FIELD,
    COUNTER_KEY,
    EMPTY_STORE_FIELD,
    INPUTS_FIELD,
    META_KEY,
    ORIGINALS_KEY,
    REPLACED_KEYS,
    TEMPLATED_FIELD,
    TEMPLATES_FIELD,
)
from ..model.placeholders import is_truncated_input
from .media import CLEARED_FIELD, restore_media
from .store import (
    answered_calls,
    input_placeholder,
    read_aliases,
    slot_key,
    templated_results,
    tool_slots,
    with_aliases,
    with_meta,
    with_templated,
)


class RestoreDetails(NamedTuple):
    """What restore did: ``restored`` results and summary rounds put back; ``missing`` placeholders
    left without a stored original plus summary rounds that could not be undone."""

    dump: Any
    restored: int
    missing: int


def _summary_rounds(dump: dict) -> int:
    counter = dump.get(COUNTER_KEY)
    n = counter.get("summary_rounds") if isinstance(counter, dict) else None
    return n if isinstance(n, int) else 0


def _apply_remembered(dump: dict) -> tuple[dict, int]:
    """Put back the keys compact recorded (``xcompact.replaced`` / ``absent``) and forget them.
    Also returns how many summary rounds compact made that are not archived (--originals drop)."""
    meta = dump[META_KEY]
    before = (meta.get("replaced") or {}).get(COUNTER_KEY)
    lost = max(0, _summary_rounds(dump) - _summary_rounds({COUNTER_KEY: before}))
    dump = dict(dump)
    for key, value in (meta.get("replaced") or {}).items():
        dump[key] = value
    for key in meta.get("absent") or ():
        dump.pop(key, None)
    dump[META_KEY] = {k: v for k, v in meta.items() if k not in ("replaced", "absent", ARCHIVED_FIELD)}
    return dump, lost


def _restore_summaries(dump: dict) -> tuple[dict, int, int]:
    """Undo the archived summary rounds, newest first, putting back what compact recorded when
    the archive is back to the length it had then. Returns (dump, undone, left): a round is left
    when it was dropped (with or without an entry) or when a later summary (by xun) is not in
    the archive."""
    archive = list(dump.get(ARCHIVE_KEY) or ())
    meta = dump.get(META_KEY)
    remembered_at = None
    if isinstance(meta, dict) and ("replaced" in meta or "absent" in meta):
        remembered_at = meta.get(ARCHIVED_FIELD) or 0
    if not archive and remembered_at is None:
        return dump, 0, 0
    dump = dict(dump)
    undone = lost = 0
    while True:
        if remembered_at is not None and len(archive) <= remembered_at:
            dump, lost = _apply_remembered(dump)
            remembered_at = None
        if not archive:
            break
        entry = archive[-1]
        if entry.get("dropped") or entry.get("round") != _summary_rounds(dump):
            break
        j = len(archive) - 1
        messages = dump["messages"]
        if not messages or messages[0].get("role") != "system":
            raise InvalidInputError(f"summary round {entry['round']} cannot be undone: the first message is not "
                                    "the summary's system message", f"/{ARCHIVE_KEY}/{j}")
        kept = messages[1:]
        head = list(entry["head"])
        kept_at = entry.get("kept_at")
        if kept_at:  # the task, later user messages, a force-kept one: first in the kept part, in order
            if len(kept) < len(kept_at):
                raise InvalidInputError(f"summary round {entry['round']} cannot be undone: it kept "
                                        f"{len(kept_at)} messages of the head verbatim, which are not there",
                                        f"/{ARCHIVE_KEY}/{j}/kept_at")
            for pos, message in zip(kept_at, kept[:len(kept_at)], strict=True):
                head.insert(pos, message)
            kept = kept[len(kept_at):]
        at = entry.get("forced_user_at")
        if at is not None:
            if not kept:
                raise InvalidInputError(f"summary round {entry['round']} cannot be undone: it force-kept a user "
                                        "message that is not there", f"/{ARCHIVE_KEY}/{j}/forced_user_at")
            head.insert(at, kept[0])
            kept = kept[1:]
        system = [entry["system"]] if entry.get("system") is not None else []
        dump["messages"] = system + head + kept
        replaced = entry.get("replaced_keys") or {}
        for key in REPLACED_KEYS:
            if key in replaced:
                dump[key] = replaced[key]
            else:
                dump.pop(key, None)
        archive.pop()
        undone += 1
    if archive:
        dump[ARCHIVE_KEY] = archive
    else:
        dump.pop(ARCHIVE_KEY, None)
    return dump, undone, len(archive) + lost


def restore_summaries(dump: dict) -> tuple[dict, int]:
    """Undo every summary round that can be undone, newest first. Returns (dump, rounds)."""
    dump, undone, _ = _restore_summaries(dump)
    return dump, undone


def _restore_tool_results(dump: dict) -> tuple[dict, int, int]:
    """Put back every stored original in place of its placeholder. Returns (dump, restored,
    placeholders left without a stored original)."""
    originals = dump.get(ORIGINALS_KEY)
    aliases = read_aliases(dump)
    remaining = dict(originals or {})
    new_messages = list(dump["messages"])
    restored = missing = 0
    templated = templated_results(dump)
    templated_before = dict(templated)
    for slot in tool_slots(dump, archived=False):
        if not slot.is_placeholder:
            continue
        key = slot_key(slot, aliases)
        if key is None or key not in remaining:
            missing += 1
            continue
        assert slot.message is not None and slot.index is not None  # archived=False: live messages only
        new_messages[slot.index] = {**slot.message, "content": remaining.pop(key)}
        aliases.pop((slot.cid, slot.occurrence), None)
        templated.pop((slot.cid, slot.occurrence), None)
        restored += 1
    if not restored:
        return dump, 0, missing
    new = with_templated(dump, templated) if templated != templated_before else dict(dump)
    new["messages"] = new_messages
    meta = new.get(META_KEY)
    if remaining:
        new[ORIGINALS_KEY] = remaining
    elif isinstance(meta, dict) and meta.get(EMPTY_STORE_FIELD):  # the input had an empty store
        new[ORIGINALS_KEY] = {}
        new[META_KEY] = {k: v for k, v in meta.items() if k != EMPTY_STORE_FIELD}
    else:
        del new[ORIGINALS_KEY]
    return with_aliases(new, aliases), restored, missing


def _restore_tool_inputs(dump: dict) -> dict:
    """Put back the arguments --clear-tool-inputs cleared (before the results: it reads the keys
    their aliases give). Inputs whose call is no longer where it was stay stored."""
    meta = dump.get(META_KEY)
    if not isinstance(meta, dict) or not meta.get(INPUTS_FIELD):
        return dump
    remaining = dict(meta[INPUTS_FIELD])
    aliases = read_aliases(dump)
    calls = answered_calls(dump["messages"])
    new_messages = list(dump["messages"])
    for slot in tool_slots(dump, archived=False):
        key = slot_key(slot, aliases)
        if key is None or key not in remaining or slot.index not in calls:
            continue
        mi, ci = calls[slot.index]
        msg = new_messages[mi]
        call = msg["tool_calls"][ci]
        for part, name in (("function", "arguments"), ("custom", "input")):  # a custom call's input too
            fn = call.get(part)
            if isinstance(fn, dict) and (fn.get(name) == input_placeholder(key)
                                         or is_truncated_input(fn.get(name), key)):
                new_calls = list(msg["tool_calls"])
                new_calls[ci] = {**call, part: {**fn, name: remaining.pop(key)}}
                new_messages[mi] = {**msg, "tool_calls": new_calls}
                break
    new_meta = {k: v for k, v in meta.items() if k != INPUTS_FIELD}
    if remaining:
        new_meta[INPUTS_FIELD] = remaining
    return with_meta({**dump, "messages": new_messages}, new_meta)


def restore_tool_results(dump: dict) -> tuple[dict, int]:
    """Put back every placeholder whose original is stored; drop the store once empty.
    Returns the new dump and how many results were restored."""
    dump, restored, _ = _restore_tool_results(dump)
    return dump, restored


def restore_details(dump: Any) -> RestoreDetails:
    """Give back the conversation as it was before xcompact (and xun) compacted it, and say what
    could not be given back. A bare list of messages gives a list back."""
    from . import arguments as check

    check.conversation(dump, shape=True)
    return restore_checked(dump)


def restore_checked(dump: Any) -> RestoreDetails:
    """``restore_details`` of a conversation whose shape is checked already (the engine's step
    checks every record before its transform: not twice on the way)."""
    if isinstance(dump, list):
        new, restored, missing = restore_checked({"messages": dump})
        return RestoreDetails(new["messages"] if list(new) == ["messages"] else new, restored, missing)
    dump, rounds, rounds_left = _restore_summaries(dump)  # the tier-2 archive first, then the placeholders
    dump, media = restore_media(dump)
    dump = _restore_tool_inputs(dump)
    dump, restored, missing = _restore_tool_results(dump)
    meta = dump.get(META_KEY)
    if isinstance(meta, dict) and not dump.get(ARCHIVE_KEY):
        # everything is back: the bookkeeping goes, but for what a placeholder left still needs:
        # the aliases of stored originals, inputs not given back, templates of placeholders left
        # (and the input's serialisation style, for a later restore: once everything is back, the
        # writer reads it before restoring, files/style.py)
        left = read_aliases(dump)
        kept = {k: meta[k] for k in (INPUTS_FIELD, TEMPLATES_FIELD, TEMPLATED_FIELD, CLEARED_FIELD) if meta.get(k)}
        if (kept or left) and STYLE_FIELD in meta:
            kept[STYLE_FIELD] = meta[STYLE_FIELD]
        dump = with_aliases({**{k: v for k, v in dump.items() if k != META_KEY},
                             **({META_KEY: kept} if kept else {})}, left)
    return RestoreDetails(dump, restored + rounds + media, missing + rounds_left)


def restore_conversation(dump: Any) -> tuple[Any, int]:
    """Give back the conversation as it was before xcompact (and xun) compacted it.
    Returns (dump, how many tool results and summary rounds were put back)."""
    details = restore_details(dump)
    return details.dump, details.restored


# ---- what the model can still fetch
