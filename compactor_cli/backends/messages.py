"""What the offline summariser reads of each message of a head: its plain text (who speaks,
its tool calls, a harness's reminders and format markers set apart) and its sentences; and the
line of a section made from them (``Item``, ``clip``, ``dedupe_key``, ``plain_text``). The facts
read out of these messages are ``facts.py``'s."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

from ..evidence.harness import harness_keys, is_harness, without_injected
from ..model.conversation import call_parts, content_text

SCAN_CHARS = 20_000  # per message: the first and last SCAN_CHARS characters are read
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")

_SPEAKER = re.compile(r"^(?:user asked|user|assistant(?: called)?|tool [\w.:-]+|latest request)\s*:\s*", re.I)
_MARKER = re.compile(r"^(?:THOUGHT:|DISCUSSION\b:?)\s*", re.M)
_FENCED = re.compile(r"```[^\n]*\n.*?(?:```|\Z)", re.S)
LIST_MARKUP = re.compile(r"^(?:#{1,6}\s+|[-*+•]\s+|\d+[.)]\s+|>\s*|`{3,}\w*\s*)+")


@dataclass
class Item:
    """One line of a section: its text, where it comes from (for conversation order) and a rank
    score (higher is admitted first)."""

    text: str
    pos: tuple[int, int]  # (round: 0 for an earlier summary, 1 for this head; index in it)
    score: float


def _scan(text: str) -> str:
    if len(text) <= 2 * SCAN_CHARS:
        return text
    return text[:SCAN_CHARS] + "\n" + text[-SCAN_CHARS:]


def sentences(text: str, parts: list[str] | None = None) -> list[str]:
    """``text``'s sentences, stripped, of three characters or more (``parts``: its split, if made)."""
    return [s.strip() for s in (SENTENCE_BREAK.split(text) if parts is None else parts) if len(s.strip()) > 2]


def clip(s: str, n: int = 220) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1].rstrip() + "…"


def dedupe_key(text: str) -> str:
    """Items that say the same thing share this key: without the speaker, markup, clipping
    marks and case; the first 60 characters (an item clipped in one round is its longer self)."""
    t = _SPEAKER.sub("", text.strip())
    t = " ".join(t.replace("…", " ").lower().split())
    return t[:60]


def plain_text(sentence: str) -> str:
    return LIST_MARKUP.sub("", sentence.strip())


@dataclass
class Msg:
    role: str
    text: str
    speaker: str
    calls: list[tuple[str, str]]  # (name, arguments) of tool calls

    # several sections and the fact scan read a message's sentences: its text is split once
    @cached_property
    def parts(self) -> list[str]:
        """The text split at sentence ends (``SENTENCE_BREAK``), as ``_units`` and ``sentences`` take it."""
        return SENTENCE_BREAK.split(self.text)

    @cached_property
    def sentences(self) -> list[str]:
        return sentences(self.text, self.parts)


def read_messages(head: list[dict[str, Any]]) -> list[Msg]:
    """Each message's fields read once: role, text, who speaks, tool calls."""
    names: dict[str, str] = {}
    out = []
    harness = harness_keys(head)
    for m in head:
        role = m.get("role")
        text = _scan(content_text(m.get("content")))
        if role == "user" and is_harness(text, harness):
            role = "harness"  # a reminder the harness repeats, or injected context: not the user speaking
        elif role == "user":
            text = without_injected(text)
        calls = []
        if role == "assistant":
            for call in m.get("tool_calls") or ():
                parts = call_parts(call)  # function calls and custom ones (Codex's apply_patch)
                if parts is not None:
                    calls.append(parts)
                    if isinstance(call.get("id"), str):
                        names[call["id"]] = parts[0]
        if calls and "```" in text:  # a text action's code block: the call carries the command
            text = _FENCED.sub(" ", text)
        if role == "assistant" and text.startswith(("THOUGHT:", "DISCUSSION")):  # a harness's format marker
            text = _MARKER.sub("", text)
        if role == "tool":
            # a string in a checked message, or None (no tool_call_id: no name)
            speaker = f"Tool {names.get(cast(str, m.get('tool_call_id')), 'result')}"
        else:
            speaker = "User" if role in ("user", "developer") else "Harness" if role == "harness" \
                else str(role).capitalize()
        out.append(Msg(str(role), text, speaker, calls))
    return out
