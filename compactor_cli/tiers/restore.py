"""Everything ``restore`` needs, and the bookkeeping that makes it exact.

**Where originals live.** ``compacted_tool_results`` maps a key to the original content of a
compacted tool result. The key of the k-th result with tool-call ID ``X`` in the whole
conversation (archived heads first, round by round, then the messages) is ``X`` for k = 1 —
what xun's extract tool looks up — and ``X#k`` for k >= 2. Tool-call IDs are arbitrary strings
(``"a#2"`` is a valid ID, so is ``""``) and stores can hold keys of results no longer in the
conversation (xun's summaries, ``--originals drop`` rounds, edits), so that usual key is not
always free. When it is taken — already in the store, claimed by another result, or used as an
alias — the content goes under a fresh key and ``xcompact.tool_result_keys`` records
``{"id": X, "occurrence": k, "key": <fresh key>}`` (``"key": null`` when the placeholder has no
stored original because originals were dropped). Nothing is ever overwritten, so no content is
lost, and restore and extract look the alias up first.

**The tier-2 archive.** ``summarized_messages`` holds one entry per summary round::

    {"round": 1, "system": <the replaced system message or null>, "head": [<summarised messages>],
     "forced_user_at": <index in head where the force-kept user message sat, or null>,
     "replaced_keys": {"tokens_used": ..., "compaction_counter": ...}}   # their values before

A round summarised with ``--originals drop`` while the dump holds originals or an archive leaves
``{"round": n, "dropped": true, "tool_call_ids": [...]}``: the messages are gone, but the tool
results keep their numbering and restore knows it cannot go back past that round.

**The rest of** ``xcompact``: ``replaced`` / ``absent`` record the input's ``tokens_used``
and ``compaction_counter`` before compact changed them, and ``archived_rounds`` how many summary
rounds the input had archived then (``remember``); ``empty_store: true`` says the input had an
empty ``compacted_tool_results`` (restore gives ``{}`` back instead of removing the key);
``input_form`` is the pipeline's (a bare list became an object).

Restore undoes the summary rounds newest first — as long as the newest archived round is the
conversation's latest summary (``compaction_counter.summary_rounds``; a later round by xun or a
dropped round cannot be undone) — then puts back every stored original in place of its
placeholder. Shapes are checked beforehand by ``conversation.check_conversation``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import InvalidInputError
from ..model.conversation import (
    ALIASES_FIELD,
    ARCHIVE_KEY,
    ARCHIVED_FIELD,
    COUNTER_KEY,
    EMPTY_STORE_FIELD,
    META_KEY,
    ORIGINALS_KEY,
    REPLACED_KEYS,
    placeholder_for,
)

_MISSING = object()
_PH_HEAD, _PH_TAIL = placeholder_for("\0").split("\0")


def originals_key(tool_call_id: str, occurrence: int) -> str:
    """The usual key of the ``occurrence``-th result with this ID (see the module docstring)."""
    return tool_call_id if occurrence == 1 else f"{tool_call_id}#{occurrence}"


# ---- where each tool result of the whole conversation is

@dataclass(frozen=True)
class ToolSlot:
    """One tool result with an ID: its occurrence number among results with that ID, and its
    message (None when only the ID is left: a round summarised with --originals drop);
    ``index`` is its position in ``dump["messages"]`` (None when archived)."""

    cid: str
    occurrence: int
    message: dict | None
    index: int | None

    @property
    def is_placeholder(self) -> bool:
        return self.message is not None and is_placeholder_of(self.message.get("content"), self.cid)


def is_placeholder_of(content: Any, cid: str) -> bool:
    """``content`` is the placeholder naming this ID or one of its store keys (``ID#k``, an alias
    ``ID#k~n``: what a reused ID's placeholder names)."""
    if not isinstance(content, str) or not (content.startswith(_PH_HEAD) and content.endswith(_PH_TAIL)):
        return False
    named = content[len(_PH_HEAD):len(content) - len(_PH_TAIL)]
    if named == cid:
        return True
    return (len(named) > len(cid) + 1 and named.startswith(cid) and named[len(cid)] in "#~"
            and content == placeholder_for(named))


def _archived(dump: dict) -> Iterator[tuple[str, dict | None]]:
    for entry in dump.get(ARCHIVE_KEY) or ():
        if entry.get("dropped"):
            for cid in entry.get("tool_call_ids") or ():
                yield cid, None
            continue
        for m in entry.get("head") or ():
            if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
                yield m["tool_call_id"], m


def head_tool_counts(dump: dict) -> dict[str, int]:
    """How many tool results per ID the archive holds, so the numbering of the results still in
    the conversation continues from there."""
    counts: dict[str, int] = {}
    for cid, _ in _archived(dump):
        counts[cid] = counts.get(cid, 0) + 1
    return counts


def tool_slots(dump: dict, archived: bool = True) -> list[ToolSlot]:
    """Every tool result with an ID, chronologically: archived heads, then the messages (with
    ``archived=False`` only the latter, numbered after the archived ones)."""
    seen: dict[str, int] = {}
    slots: list[ToolSlot] = []
    for cid, m in _archived(dump):
        seen[cid] = seen.get(cid, 0) + 1
        if archived:
            slots.append(ToolSlot(cid, seen[cid], m, None))
    for i, m in enumerate(dump["messages"]):
        if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            cid = m["tool_call_id"]
            seen[cid] = seen.get(cid, 0) + 1
            slots.append(ToolSlot(cid, seen[cid], m, i))
    return slots


def read_aliases(dump: dict) -> dict[tuple[str, int], str | None]:
    """``(ID, occurrence) -> key`` for results stored under an unusual key (None: not stored)."""
    meta = dump.get(META_KEY)
    entries = meta.get(ALIASES_FIELD) if isinstance(meta, dict) else None
    return {(e["id"], e["occurrence"]): e.get("key") for e in entries or ()}


def with_aliases(dump: dict, aliases: dict[tuple[str, int], str | None]) -> dict:
    """The dump with ``xcompact.tool_result_keys`` set to ``aliases`` (removed when empty; an
    ``xcompact`` left empty is removed too). Returns a new dict."""
    meta = dict(dump.get(META_KEY) or {})
    if aliases:
        meta[ALIASES_FIELD] = [{"id": cid, "occurrence": k, "key": key} for (cid, k), key in aliases.items()]
    else:
        meta.pop(ALIASES_FIELD, None)
    new = dict(dump)
    if meta:
        new[META_KEY] = meta
    else:
        new.pop(META_KEY, None)
    return new


def slot_key(slot: ToolSlot, aliases: dict[tuple[str, int], str | None]) -> str | None:
    key = aliases.get((slot.cid, slot.occurrence), _MISSING)
    return originals_key(slot.cid, slot.occurrence) if key is _MISSING else key  # type: ignore[return-value]


class KeyAllocator:
    """Chooses store keys for results being compacted so that nothing already stored, no other
    result's usual key and no alias is ever reused (see the module docstring)."""

    def __init__(self, dump: dict, offsets: dict[str, int] | None, originals: dict[str, Any]) -> None:
        self.originals = originals
        self.aliases = read_aliases(dump)
        self.changed = False
        self.alias_keys = {k for k in self.aliases.values() if k is not None}
        self.occurrence: dict[int, int] = {}  # message index -> occurrence among results with its ID
        archived = dict(head_tool_counts(dump) if offsets is None else offsets)
        seen = dict(archived)
        special = any("#" in cid or "~" in cid for cid in archived)
        for i, m in enumerate(dump["messages"]):
            if m.get("role") == "tool":
                cid = m.get("tool_call_id")
                if type(cid) is str:
                    n = seen[cid] = seen.get(cid, 0) + 1
                    self.occurrence[i] = n
                    if not special and ("#" in cid or "~" in cid):
                        special = True
        # How many results claim each usual key. Two can claim the same one, and a fresh key
        # can be another's usual key, only when some ID holds '#' or '~': count them only then.
        self.claims: dict[str, int] | None = None
        if special:
            self.claims = {}
            for cid, n in archived.items():
                for k in range(1, n + 1):
                    key = originals_key(cid, k)
                    self.claims[key] = self.claims.get(key, 0) + 1
            for i, k in self.occurrence.items():
                key = originals_key(dump["messages"][i]["tool_call_id"], k)
                self.claims[key] = self.claims.get(key, 0) + 1

    def _claimed(self, key: str) -> int:
        return self.claims.get(key, 0) if self.claims is not None else 0

    def _forget(self, slot: tuple[str, int]) -> None:
        old = self.aliases.pop(slot, None)
        if old is not None:
            self.alias_keys.discard(old)
        self.changed = True

    def store(self, index: int, cid: str, content: Any) -> str:
        """Store ``content`` of the result at message ``index``; returns the key used."""
        k = self.occurrence[index]
        slot = (cid, k)
        if slot in self.aliases:  # left over from a result no longer there, or a dropped original
            self._forget(slot)
        key = originals_key(cid, k)
        if key in self.originals or self._claimed(key) > 1 or key in self.alias_keys:
            n = 1
            while True:
                fresh = f"{originals_key(cid, k)}~{n}"
                if fresh not in self.originals and not self._claimed(fresh) and fresh not in self.alias_keys:
                    break
                n += 1
            key = fresh
            self.aliases[slot] = key
            self.alias_keys.add(key)
            self.changed = True
        self.originals[key] = content
        return key

    def drop(self, index: int, cid: str) -> None:
        """A result compacted without keeping its original: if its usual key holds someone
        else's content, record that it has none, so restore never puts that content back."""
        k = self.occurrence[index]
        slot = (cid, k)
        key = originals_key(cid, k)
        if slot in self.aliases or key in self.originals or key in self.alias_keys:
            if slot in self.aliases:
                self._forget(slot)
            self.aliases[slot] = None
            self.changed = True


# ---- compact's record of the input's keys

def remember(new: dict, original: dict, keys: tuple[str, ...] = REPLACED_KEYS) -> dict:
    """Record, once, the input's values of keys the policy changes, so restore gives them back;
    and how many summary rounds the input had archived, so restore puts them back at that point
    (after undoing the newer rounds, before the older ones)."""
    meta = dict(new.get(META_KEY) or {})
    replaced = dict(meta.get("replaced") or {})
    absent = list(meta.get("absent") or [])
    first = not replaced and not absent
    for key in keys:
        if key in replaced or key in absent:
            continue
        if key in original:
            replaced[key] = original[key]
        else:
            absent.append(key)
    meta["replaced"] = replaced
    if absent:
        meta["absent"] = absent
    if first and original.get(ARCHIVE_KEY):
        meta[ARCHIVED_FIELD] = len(original[ARCHIVE_KEY])
    return {**new, META_KEY: meta}


# ---- restore

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
        restored += 1
    if not restored:
        return dump, 0, missing
    new = dict(dump)
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


def restore_tool_results(dump: dict) -> tuple[dict, int]:
    """Put back every placeholder whose original is stored; drop the store once empty.
    Returns the new dump and how many results were restored."""
    dump, restored, _ = _restore_tool_results(dump)
    return dump, restored


def restore_details(dump: Any) -> RestoreDetails:
    """Give back the conversation as it was before xcompact (and xun) compacted it, and say what
    could not be given back. A bare list of messages gives a list back."""
    if isinstance(dump, list):
        new, restored, missing = restore_details({"messages": dump})
        return RestoreDetails(new["messages"] if list(new) == ["messages"] else new, restored, missing)
    dump, rounds, rounds_left = _restore_summaries(dump)  # the tier-2 archive first, then the placeholders
    dump, restored, missing = _restore_tool_results(dump)
    meta = dump.get(META_KEY)
    if isinstance(meta, dict) and not dump.get(ARCHIVE_KEY):
        # everything is back: the bookkeeping goes, but for aliases some stored original still needs
        left = read_aliases(dump)
        dump = with_aliases({k: v for k, v in dump.items() if k != META_KEY}, left)
    return RestoreDetails(dump, restored + rounds, missing + rounds_left)


def restore_conversation(dump: Any) -> tuple[Any, int]:
    """Give back the conversation as it was before xcompact (and xun) compacted it.
    Returns (dump, how many tool results and summary rounds were put back)."""
    details = restore_details(dump)
    return details.dump, details.restored


# ---- what the model can still fetch

def summarised_away_ids(dump: dict) -> list[str]:
    """IDs of compacted tool results whose original is stored but whose placeholder is no
    longer in the messages (summarised away), in conversation order, each once."""
    originals = dump.get(ORIGINALS_KEY)
    if not originals:
        return []
    aliases = read_aliases(dump)
    ids: dict[str, None] = {}
    accounted: set[str] = set()
    for slot in tool_slots(dump):
        key = slot_key(slot, aliases)
        if slot.index is not None:  # still in the messages: its usual key is not an orphan
            accounted.add(originals_key(slot.cid, slot.occurrence))
            if key is not None:
                accounted.add(key)
            continue
        if key is not None and key in originals and (slot.message is None or slot.is_placeholder):
            ids[key] = None  # the key extract takes: the ID, or ID#k for a reused one
            accounted.add(key)
    alias_keys = {k for k in aliases.values() if k is not None}
    for key in originals:  # stored by xun for results its own summaries removed: the key is the ID
        if key not in accounted and key not in alias_keys:
            ids[key] = None
    return list(ids)


def away_tools(dump: dict) -> dict[str, str]:
    """Store key -> name of the tool whose call made the result (calls in the archive and the
    messages), for the compaction note."""
    names: dict[str, str] = {}
    heads = [m for e in dump.get(ARCHIVE_KEY) or () if isinstance(e, dict) for m in e.get("head") or ()]
    for m in heads + list(dump["messages"]):
        calls = m.get("tool_calls") if isinstance(m, dict) and m.get("role") == "assistant" else None
        for tc in calls if isinstance(calls, list) else ():
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(tc.get("id"), str) and isinstance(fn, dict) and isinstance(fn.get("name"), str):
                names[tc["id"]] = fn["name"]
    aliases = read_aliases(dump)
    out = {k: names[k] for k in dump.get(ORIGINALS_KEY) or () if k in names}
    for slot in tool_slots(dump):
        key = slot_key(slot, aliases)
        if key is not None and slot.cid in names:
            out[key] = names[slot.cid]
    return out


def find_stored(dump: dict, tool_call_id: str) -> list[tuple[int, str]]:
    """(occurrence, key) of every result with this ID whose original is stored and whose
    placeholder is where it was (or whose round was dropped), oldest first."""
    originals = dump.get(ORIGINALS_KEY) or {}
    aliases = read_aliases(dump)
    found = []
    for slot in tool_slots(dump):
        if slot.cid != tool_call_id:
            continue
        key = slot_key(slot, aliases)
        if key is not None and key in originals and (slot.message is None or slot.is_placeholder):
            found.append((slot.occurrence, key))
    return found
