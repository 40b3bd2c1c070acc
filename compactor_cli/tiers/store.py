"""The originals store that tiers 1 and 2 write and restore and extract read: the keys, the
tier-2 archive and the bookkeeping that make an exact restore possible.

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
     "kept_at": [<where each message the cut kept verbatim from the head sat in the head as it was:
                 the task, later user messages, the force-kept one; the first ones of the kept part,
                 in order; then forced_user_at is null>],   # absent when none was
     "replaced_keys": {"tokens_used": ..., "compaction_counter": ...}}   # their values before

A round summarised with ``--originals drop`` while the dump holds originals or an archive leaves
``{"round": n, "dropped": true, "tool_call_ids": [...]}``: the messages are gone, but the tool
results keep their numbering and restore knows it cannot go back past that round.

**The rest of** ``xcompact``: ``replaced`` / ``absent`` record the input's ``tokens_used``
and ``compaction_counter`` before compact changed them, and ``archived_rounds`` how many summary
rounds the input had archived then (``remember``); ``empty_store: true`` says the input had an
empty ``compacted_tool_results`` (restore gives ``{}`` back instead of removing the key);
``input_form`` is the pipeline's (a bare list became an object).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..model.conversation import (
    ALIASES_FIELD,
    ARCHIVE_KEY,
    ARCHIVED_FIELD,
    META_KEY,
    ORIGINALS_KEY,
    REPLACED_KEYS,
    TEMPLATED_FIELD,
    TEMPLATES_FIELD,
    placeholder_for,
)
from ..model.placeholders import PlaceholderTemplate, template
from ..model.placeholders import input_placeholder as input_placeholder
from ..model.placeholders import is_input_placeholder as is_input_placeholder

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
    ``index`` is its position in ``dump["messages"]`` (None when archived); ``template``: the
    template of the user's own it was cleared with (``xcompact.templated_results``), if any."""

    cid: str
    occurrence: int
    message: dict | None
    index: int | None
    template: PlaceholderTemplate | None = None

    @property
    def is_placeholder(self) -> bool:
        return self.message is not None and is_placeholder_of(self.message.get("content"), self.cid, self.template)


def templated_results(dump: dict) -> dict[tuple[str, int], str]:
    """``(ID, occurrence) -> template text`` of the results cleared with a placeholder template
    of the user's own (``--placeholder``). Only these are read as such placeholders: a real
    result whose text merely looks like one is never taken for one. Malformed entries are
    refused earlier, by checks.check_owned_keys."""
    meta = dump.get(META_KEY)
    if not isinstance(meta, dict) or not meta.get(TEMPLATED_FIELD):
        return {}
    texts = meta.get(TEMPLATES_FIELD) or []
    return {(e["id"], e["occurrence"]): texts[e["template"]] for e in meta[TEMPLATED_FIELD]}


def with_meta(dump: dict, meta: dict) -> dict:
    """The dump with ``xcompact`` set to ``meta``, or without ``xcompact`` when it is empty. Returns a new dict."""
    new = dict(dump)
    if meta:
        new[META_KEY] = meta
    else:
        new.pop(META_KEY, None)
    return new


def with_templated(dump: dict, results: dict[tuple[str, int], str]) -> dict:
    """The dump recording ``results`` (as templated_results reads them; both fields removed
    when empty, and an ``xcompact`` left empty too). Returns a new dict."""
    meta = dict(dump.get(META_KEY) or {})
    meta.pop(TEMPLATES_FIELD, None)
    meta.pop(TEMPLATED_FIELD, None)
    if results:
        texts = list(dict.fromkeys(results.values()))
        index = {t: j for j, t in enumerate(texts)}
        meta[TEMPLATES_FIELD] = texts
        meta[TEMPLATED_FIELD] = [{"id": cid, "occurrence": k, "template": index[t]} for (cid, k), t in results.items()]
    return with_meta(dump, meta)


def is_placeholder_of(content: Any, cid: str, template: PlaceholderTemplate | None = None) -> bool:
    """``content`` is the placeholder naming this ID or one of its store keys (``ID#k``, an alias
    ``ID#k~n``: what a reused ID's placeholder names): xun's, or ``template``'s (the one this
    result was cleared with)."""
    if not isinstance(content, str):
        return False
    if content.startswith(_PH_HEAD) and content.endswith(_PH_TAIL):
        named = content[len(_PH_HEAD):len(content) - len(_PH_TAIL)]
        if named == cid or (len(named) > len(cid) + 1 and named.startswith(cid) and named[len(cid)] in "#~"
                            and content == placeholder_for(named)):
            return True
    return template is not None and template.names(content, cid)


def answered_calls(messages: list[dict]) -> dict[int, tuple[int, int]]:
    """Index of each tool result -> (message index, position in its tool_calls) of the call it
    answers: the latest call with its ID before it."""
    latest: dict[str, tuple[int, int]] = {}
    out: dict[int, tuple[int, int]] = {}
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant":
            for j, call in enumerate(m.get("tool_calls") or ()):
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    latest[call["id"]] = (i, j)
        elif role == "tool" and isinstance(m.get("tool_call_id"), str) and m["tool_call_id"] in latest:
            out[i] = latest[m["tool_call_id"]]
    return out


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
    templated = templated_results(dump)
    for cid, m in _archived(dump):
        seen[cid] = seen.get(cid, 0) + 1
        if archived:
            t = templated.get((cid, seen[cid])) if templated else None
            slots.append(ToolSlot(cid, seen[cid], m, None, template(t) if t is not None else None))
    for i, m in enumerate(dump["messages"]):
        if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            cid = m["tool_call_id"]
            seen[cid] = seen.get(cid, 0) + 1
            t = templated.get((cid, seen[cid])) if templated else None
            slots.append(ToolSlot(cid, seen[cid], m, i, template(t) if t is not None else None))
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
    return with_meta(dump, meta)


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
