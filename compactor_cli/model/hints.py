"""One more clause for an error a user can act on: what the file probably is.

A pretty-printed JSON document saved as ``.jsonl`` fails on every line; a raw agent log has no
``messages``. Both deserve a sentence naming what xcompact saw, not hundreds of parse errors."""

from __future__ import annotations

from typing import Any

import orjson

DOCUMENT_HINT = ("this looks like one JSON document written over several lines: name the file .json, "
                 "or write one conversation per line")


def _foreign_format(obj: Any) -> str | None:
    """The closest known transcript format of a record that is not a dumps() conversation."""
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        first = obj[0]
        if "type" in first and ("call_id" in first or first.get("type") in ("message", "function_call", "reasoning")):
            return "an OpenAI Responses item list"
        return None
    if not isinstance(obj, dict):
        return None
    keys = set(obj)
    if "sessionId" in keys or ("parentUuid" in keys and "type" in keys) or obj.get("type") in (
            "file-history-snapshot", "summary"):
        return "a Claude Code session log line"
    if obj.get("type") in ("session_meta", "response_item", "event_msg", "turn_context"):
        return "a Codex CLI rollout line"
    if "trajectory" in keys and "history" in keys:
        return "a SWE-agent trajectory (.traj)"
    if obj.get("trajectory_format", "").startswith("mini-swe-agent") if isinstance(
            obj.get("trajectory_format"), str) else False:
        return "a mini-swe-agent trajectory"
    if isinstance(obj.get("conversations"), list):
        return "a ShareGPT record"
    if "input" in keys and ("instructions" in keys or isinstance(obj.get("input"), list)):
        return "an OpenAI Responses request"
    return None


_FROM = {"an OpenAI Responses item list": "responses", "a Claude Code session log line": "claude-code",
         "a Codex CLI rollout line": "codex", "a SWE-agent trajectory (.traj)": "swe-agent",
         "a mini-swe-agent trajectory": "mini-swe-agent", "a ShareGPT record": "sharegpt",
         "an OpenAI Responses request": "responses"}


def hint_for(raw: bytes, message: str) -> str | None:
    """A hint for the error ``message`` of the record ``raw``, or None."""
    if message.startswith("broken JSON"):
        head = raw.strip()
        if head in (b"{", b"[") or head.startswith((b'"', b"}", b"]")):
            return DOCUMENT_HINT
        return None
    if "--from" in message:  # formats.detect_format named the format already
        return None
    if "no 'messages' key" in message or "expected a dumps() object" in message:
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        found = _foreign_format(obj)
        if found:
            return f"it looks like {found}: read it with --from {_FROM[found]}"
    return None
