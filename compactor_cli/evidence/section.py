"""The summary's ``## evidence`` section: its groups, rendered within a token budget (most
recent first, what an agent cannot re-derive before the files it read), read back from an
earlier round's summary, and merged with this round's evidence (anchored rounds)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Protocol


class Grouped(Protocol):
    """What the section reads of an ``extract.Evidence``: each group's items, oldest first."""

    def items(self, group: str) -> list[str]: ...

#: The groups of the section, in the order they are listed and (weighted) the order they are cut.
GROUPS = ("Files changed", "Error met", "Test run", "Command failed", "Files read", "Acted on")
INLINE = frozenset({"Files changed", "Files read", "Acted on"})  # one bullet, items joined by ", "
#: What an agent cannot cheaply re-derive, admitted before the files it read.
MUST = ("Files changed", "Error met", "Test run", "Command failed", "Acted on")
#: Items of each group admitted per round when the budget is short: files changed first.
SHARE = {"Files changed": 4, "Error met": 2, "Test run": 1, "Command failed": 1, "Files read": 2, "Acted on": 1}

CREATED = " (created)"
_DECODER = json.JSONDecoder()


def _inline(text: str) -> str:
    """An item as listed on a shared bullet: as it is, or as a JSON string when it holds the
    separator, a line break or a leading quote (a path "notes, draft.md"), so that it reads back
    whole."""
    if ", " in text or "\n" in text or "\r" in text or text.startswith('"'):
        return json.dumps(text, ensure_ascii=False)
    return text


def _split_inline(rest: str) -> list[str]:
    """The items of a shared bullet, as ``_inline`` listed them (a section written before items
    were quoted reads as it did: by the separator)."""
    items: list[str] = []
    at = 0
    while True:
        if rest.startswith('"', at):
            try:
                value, end = _DECODER.raw_decode(rest, at)
            except ValueError:
                value, end = None, at
            if isinstance(value, str) and (end == len(rest) or rest.startswith(", ", end)):
                items.append(value)
                if end == len(rest):
                    return items
                at = end + 2
                continue
        cut = rest.find(", ", at)
        if cut < 0:
            items.append(rest[at:])
            return items
        items.append(rest[at:cut])
        at = cut + 2


def render_evidence(groups: dict[str, list[str]], budget: int, count: Callable[[str], int]) -> str:
    """The section's body within ``budget`` tokens: each group's most recent items first, admitted
    round robin (``SHARE`` per round) until the budget is spent, the files read only after every
    other group (an agent re-reads a file cheaply; it cannot re-derive what it changed or met);
    listed most recent first."""
    queues = {g: list(reversed(groups.get(g) or [])) for g in GROUPS}
    chosen: dict[str, list[str]] = {g: [] for g in GROUPS}
    used = 0
    for admitted in (MUST, ("Files read",)):  # files read last: an agent re-reads a file cheaply
        used = _admit(queues, chosen, admitted, used, budget, count)
    body = _render(chosen)
    while body and count(body) > budget:  # merges across lines can differ from the estimate
        longest = max(GROUPS, key=lambda g: len(chosen[g]))
        chosen[longest].pop()
        body = _render(chosen)
    return body


def _admit(queues: dict[str, list[str]], chosen: dict[str, list[str]], admitted: tuple[str, ...], used: int,
           budget: int, count: Callable[[str], int]) -> int:
    """Admit the items of ``admitted`` groups round robin (SHARE per round) while they fit."""
    labels = {_shown(g, it)[0] for g in GROUPS for it in chosen[g]}
    while any(queues[g] for g in admitted):
        progressed = False
        for g in admitted:
            for _ in range(SHARE[g]):
                if not queues[g]:
                    break
                item = queues[g].pop(0)
                label, text = _shown(g, item)
                if g in INLINE:
                    text = _inline(text)
                cost = count(f"{text}, ") if label in labels and g in INLINE else count(f"- {label}: {text}\n")
                if used + cost > budget:
                    queues[g] = []  # this group is full: the rest of it is older
                    break
                chosen[g].append(item)
                labels.add(label)
                used += cost
                progressed = True
        if not progressed:
            break
    return used


def _shown(group: str, item: str) -> tuple[str, str]:
    """The bullet an item is listed under and its text there: files created get a bullet of their
    own instead of a "(created)" after each path (fewer tokens in a run that adds many files)."""
    if group == "Files changed" and item.endswith(CREATED):
        return "Files created", item[: -len(CREATED)]
    return group, item


def _render(chosen: dict[str, list[str]]) -> str:
    lines: list[str] = []
    for g in GROUPS:
        if not chosen[g]:
            continue
        if g in INLINE:
            bullets: dict[str, list[str]] = {}
            for item in chosen[g]:
                label, text = _shown(g, item)
                bullets.setdefault(label, []).append(_inline(text))
            lines.extend(f"- {label}: " + ", ".join(texts) for label, texts in bullets.items())
        else:
            lines.extend(f"- {g}: {item}" for item in chosen[g])
    return "\n".join(lines)


def parse_evidence(body: str) -> dict[str, list[str]]:
    """The groups of a rendered section (an earlier round's), oldest first as ``render_evidence`` takes them."""
    groups: dict[str, list[str]] = {g: [] for g in GROUPS}
    for line in body.splitlines():
        if not line.startswith("- "):
            continue
        label, sep, rest = line[2:].partition(": ")
        if sep and label == "Files created":  # listed apart, held as files changed "(created)"
            groups["Files changed"].extend(f"{path}{CREATED}" for path in _split_inline(rest))
            continue
        if not sep or label not in groups:
            continue
        items = _split_inline(rest) if label in INLINE else [rest]
        groups[label].extend(items)
    return {g: list(reversed(v)) for g, v in groups.items()}  # rendered most recent first


def item_key(group: str, item: str) -> str:
    """What two items of a group are about (a file's key is its path, whatever happened to it)."""
    if group in ("Files changed", "Files read"):
        return re.sub(r" \((?:created|deleted|moved to [^)]*)\)$", "", item)
    if group in ("Test run", "Command failed"):
        return item.split(" → ", 1)[0]
    return item


def merged_groups(new: Grouped, previous: dict[str, list[str]] | None) -> dict[str, list[str]]:
    """This round's items after the earlier round's (anchored rounds: an earlier item stays unless
    this round says something newer about the same thing)."""
    out: dict[str, list[str]] = {}
    for g in GROUPS:
        fresh = new.items(g)
        keys = {item_key(g, it) for it in fresh}
        if g == "Files read":
            keys |= {item_key("Files changed", it) for it in new.items("Files changed")}
        old = [it for it in (previous or {}).get(g, []) if item_key(g, it) not in keys]
        out[g] = old + fresh
    if previous:
        changed = {item_key("Files changed", it) for it in out["Files changed"]}
        out["Files read"] = [it for it in out["Files read"] if item_key("Files read", it) not in changed]
    return out
