"""Tier 2: replace the older part of a conversation by one structured summary.

The pure parts live here: choosing the cut, building the replacement, validating it before
it is committed (nagents' "validated and committed atomically"), and recording what was
replaced so ``restore`` gives the input back. Backends only turn a head into summary text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import BackendError
from ..evidence.harness import real_user_indices
from ..formats.rules import adjust_cut, agent_compactions, forced_user, task_message, verbatim_allowed
from ..model.checks import check_pairing
from ..model.conversation import ARCHIVE_KEY, COUNTER_KEY, ORIGINALS_KEY, content_text
from .options import DEFAULT_KEEP_RECENT
from .store import head_tool_counts, read_aliases, summarised_away_ids

__all__ = ["ARCHIVE_KEY", "COUNTER_KEY", "Cut", "NotSmallerError", "build_summarised", "choose_cut_point",
           "compaction_note", "head_tool_counts", "validate_replacement"]



class NotSmallerError(BackendError):
    """The summarised conversation would not be smaller than the input (a tiny head, say).
    Unlike a server failure, a smaller --keep-recent can succeed: compact retries on it."""

    kind = "not_smaller"


@dataclass(frozen=True)
class Cut:
    """How a conversation splits: ``system`` (index 0 or None), ``head`` indices to summarise,
    ``kept`` indices kept verbatim (chronological; may start with the task and a force-kept user
    message)."""

    system: int | None
    head: list[int]
    kept: list[int]
    forced_user: int | None
    task: int | None = None
    moved: tuple[int, ...] = ()  # the task, later user messages and the input's own compactions taken verbatim
    # from the head (chronological)


def choose_cut_point(messages: list[dict], keep_recent: int = DEFAULT_KEEP_RECENT, keep_task: bool = True,
                     user_tokens: int = 0, count: Callable[[dict], int] | None = None) -> Cut:
    """The tail is the last ``keep_recent`` messages after the system message; the cut moves
    earlier until the tail does not start with a tool result (an assistant message with
    tool_calls stays with all its results) and, for a native format, until it starts where that
    format allows (formats.adjust_cut); the last user message is force-kept when the tail would
    hold none (an Anthropic request: when the tail starts with an assistant message, see
    formats.forced_user). The task (the first user message that is the user speaking, not a
    harness's reminder) is kept too, first, so what was asked survives verbatim (``keep_task``),
    and the user's later messages of the head, the most recent first, while they fit in
    ``user_tokens`` (counted by ``count``), in their chronological places."""
    system = 0 if messages and messages[0].get("role") == "system" else None
    start = 1 if system == 0 else 0
    n = len(messages)
    cut = max(start, n - max(keep_recent, 0))
    while start < cut < n and messages[cut].get("role") == "tool":
        cut -= 1
    cut = adjust_cut(messages, cut, start)  # the record's format (formats/rules.py); OpenAI dumps: as is
    head = list(range(start, cut))
    kept = list(range(cut, n))
    forced = forced_user(messages, head, kept)  # OpenAI dumps: the head's last user message if kept has none
    if forced is not None:
        head.remove(forced)
        kept.insert(0, forced)
    task = task_message(messages, head, kept) if keep_task else None  # the user's request, verbatim
    moved = [task] if task is not None else []
    # encrypted earlier context, which no summary can read; before a force-kept user message only,
    # which the kept part starts with (what is taken from the head stays in its order: kept_at)
    moved += [i for i in agent_compactions(messages, head, kept) if forced is None or i < forced]
    if user_tokens > 0 and count is not None and verbatim_allowed(messages, head, kept):
        room = user_tokens
        for i in reversed(real_user_indices(messages)):  # the user's own words, the latest first
            if i in head and i != task:
                n = count(messages[i])
                if n <= room:
                    moved.append(i)
                    room -= n
    if len(moved) >= len(head):  # (a head of nothing but the user's words stays a head: nothing else to condense)
        moved, task = [], None
    moved.sort()
    for i in moved:
        head.remove(i)
    kept = moved + kept
    return Cut(system, head, kept, forced, task, tuple(moved))


#: Most tokens the list of summarised-away IDs may take in the compaction note (about 4 characters
#: a token); past it the IDs are grouped by tool and the rest counted, never listed one by one.
NOTE_ID_CHARS = 600


def compaction_note(summarised: int, kept: int, round_no: int, away_ids: list[str] | tuple[str, ...] = (),
                    tools: dict[str, str] | None = None) -> str:
    """The note after the summary. ``away_ids``: keys of compacted tool results whose placeholders
    were summarised away but whose originals are stored (nothing else in the conversation names
    them any more). Listed with their tool's name while they fit NOTE_ID_CHARS; past that, the
    first two and the last of each tool's are named and the others counted, so the note stays
    small beside the summary on long agent runs (its tokens count in the summary's budget)."""
    note = (f"[Compaction note: the {summarised} earlier messages of this conversation were summarised above "
            f"(summary round {round_no}). The {kept} most recent messages follow verbatim. Compacted tool results "
            "can be fetched with extract_compacted_tool_result and their ID.")
    if away_ids:
        note += (" Compacted tool results summarised away: " + _id_list(list(away_ids), tools or {})
                 + " (fetch with extract_compacted_tool_result).")
    return note + "]"


def _id_list(ids: list[str], tools: dict[str, str]) -> str:
    """``ID (tool), ...`` when short enough; else per tool: ``tool: first, ..., last (N in all)``."""
    plain = ", ".join(f"{i} ({tools[i]})" if i in tools else i for i in ids)
    if len(plain) <= NOTE_ID_CHARS:
        return plain
    groups: dict[str, list[str]] = {}
    for i in ids:
        groups.setdefault(tools.get(i, "tool"), []).append(i)
    parts = []
    for name, members in groups.items():
        if len(members) <= 3:
            parts.append(f"{name}: " + ", ".join(members))
        else:
            parts.append(f"{name}: {members[0]}, {members[1]} ... {members[-1]} ({len(members)} in all)")
    text = "; ".join(parts)
    if len(text) > NOTE_ID_CHARS:  # many tools: name the first few groups, count the rest
        shown, used = [], 0
        for part in parts:
            if used + len(part) > NOTE_ID_CHARS - 60:
                break
            shown.append(part)
            used += len(part) + 2
        rest = len(ids) - sum(len(groups[p.split(":", 1)[0]]) for p in shown)
        text = "; ".join(shown) + f"; and {rest} more"
    return f"{len(ids)} results ({text})"


def away_tool_names(dump: dict) -> dict[str, str]:
    """Store key -> tool name, for the compaction note (from the calls in messages and archive)."""
    from .store import away_tools

    return away_tools(dump)


def build_summarised(dump: dict, cut: Cut, summary: str, preserve_system: bool = True,
                     keep_originals: bool = True) -> dict:
    """The new dump: the system message keeps its text verbatim (``preserve_system``, the default;
    else xun's literal replacement) with the summary and the compaction note after it; kept
    messages verbatim; tokens_used cleared; summary round counter + 1 (tool-round counter back to
    0); the replaced messages archived for restore unless ``keep_originals`` is False — then, if
    the dump holds originals or an archive, a small entry keeps the IDs of the summarised tool
    results (so the numbering of stored originals goes on) and tells restore to stop there."""
    new = summarised_without_system(dump, cut, keep_originals)
    text = summary + "\n\n" + _note_of(new, cut)
    rounds_before = new[COUNTER_KEY]["summary_rounds"] - 1
    new["messages"] = [system_message(dump["messages"], cut, text, preserve_system, rounds_before)] + new["messages"]
    return new


def summary_note(dump: dict, cut: Cut, keep_originals: bool = True) -> str:
    """The compaction note a summary of this cut gets (known before the summary is written)."""
    return _note_of(summarised_without_system(dump, cut, keep_originals), cut)


def _note_of(new: dict, cut: Cut) -> str:
    """The compaction note of ``new`` (the dump without its system message yet)."""
    return compaction_note(len(cut.head), len(cut.kept), new[COUNTER_KEY]["summary_rounds"],
                           summarised_away_ids(new), away_tool_names(new))


def summarised_without_system(dump: dict, cut: Cut, keep_originals: bool = True) -> dict:
    """Everything of the new dump but its system message: counters, archive, the kept messages."""
    messages = dump["messages"]
    counter = dict(dump.get(COUNTER_KEY) or {})
    round_no = int(counter.get("summary_rounds") or 0) + 1
    new = dict(dump)
    new["tokens_used"] = None
    counter["summary_rounds"] = round_no
    counter["toolcall_rounds"] = 0
    new[COUNTER_KEY] = counter
    head = [messages[i] for i in cut.head]
    if keep_originals:
        entry = {
            "round": round_no,
            "system": messages[cut.system] if cut.system is not None else None,
            "head": head,
            "forced_user_at": None if cut.moved else _forced_position(cut),
            **({"kept_at": _kept_positions(cut)} if cut.moved else {}),
            "replaced_keys": {k: dump[k] for k in ("tokens_used", COUNTER_KEY) if k in dump},
        }
        new[ARCHIVE_KEY] = list(dump.get(ARCHIVE_KEY) or []) + [entry]
    elif dump.get(ORIGINALS_KEY) or dump.get(ARCHIVE_KEY) or read_aliases(dump):
        ids = [m["tool_call_id"] for m in head if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str)]
        new[ARCHIVE_KEY] = list(dump.get(ARCHIVE_KEY) or []) + [{"round": round_no, "dropped": True,
                                                                 "tool_call_ids": ids}]
    new["messages"] = [messages[i] for i in cut.kept]  # what summarised_away_ids looks at
    return new


def system_message(messages: list[dict], cut: Cut, text: str, preserve_system: bool,
                   rounds_before: int = 0) -> dict:
    """The summary's system message. Preserved, the original system message stays as it was
    (its other keys, its text or parts verbatim) with ``text`` after it: appended to a string,
    or as one more text part of a list. After an earlier round, the earlier summary is replaced,
    not kept: the system prompt above it is what stays."""
    original = messages[cut.system] if cut.system is not None else None
    if not preserve_system or original is None:
        return {"role": "system", "content": text}
    content, _ = split_system(original.get("content"), rounds_before)
    if _written_back_from_memory(original):
        # a native item its format writes back as it was read (a Responses developer item): the
        # prompt's text goes first in the summary's own message, which the format writes anew
        prompt = content_text(content)
        return {"role": "system", "content": prompt + "\n\n" + text if prompt else text}
    if isinstance(content, str) and content:
        return {**original, "content": content + "\n\n" + text}
    if isinstance(content, list) and content:
        return {**original, "content": [*content, {"type": _text_part_type(content), "text": text}]}
    return {**original, "content": text}


def _written_back_from_memory(message: dict) -> bool:
    """The message carries a native item that its format writes back verbatim, not its content."""
    from ..formats.base import MSG_KEY, jload

    raw = message.get(MSG_KEY)
    if not isinstance(raw, str):
        return False
    try:
        memo = jload(raw)
    except ValueError:
        return False
    return isinstance(memo, dict) and ("items" in memo or "item" in memo)


def _text_part_type(parts: list) -> str:
    """The type the prompt's own text parts have (``text``; ``input_text`` in a Responses item)."""
    for part in reversed(parts):
        if isinstance(part, dict) and isinstance(part.get("text"), str) and isinstance(part.get("type"), str):
            return part["type"]
    return "text"


_SUMMARY_START = "## " + "system_context\n"


def split_system(content: Any, rounds_before: int) -> tuple[Any, str]:
    """(the system prompt, the earlier summary with its note) of a system message. Before any
    summary round the whole content is the prompt; after one, the summary xcompact appended
    (the last text starting with the first section's heading) is split off."""
    if rounds_before <= 0:
        return content, ""
    if isinstance(content, str):
        at = content.rfind(_SUMMARY_START)
        if at == 0:
            return "", content
        if at > 0 and content[at - 2:at] == "\n\n":
            return content[:at - 2], content[at:]
    elif isinstance(content, list) and content:
        last = content[-1]
        if isinstance(last, dict) and isinstance(last.get("text"), str) and last["text"].startswith(_SUMMARY_START):
            return content[:-1], last["text"]
    return content, ""


def _kept_positions(cut: Cut) -> list[int]:
    """Where the messages the cut took from the head (the task, later user messages, a force-kept
    one: the first ones of the kept part, in order) sat in the head as it was."""
    taken = [*cut.moved, *([cut.forced_user] if cut.forced_user is not None else [])]
    full = sorted([*cut.head, *taken])
    return [full.index(i) for i in taken]


def _forced_position(cut: Cut) -> int | None:
    """Where the force-kept user message sat among the head messages."""
    if cut.forced_user is None:
        return None
    return sum(1 for i in cut.head if i < cut.forced_user)


def validate_replacement(old: dict, new: dict) -> None:
    """Refuse a replacement that breaks what the old conversation had: tool pairing (parallel
    calls included) no worse than before, a user message still present."""
    before = {p.message for p in check_pairing(old["messages"]) if "used again" not in p.message}
    after = [p.message for p in check_pairing(new["messages"]) if "used again" not in p.message]
    broken = [m for m in after if m not in before]
    if broken:
        raise BackendError(f"the replacement would break tool pairing: {broken[0]}")
    had_user = any(m.get("role") == "user" for m in old["messages"])
    if had_user and not any(m.get("role") == "user" for m in new["messages"]):
        raise BackendError("the replacement has no user message")
