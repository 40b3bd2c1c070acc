"""Which format a record is in, from its shape alone (``--from auto``).

Every format has marks no other has: the log formats their own top-level keys or line types;
among the request formats, OpenAI chat has ``tool``/``function`` roles,
``tool_calls``, ``tool_call_id`` and ``image_url`` parts; Anthropic has a top-level ``system``
and ``tool_use``/``tool_result``/``thinking``/``document``... blocks and ``image`` blocks with a
``source``; Responses has ``input``/``instructions`` and typed items (``function_call``,
``reasoning``...) or ``input_text``/``output_text`` parts. A record with no mark (plain user and
assistant strings) is OpenAI, as before. Marks of two request formats at once are ambiguous;
a record that is none of them is unknown: both are INVALID_INPUT with a hint naming the closest
format.
"""

from __future__ import annotations

from typing import Any

from ..model.conversation import prescan
from . import claude_code, codex, mini_swe_agent, sharegpt, swe_agent
from .anthropic import SIGNAL_BLOCKS as _SIGNAL_BLOCKS
from .responses import ITEM_TYPES as _ITEM_TYPES
from .responses import PART_TYPES as _PART_TYPES

SIGNAL_BLOCKS, ITEM_TYPES, PART_TYPES = frozenset(_SIGNAL_BLOCKS), frozenset(_ITEM_TYPES), frozenset(_PART_TYPES)

NAMES = {
    "openai": "OpenAI chat-completions messages", "anthropic": "an Anthropic Messages request",
    "responses": "an OpenAI Responses input", "claude-code": "a Claude Code session log",
    "codex": "a Codex CLI rollout", "swe-agent": "a SWE-agent trajectory (.traj)",
    "mini-swe-agent": "a mini-swe-agent trajectory", "sharegpt": "a ShareGPT record",
}
_OPENAI_ROLES = frozenset({"tool", "function"})
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file"})


class Ambiguous(Exception):
    def __init__(self, candidates: list[str], why: str) -> None:
        super().__init__(why)
        self.candidates = candidates


def _message_marks(messages: list) -> set[str]:
    """The request formats whose marks the messages bear (hot path: every record of a run)."""
    scan = prescan(messages)  # the record loop's one walk of the messages, when nothing is wrong with them
    if scan is not None and scan.plain:
        return {"openai"} if scan.openai else set()
    marks: set[str] = set()
    openai = False
    for m in messages:
        if type(m) is not dict:
            continue
        role = m.get("role")
        if not openai and ((type(role) is str and role in _OPENAI_ROLES) or "tool_calls" in m or "tool_call_id" in m
                           or "function_call" in m):
            openai = True
        t = m.get("type")
        if t is not None and type(t) is str and (("role" not in m and t in ITEM_TYPES)
                                                 or (t == "message" and "role" in m)):
            marks.add("responses")
        content = m.get("content")
        if type(content) is list:
            for p in content:
                if type(p) is not dict:
                    continue
                pt = p.get("type")
                if pt == "text" or type(pt) is not str:  # a type of the wrong kind: the reader says so
                    continue
                if pt in SIGNAL_BLOCKS or (pt == "image" and "source" in p):
                    marks.add("anthropic")
                elif pt in _OPENAI_PARTS:
                    openai = True
                elif pt in PART_TYPES:
                    marks.add("responses")
    if openai:
        marks.add("openai")
    return marks


def detect(obj: Any) -> str:
    """The format of a parsed record. Raises Ambiguous; returns "" for an unknown shape."""
    if isinstance(obj, dict):
        if sharegpt.looks_like(obj):
            return "sharegpt"
        if mini_swe_agent.looks_like(obj):
            return "mini-swe-agent"
        if swe_agent.looks_like(obj):
            return "swe-agent"
        if codex.looks_like_line(obj):
            return "codex"
        if claude_code.looks_like_line(obj):
            return "claude-code"
        meta = obj.get("xcompact")
        if isinstance(meta, dict) and meta.get("format") in ("anthropic", "responses"):
            return meta["format"]
        if "messages" in obj:
            messages = obj["messages"]
            marks = _message_marks(messages) if isinstance(messages, list) else set()
            if "system" in obj:
                marks.add("anthropic")
            return _decide(marks)
        if "input" in obj and isinstance(obj["input"], (list, str)):
            return "responses"
        return ""
    if isinstance(obj, list):
        return _decide(_message_marks(obj))
    return ""


def _decide(marks: set[str]) -> str:
    if len(marks) > 1:
        order: list[str] = [f for f in ("openai", "anthropic", "responses") if f in marks]
        raise Ambiguous(order, "the record has marks of " + " and ".join(NAMES[f] for f in order))
    return marks.pop() if marks else "openai"


def closest(obj: Any) -> str | None:
    """The format a record that is none of them resembles most, or None."""
    if isinstance(obj, dict):
        keys = set(obj)
        if keys & {"sessionId", "parentUuid", "leafUuid", "isSidechain"}:
            return "claude-code"
        if keys & {"payload", "record_type"}:
            return "codex"
        if keys & {"trajectory", "history"}:
            return "swe-agent"
        if keys & {"trajectory_format"}:
            return "mini-swe-agent"
        if keys & {"conversations", "from", "value"}:
            return "sharegpt"
        if keys & {"input", "instructions", "previous_response_id"}:
            return "responses"
        if keys & {"system", "max_tokens", "stop_sequences", "anthropic_version"}:
            return "anthropic"
        if keys & {"messages", "role", "content"}:
            return "openai"
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        return closest(obj[0]) or "openai"
    return None


def likely(obj: Any) -> str | None:
    """The format whose own marks a parsed record (or log line) bears, or None: ``detect``
    without its default (a record with no mark at all is not said to look like OpenAI)."""
    try:
        found = detect(obj)
    except Ambiguous:
        return None
    except Exception:  # noqa: BLE001  a hint must never fail the error it adds to
        return None
    if found == "openai":
        messages = obj.get("messages") if isinstance(obj, dict) else obj
        if not (isinstance(messages, list) and "openai" in _message_marks(messages)):
            return None
    return found or None


def wrong_format(found: str, named: str) -> str:
    """The one clause every wrong ``--from`` error carries (the CLI prints it once per file)."""
    return f"this looks like {NAMES[found]}, not {NAMES[named]}: use --from {found} or --from auto"


def is_line_of(fmt: str, obj: Any) -> bool:
    """Whether a parsed line is one a reader of the file-level format ``fmt`` knows (not skipped
    as foreign)."""
    if not isinstance(obj, dict):
        return False
    if fmt == "claude-code":
        return claude_code.looks_like_line(obj) or (obj.get("type") in ("user", "assistant")
                                                    and isinstance(obj.get("message"), dict))
    t = obj.get("type")
    return codex.looks_like_line(obj) or obj.get("record_type") == "state" or t in ITEM_TYPES or (
        t is None and ("role" in obj or {"id", "timestamp"} <= set(obj)))
