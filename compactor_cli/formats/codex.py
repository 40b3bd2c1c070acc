"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

One file is one session: ``{"timestamp", "type", "payload"}`` lines of type ``session_meta``,
``turn_context``, ``response_item`` (Responses API items), ``event_msg`` and ``compacted``; older
rollouts hold a bare session header line followed by bare items and ``{"record_type": "state"}``
lines. The reading, lossy and documented:

- ``response_item`` payloads are read as Responses input items (see ``responses.py``) and
  written as plain OpenAI chat messages: ``message`` items by role (``input_text``/``output_text``
  as text), ``function_call``/``custom_tool_call``/``local_shell_call`` as assistant tool calls
  (a ``local_shell_call`` as a call of ``local_shell`` with its action as arguments), their
  outputs as tool messages, ``reasoning`` summaries and texts as ``reasoning_content``
  (``encrypted_content`` is dropped), other items (``web_search_call``, ``ghost_snapshot``...)
  as JSON text.
- ``session_meta`` gives ``source.session_id``/``cwd``/``cli_version``; its
  ``base_instructions`` text, when present, is the system message. Keys of items, of
  ``session_meta`` and of ``compacted`` lines that are neither read nor Codex's bookkeeping
  (ITEM_KEYS, SESSION_KEYS; docs/formats.md) are counted in ``source.dropped_fields`` and
  noted (an older rollout's ``success`` flag of an output, say).
- ``compacted`` lines (Codex's own summary) become a user message with the summary text (and
  the text of their ``replacement_history`` items, role by role, when present), listed in
  ``source.compactions``; ``event_msg`` lines repeat what items say (or are token counts):
  skipped, counted in ``source.skipped``; ``turn_context`` models are listed in
  ``source.models``.
- Every call keeps a result (see repair.py): unanswered calls get
  ``[no result recorded in the Codex rollout]``.

``source.lines[i]`` is the 1-based line message i came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from .base import SOURCE_KEY, Dropped, fail, jdump, type_name
from .repair import repair_pairing
from .responses import ITEM_TYPES, items_to_openai

NO_RESULT = "[no result recorded in the Codex rollout]"
LINE_TYPES = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
#: Keys read of a rollout's lines and items, or Codex's bookkeeping (docs/formats.md); any other
#: is counted in source.dropped_fields and noted. Items of other types are carried as JSON text.
_CALL = frozenset({"type", "id", "call_id", "status"})
ITEM_KEYS = {
    "message": frozenset({"type", "id", "role", "content", "status", "phase"}),
    "reasoning": frozenset({"type", "id", "summary", "content", "encrypted_content", "status"}),
    "function_call": _CALL | {"name", "arguments"},
    "custom_tool_call": _CALL | {"name", "input"},
    "local_shell_call": _CALL | {"action"},
    "function_call_output": _CALL | {"output"},
    "custom_tool_call_output": _CALL | {"output"},
}
#: ``instructions`` (AGENTS.md) reaches the model as a user message of the rollout, read there
SESSION_KEYS = frozenset({"id", "cwd", "cli_version", "base_instructions", "instructions", "timestamp", "originator",
                          "source", "model_provider", "git"})


def looks_like_line(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") in LINE_TYPES and "payload" in obj


def _check_item(item: dict, dropped: Dropped) -> None:
    t = item.get("type", "message")
    if isinstance(t, str) and t in ITEM_KEYS:
        dropped.check(item, f"{t}.", ITEM_KEYS[t])
        out = item.get("output")
        if t == "function_call_output" and isinstance(out, dict) and isinstance(out.get("content"), str):
            dropped.check(out, "function_call_output.output.", ("content",))  # older rollouts' success flag


def _as_item(payload: dict) -> dict:
    """Codex-only item types as Responses items the reader knows."""
    t = payload.get("type")
    if t == "local_shell_call":
        cid = payload.get("call_id") or payload.get("id") or ""
        return {"type": "function_call", "call_id": cid, "name": "local_shell",
                "arguments": jdump(payload.get("action", {}))}
    if t == "function_call_output" and isinstance(payload.get("output"), dict):
        out = payload["output"]  # older rollouts: {"content": ..., "success": ...}
        return {**payload, "output": out.get("content") if isinstance(out.get("content"), str) else jdump(out)}
    return payload


def _history_text(history: list) -> str:
    """The text of a ``compacted`` line's ``replacement_history`` (Responses items: the summary
    and the user messages Codex kept), so none of it is dropped; other items as JSON."""
    parts: list[str] = []
    for item in history:
        if isinstance(item, dict) and item.get("type", "message") == "message":
            content = item.get("content")
            if isinstance(content, list):
                text = "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
            else:
                text = content if isinstance(content, str) else jdump(content)
            parts.append(f"[{item.get('role', 'user')}] {text}")
        else:
            parts.append(jdump(item))
    return "\n\n".join(parts)


def read_codex(events: Iterable[tuple[int, Any]], source: str | None = None) -> tuple[dict, list[str]]:
    """(OpenAI dump, notes) of a rollout given as (line, parsed line) pairs."""
    events = list(events)
    if not events:
        raise fail("empty Codex rollout: no lines")
    src: dict[str, Any] = {"format": "codex", "file": source}
    items: list[dict] = []
    item_lines: list[int] = []
    skipped: dict[str, int] = {}
    compactions: list[dict] = []
    models: list[str] = []
    system: str | None = None
    dropped = Dropped()
    for k, (n, e) in enumerate(events):
        if not isinstance(e, dict):
            raise fail(f"line {n}: a rollout line must be an object, got {type_name(e)}")
        t = e.get("type")
        payload = cast(dict, e.get("payload"))  # a dict on the LINE_TYPES lines (checked next), which alone read it
        if t in LINE_TYPES and not isinstance(payload, dict):
            raise fail(f"line {n}: a {t} line needs a 'payload' object")
        if t == "session_meta" or (k == 0 and t is None and "id" in e and "timestamp" in e):
            meta = payload if t == "session_meta" else e
            dropped.check(meta, "session_meta.", SESSION_KEYS)
            for key, out_key in (("id", "session_id"), ("cwd", "cwd"), ("cli_version", "cli_version")):
                if key in meta:
                    src[out_key] = meta[key]
            base = meta.get("base_instructions")
            if isinstance(base, dict) and isinstance(base.get("text"), str):
                system = base["text"]
        elif t == "response_item":
            if payload.get("type") == "ghost_snapshot":
                skipped["ghost_snapshot"] = skipped.get("ghost_snapshot", 0) + 1
                continue
            _check_item(payload, dropped)
            items.append(_as_item(payload))
            item_lines.append(n)
        elif t == "compacted":
            dropped.check(payload, "compacted.", ("message", "replacement_history"))
            text = payload.get("message") if isinstance(payload.get("message"), str) else ""
            history = payload.get("replacement_history")
            entry: dict[str, Any] = {"line": n, "item": len(items)}
            if isinstance(history, list):  # what the model had after the compaction (remote compaction)
                kept = _history_text(history)
                text = "\n\n".join(t for t in (text, kept) if t)
                entry["replacement_items"] = len(history)
            compactions.append(entry)
            items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
            item_lines.append(n)
        elif t == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model not in models:
                models.append(model)
        elif t == "event_msg":
            key = f"event_msg:{payload.get('type')}"
            skipped[key] = skipped.get(key, 0) + 1
        elif t is None and e.get("record_type") == "state":
            skipped["state"] = skipped.get("state", 0) + 1
        elif t in ITEM_TYPES or (t is None and "role" in e):  # older rollouts: bare items
            if t == "ghost_snapshot":
                continue
            _check_item(e, dropped)
            items.append(_as_item(e))
            item_lines.append(n)
        else:
            skipped[str(t)] = skipped.get(str(t), 0) + 1
    from .responses import check_items

    problems = check_items(items, "")
    if problems:
        p = problems[0]
        raise fail(f"line {item_lines[int(p.pointer.split('/')[1])]}: {p.message}")
    msgs, starts, counts = items_to_openai(items)
    where = [item_lines[s] for s in starts]
    msgs, where, done = repair_pairing(msgs, where, NO_RESULT)
    if system is not None:
        msgs.insert(0, {"role": "system", "content": system})
        where.insert(0, events[0][0])
    for c in compactions:
        c["before_message"] = where.index(item_lines[c.pop("item")]) if item_lines else 0
    src["lines"] = where
    if models:
        src["models"] = models
    if compactions:
        src["compactions"] = compactions
    if skipped:
        src["skipped"] = dict(sorted(skipped.items()))
    notes = [f"{v} {k}" for k, v in sorted(counts.items())]
    for key in ("unanswered", "orphan_results"):
        if done[key]:
            src[key] = done[key]
    if done["unanswered"]:
        notes.append(f"{len(done['unanswered'])} calls without an output got the result {NO_RESULT!r}")
    if done["orphan_results"]:
        notes.append(f"{len(done['orphan_results'])} outputs without their call became user messages")
    if done["moved"]:
        notes.append(f"{done['moved']} outputs moved up to just after their call")
    dropped.finish(src, notes)
    if notes:
        src["notes"] = notes
    return {"messages": msgs, SOURCE_KEY: src}, notes
