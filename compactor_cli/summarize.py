"""Tier 2: replace the older part of a conversation by one structured summary.

The pure parts live here: choosing the cut, building the replacement, validating it before
it is committed (nagents' "validated and committed atomically"), and recording what was
replaced so ``restore`` gives the input back. Backends only turn a head into summary text.
"""

from __future__ import annotations

from dataclasses import dataclass

from .conversation import ARCHIVE_KEY, COUNTER_KEY, ORIGINALS_KEY, check_pairing, content_text
from .errors import BackendError
from .formats.rules import adjust_cut, forced_user
from .restore import head_tool_counts, read_aliases, summarised_away_ids

__all__ = ["ARCHIVE_KEY", "COUNTER_KEY", "Cut", "NotSmallerError", "build_summarised", "choose_cut_point",
           "compaction_note", "head_tool_counts", "validate_replacement"]

DEFAULT_KEEP_RECENT = 16  # xun's summary_keep_max
DEFAULT_MAX_SUMMARY_TOKENS = 1024


class NotSmallerError(BackendError):
    """The summarised conversation would not be smaller than the input (a tiny head, say).
    Unlike a server failure, a smaller --keep-recent can succeed: compact retries on it."""

    kind = "not_smaller"


@dataclass(frozen=True)
class Cut:
    """How a conversation splits: ``system`` (index 0 or None), ``head`` indices to summarise,
    ``kept`` indices kept verbatim (chronological; may start with a force-kept user message)."""

    system: int | None
    head: list[int]
    kept: list[int]
    forced_user: int | None


def choose_cut_point(messages: list[dict], keep_recent: int = DEFAULT_KEEP_RECENT) -> Cut:
    """The tail is the last ``keep_recent`` messages after the system message; the cut moves
    earlier until the tail does not start with a tool result (an assistant message with
    tool_calls stays with all its results) and, for a native format, until it starts where that
    format allows (formats.adjust_cut); the last user message is force-kept when the tail would
    hold none (an Anthropic request: when the tail starts with an assistant message, see
    formats.forced_user)."""
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
    return Cut(system, head, kept, forced)


def compaction_note(summarised: int, kept: int, round_no: int, away_ids: list[str] | tuple[str, ...] = ()) -> str:
    """The note after the summary. ``away_ids``: IDs of compacted tool results whose placeholders
    were summarised away but whose originals are stored — listed all, since nothing else in the
    conversation names them any more."""
    note = (f"[Compaction note: the {summarised} earlier messages of this conversation were summarised above "
            f"(summary round {round_no}). The {kept} most recent messages follow verbatim. Compacted tool results "
            "can be fetched with extract_compacted_tool_result and their ID.")
    if away_ids:
        note += (" Compacted tool results summarised away: " + ", ".join(away_ids)
                 + " (fetch with extract_compacted_tool_result).")
    return note + "]"


def build_summarised(dump: dict, cut: Cut, summary: str, preserve_system: bool = False,
                     keep_originals: bool = True) -> dict:
    """The new dump: system message = [original system text +] summary + note; kept messages
    verbatim; tokens_used cleared; summary round counter + 1 (tool-round counter back to 0);
    the replaced messages archived for restore unless ``keep_originals`` is False — then, if the
    dump holds originals or an archive, a small entry keeps the IDs of the summarised tool
    results (so the numbering of stored originals goes on) and tells restore to stop there."""
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
            "forced_user_at": _forced_position(cut),
            "replaced_keys": {k: dump[k] for k in ("tokens_used", COUNTER_KEY) if k in dump},
        }
        new[ARCHIVE_KEY] = list(dump.get(ARCHIVE_KEY) or []) + [entry]
    elif dump.get(ORIGINALS_KEY) or dump.get(ARCHIVE_KEY) or read_aliases(dump):
        ids = [m["tool_call_id"] for m in head if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str)]
        new[ARCHIVE_KEY] = list(dump.get(ARCHIVE_KEY) or []) + [{"round": round_no, "dropped": True,
                                                                 "tool_call_ids": ids}]
    kept = [messages[i] for i in cut.kept]
    new["messages"] = kept  # what summarised_away_ids looks at: the archive, the store, these
    away = summarised_away_ids(new)
    parts = []
    if preserve_system and cut.system is not None:
        parts.append(content_text(messages[cut.system].get("content")))
    parts.append(summary)
    parts.append(compaction_note(len(cut.head), len(cut.kept), round_no, away))
    system_msg = {"role": "system", "content": "\n\n".join(p for p in parts if p)}
    new["messages"] = [system_msg] + kept
    return new


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
