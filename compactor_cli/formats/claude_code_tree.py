"""The shape of a Claude Code session as a tree of events (``uuid``/``parentUuid``): which
branch the session continued on after a rewind (an edited prompt, a regenerated reply).

A rewind leaves two *turns* under one parent; the branch kept is the ancestry of the last
dialogue event (across a ``compact_boundary``, whose ``parentUuid`` is null, through its
``logicalParentUuid``). Parallel tool calls (the next block of the same message, its tool
results) are not turns, so they never look like a rewind.
"""

from __future__ import annotations

from typing import Any, cast


def _parent(e: dict) -> Any:
    """The event before ``e`` in its conversation (across a compact_boundary, whose parentUuid
    is null, through its logicalParentUuid)."""
    p = e.get("parentUuid")
    return p if isinstance(p, str) else e.get("logicalParentUuid") if isinstance(e.get("logicalParentUuid"), str) \
        else None


def _turn_key(e: dict, parent: dict | None) -> Any:
    """What makes a child event a new turn (so two of them under one parent are a rewind): a
    user prompt (not only tool results), or an assistant message other than its parent's. Parallel
    tool calls (the next block of the same message, a tool result) are not turns."""
    msg = cast(dict, e.get("message")) if isinstance(e.get("message"), dict) else {}
    if e.get("type") == "user":
        content = msg.get("content")
        if isinstance(content, list) and content and all(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return None
        return ("user", e.get("uuid"))
    mid = msg.get("id")
    pmid = (parent.get("message") or {}).get("id") if isinstance(parent, dict) and \
        isinstance(parent.get("message"), dict) else None
    if mid is not None and mid == pmid:
        return None
    return ("assistant", mid if isinstance(mid, str) else e.get("uuid"))


def is_boundary(e: Any) -> bool:
    """A ``compact_boundary`` event (Claude Code's own compaction)."""
    return isinstance(e, dict) and e.get("type") == "system" and e.get("subtype") == "compact_boundary"


def rewound_branches(events: list[tuple[int, Any]]) -> tuple[set[int], list[dict]]:
    """Indexes of the dialogue events and compact_boundary events on branches the session left
    (a prompt edited or a reply regenerated: two turns under one parent; a compaction is a turn
    too), and one note per branch. The branch kept is the one the session continued on: the
    ancestry of its last dialogue event."""
    by_uuid: dict[str, int] = {}
    for i, (_, e) in enumerate(events):
        if isinstance(e, dict) and isinstance(e.get("uuid"), str):
            by_uuid.setdefault(e["uuid"], i)
    dialogue = [i for i, (_, e) in enumerate(events) if isinstance(e, dict) and e.get("type") in ("user", "assistant")
                and not e.get("isSidechain")]
    # a compact_boundary belongs to the branch it was written on: one on a branch the session
    # left must not cut the live branch (the readers skip the boundaries returned here)
    boundaries = [i for i, (_, e) in enumerate(events) if is_boundary(e) and not e.get("isSidechain")]
    members, is_cut = sorted(dialogue + boundaries), set(boundaries)
    turns: dict[str, dict[Any, int]] = {}
    for i in members:
        e = events[i][1]
        if i in is_cut:  # a turn of its own under the event it followed (logicalParentUuid)
            p, key = _parent(e), ("boundary", e.get("uuid"))
        else:
            p = e.get("parentUuid")
            if not isinstance(p, str):
                continue
            key = _turn_key(e, events[by_uuid[p]][1] if p in by_uuid else None)
        if isinstance(p, str) and key is not None:
            turns.setdefault(p, {}).setdefault(key, i)
    forks = {p: kids for p, kids in turns.items() if len(kids) > 1}
    if not forks or not dialogue:
        return set(), []
    chain: set[int] = set()
    cur: int | None = dialogue[-1]
    while cur is not None and cur not in chain:
        chain.add(cur)
        p = _parent(events[cur][1])
        cur = by_uuid.get(p) if p is not None else None
    # only where the kept branch passes the fork can the other children be told apart from it
    roots = {i for p, kids in forks.items() if by_uuid.get(p) in chain for i in kids.values() if i not in chain}
    if not roots:
        return set(), []
    dropped: set[int] = set()
    memo: dict[int, int | None] = {}

    def root_of(i: int) -> int | None:
        seen = []
        cur2: int | None = i
        found: int | None = None
        while cur2 is not None:
            if cur2 in memo:
                found = memo[cur2]
                break
            seen.append(cur2)
            if cur2 in roots:
                found = cur2
                break
            if cur2 in chain:
                break
            p = _parent(events[cur2][1])
            cur2 = by_uuid.get(p) if p is not None else None
            if cur2 in seen:
                break
        for k in seen:
            memo[k] = found
        return found

    sizes: dict[int, int] = {}
    for i in members:
        r = root_of(i)
        if r is not None:
            dropped.add(i)
            sizes[r] = sizes.get(r, 0) + 1
    branches = [{"line": events[r][0], "events": n} for r, n in sorted(sizes.items())]
    return dropped, branches


#: Key of ``source`` carrying the messages before the last compact_boundary.
BEFORE_KEY = "before_compaction"


def _is_results(m: dict) -> bool:
    """A message of tool results (OpenAI ``tool``, or an Anthropic user message of results)."""
    content = m.get("content")
    return m.get("role") == "tool" or (m.get("role") == "user" and isinstance(content, list) and bool(content)
                                       and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content))


def split_at_boundary(dump: dict, notes: list[str]) -> None:
    """Start the conversation at the last compact_boundary (what the model had after Claude
    Code's own compaction); the messages before it go, unchanged, to
    ``source.before_compaction`` so nothing is lost and restore gives them back. A result the
    reader added for a call left open at the boundary stays with its call."""
    src = dump["source"]
    boundaries = src.get("compact_boundaries") or []
    if not boundaries:
        return
    cut = boundaries[-1]["before_message"]
    msgs, lines = dump["messages"], src["lines"]
    while cut < len(msgs) and _is_results(msgs[cut]):
        cut += 1
    if cut <= 0 or cut >= len(msgs):
        return
    src[BEFORE_KEY] = {"messages": msgs[:cut], "lines": lines[:cut], "boundary_line": boundaries[-1]["line"]}
    dump["messages"], src["lines"] = msgs[cut:], lines[cut:]
    for b in boundaries:
        b["before_message"] -= cut
    note = (f"{cut} messages before the last compact_boundary (line {boundaries[-1]['line']}) carried in "
            f"source.{BEFORE_KEY}, not in the conversation (restore puts them back; "
            "--claude-code-history full reads them)")
    notes.append(note)
    src.setdefault("notes", notes)


def give_back_before_compaction(dump: Any) -> tuple[Any, int]:
    """restore: the messages carried before the last compact_boundary go back in front.
    Returns (dump, messages given back)."""
    src = dump.get("source") if isinstance(dump, dict) else None
    before = src.get(BEFORE_KEY) if isinstance(src, dict) else None
    if not isinstance(before, dict) or not isinstance(before.get("messages"), list):
        return dump, 0
    src = {k: v for k, v in cast(dict, src).items() if k != BEFORE_KEY}  # a dict: ``before`` is one of its values
    if isinstance(src.get("notes"), list):
        src["notes"] = [n for n in src["notes"] if not (isinstance(n, str) and f"source.{BEFORE_KEY}" in n)]
        if not src["notes"]:
            del src["notes"]
    if isinstance(src.get("lines"), list) and isinstance(before.get("lines"), list):
        src["lines"] = before["lines"] + src["lines"]
    for b in src.get("compact_boundaries") or ():
        if isinstance(b, dict) and isinstance(b.get("before_message"), int):
            b["before_message"] += len(before["messages"])
    return {**dump, "messages": before["messages"] + dump["messages"], "source": src}, len(before["messages"])
