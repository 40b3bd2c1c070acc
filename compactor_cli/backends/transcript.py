"""The head as quoted data for a model: one JSON object per message inside <transcript> tags,
long outputs clipped (head and tail kept, with a marker), split into chunks that fit the
summariser's input budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ..model.conversation import call_parts

CLIP_MARKER = "\n[… {cut} characters cut by xcompact …]\n"


def clip_text(text: str, max_chars: int) -> str:
    """Keep the first two thirds and the last third of ``max_chars``, marking what was cut."""
    if len(text) <= max_chars:
        return text
    keep_head = max_chars * 2 // 3
    keep_tail = max_chars - keep_head
    return text[:keep_head] + CLIP_MARKER.format(cut=len(text) - keep_head - keep_tail) + text[len(text) - keep_tail:]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict):
                parts.append(p["text"] if isinstance(p.get("text"), str) else f"[{p.get('type', 'part')}]")
        return "\n".join(parts)
    return ""


def render_message(m: dict[str, Any], max_chars: int) -> str:
    """One message as a JSON line; tool and long contents are clipped to ``max_chars``."""
    obj: dict[str, Any] = {"role": m.get("role")}
    if m.get("name"):
        obj["name"] = m["name"]
    if m.get("tool_call_id"):
        obj["tool_call_id"] = m["tool_call_id"]
    text = _content_text(m.get("content"))
    if text:
        obj["content"] = clip_text(text, max_chars)
    calls = []
    for call in m.get("tool_calls") or ():
        parts = call_parts(call)  # function calls and custom ones (Codex's apply_patch)
        if parts is not None:
            calls.append({"id": call.get("id"), "name": parts[0], "arguments": clip_text(parts[1], max_chars)})
    if calls:
        obj["tool_calls"] = calls
    line = orjson.dumps(obj).decode()
    return line.replace("</", "<\\/")  # nothing inside can close the quoting tags


def upper_bound_tokens(text: str) -> int:
    """No BPE token is shorter than one UTF-8 byte, so the byte length bounds the token count."""
    return len(text.encode("utf-8"))


def chunk_lines(lines: list[str], budget: int, count: Callable[[str], int]) -> list[list[str]]:
    """Greedy chunks of consecutive lines, each within ``budget`` tokens. Lines are counted
    only when their byte lengths do not already prove that everything fits."""
    if sum(upper_bound_tokens(line) + 1 for line in lines) <= budget:
        return [lines] if lines else []
    chunks: list[list[str]] = []
    current: list[str] = []
    used = 0
    for line in lines:
        n = count(line) + 1
        if current and used + n > budget:
            chunks.append(current)
            current, used = [], 0
        current.append(line)
        used += n
    if current:
        chunks.append(current)
    return chunks


def render_head(head: list[dict[str, Any]], budget: int, count: Callable[[str], int],
                clip_chars: int) -> list[list[str]]:
    """Lines of the head, clipped so each line fits ``budget``, grouped into chunks."""
    lines = []
    for m in head:
        line = render_message(m, clip_chars)
        limit = clip_chars
        while upper_bound_tokens(line) > budget and count(line) > budget and limit > 200:
            limit //= 2
            line = render_message(m, limit)
        lines.append(line)
    return chunk_lines(lines, budget, count)
