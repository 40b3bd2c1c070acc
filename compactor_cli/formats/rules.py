"""Where the tier-2 cut may fall, per format: two functions the cut calls.

``summarize.choose_cut_point`` puts the cut ``keep_recent`` messages from the end and moves it
earlier past tool results. ``adjust_cut`` then moves it earlier again until the kept messages
start where the record's own format allows, and ``forced_user`` says which user message of the
head is kept first (for OpenAI dumps exactly as before: the last one, when the kept part holds
none):

- OpenAI dumps (no native memory on the messages): unchanged, as today.
- Anthropic: the kept part starts with a user message that holds no tool results (the first
  internal part of a native user message), or with an assistant message, and then the last
  such user message of the head is force-kept first (``forced_user``; a long tool loop can be
  cut between any two of its turns): the written request starts with a user message, keeps
  alternating and every tool_use stays with its tool_result.
- Responses: the kept part does not start with a tool output, and no output it keeps answers a
  call it does not keep (outputs need not follow their call directly in Responses input).
  Reasoning items travel inside the message of the item they precede, so they always follow it.

For every format: a kept tool result whose call would be summarised away moves the cut to that
call. A cut that reaches the start leaves nothing to summarise (NOTHING_TO_CONDENSE). With
``--keep-recent 0`` an Anthropic conversation keeps at least its last message.
"""

from __future__ import annotations

from typing import Any

from ..evidence.harness import harness_keys, real_user_indices, task_index
from .base import MSG_KEY, jload


def _format_of(m: Any) -> str | None:
    raw = m.get(MSG_KEY) if isinstance(m, dict) else None
    if isinstance(raw, str) and raw.startswith('{"f":"'):
        return raw[6:raw.index('"', 6)]
    return None


def _orphaned(messages: list[dict], cut: int, start: int) -> int | None:
    """The index of the earliest head message whose call a kept tool result answers, or None."""
    calls: dict[str, int] = {}
    for i in range(start, cut):
        for call in messages[i].get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                calls[call["id"]] = i
    found = None
    for m in messages[cut:]:
        if m.get("role") == "tool" and m.get("tool_call_id") in calls:
            i = calls[m["tool_call_id"]]
            found = i if found is None else min(found, i)
    return found


def _anthropic_start(m: dict) -> bool:
    """A user message that starts its native message and holds no tool results."""
    if m.get("role") != "user":
        return False
    memo = jload(m[MSG_KEY])
    return "m" in memo or memo.get("k") == 0


def _anthropic_ok(messages: list[dict], cut: int, start: int) -> bool:
    """Can the kept part start at ``cut`` in an Anthropic conversation? With a user message that
    starts its native message and holds no tool results; or with an assistant message when the
    head has such a user message, which the cut then force-keeps first (forced_user), so the
    request still starts with a user message and alternates."""
    m = messages[cut]
    if m.get("role") == "user":
        return _anthropic_start(m)
    if m.get("role") != "assistant":
        return False
    return any(messages[j].get("role") == "user" and _anthropic_start(messages[j]) for j in range(start, cut))


def adjust_cut(messages: list[dict], cut: int, start: int = 0) -> int:
    """The cut moved earlier (never later) until the kept part starts where the format allows."""
    n = len(messages)
    if not start < cut <= n:
        return cut
    fmt = _format_of(messages[cut] if cut < n else messages[n - 1])
    if fmt is None or fmt == "openai-function":
        return cut
    if cut == n:
        if fmt != "anthropic":
            return cut  # nothing kept: the force-kept user message is a whole item
        cut -= 1  # Anthropic: keep at least the last message, so the force-kept one is whole
    while start < cut:
        m = messages[cut]
        if m.get("role") == "tool" or (fmt == "anthropic" and not _anthropic_ok(messages, cut, start)):
            cut -= 1
            continue
        back = _orphaned(messages, cut, start)
        if back is None:
            break
        cut = back
    return cut


def forced_user(messages: list[dict], head: list[int], kept: list[int]) -> int | None:
    """The head's user message to keep first, or None. As always for OpenAI dumps (and
    Responses): the last user message of the head when the kept part holds none. Anthropic: the
    last user message of the head that starts its native message and holds no tool results,
    when the kept part starts with an assistant message (adjust_cut made sure there is one)."""
    if not head:
        return None
    if kept and _format_of(messages[kept[0]]) == "anthropic":
        if messages[kept[0]].get("role") == "user":
            return None
        users = [i for i in head if messages[i].get("role") == "user" and _anthropic_start(messages[i])]
        return users[-1] if users else None
    # a harness's repeated reminders are not the user speaking: they never count as the last user
    # message ("Please always provide EXACTLY ONE action" in every other mini-swe-agent turn)
    keys = harness_keys(messages)
    real = set(real_user_indices(messages, keys))
    if any(i in real for i in kept):
        return None
    users = [i for i in head if i in real]
    if users:
        return users[-1]
    if any(messages[i].get("role") == "user" for i in kept):
        return None  # only a harness speaks: its message in the kept part is enough for a server
    users = [i for i in head if messages[i].get("role") == "user"]
    return users[-1] if users else None


def verbatim_allowed(messages: list[dict], head: list[int], kept: list[int]) -> bool:
    """May user messages of the head be kept verbatim before the kept part? Not in an Anthropic
    request, whose kept part must alternate from its first message."""
    return bool(head) and not any(_format_of(messages[i]) == "anthropic" for i in (head[0], *kept[:1]))


def task_message(messages: list[dict], head: list[int], kept: list[int]) -> int | None:
    """The task (the first user message that is the user speaking) when the head holds it: it is
    kept verbatim, first after the system message, so what was asked survives every round. Not
    for Anthropic requests (whose kept part must alternate from its first message)."""
    if not verbatim_allowed(messages, head, kept):
        return None
    task = task_index(messages)
    return task if task is not None and task in head else None


#: Responses items that are a compaction the agent (or OpenAI's server) already made: encrypted,
#: they are the earlier context itself, which a summary cannot read.
COMPACTION_ITEMS = frozenset({"compaction", "compaction_summary"})


def agent_compactions(messages: list[dict], head: list[int], kept: list[int]) -> list[int]:
    """The head's messages that carry a compaction already in the input (Responses ``compaction``
    items): kept verbatim, in their places, so a summary never replaces the earlier context they
    hold. Not for Anthropic requests (their kept part must alternate)."""
    if not verbatim_allowed(messages, head, kept):
        return []
    out = []
    for i in head:
        raw = messages[i].get(MSG_KEY)
        if isinstance(raw, str) and raw.startswith('{"f":"responses"') and '"compaction' in raw:
            memo = jload(raw)
            items = memo.get("items") if isinstance(memo, dict) else None
            if isinstance(items, list) and any(isinstance(it, dict) and it.get("type") in COMPACTION_ITEMS
                                               for it in items):
                out.append(i)
    return out
