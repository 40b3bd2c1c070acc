"""``xcompact convert``: any format to ``openai``, ``anthropic`` or ``responses``.

A record is read into the internal dump (see the format modules), made a plain OpenAI dump (the
native memory turned into OpenAI terms), then written in the target format. Reading a request
format and writing the same one gives the record back exactly. Every tool call and every result
is carried; whatever a target cannot hold is said in the notes, never dropped silently (e.g.
a signed Anthropic ``thinking`` block written to OpenAI keeps its text as ``reasoning_content``
and loses its signature: "2 signed thinking blocks: text kept as reasoning_content, signature
dropped"). A Claude Code log written as Anthropic keeps its content blocks as they are.
"""

from __future__ import annotations

from typing import Any, cast

from ..model.conversation import content_text as _text  # one owner of 'the text of a content value'
from .base import DUMP_KEY, MSG_KEY, OWNED_KEYS, jdump, jload

TARGETS = ("openai", "anthropic", "responses")


class Notes:
    """Counted remarks: ``add("signed thinking blocks: ...")`` n times -> "n signed thinking ..."."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, what: str, n: int = 1) -> None:
        if n:
            self.counts[what] = self.counts.get(what, 0) + n

    def merge(self, counts: dict) -> None:
        for k, v in counts.items():
            self.add(k, v)

    def lines(self) -> list[str]:
        return [f"{n} {what}" for what, n in self.counts.items()]


# ---------------------------------------------------------------- internal -> plain OpenAI

def _data_url(source: dict) -> str:
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    return source.get("url") or source.get("file_id") or ""


def _anthropic_parts_to_openai(blocks: list, notes: Notes, where: str) -> Any:
    out = []
    for b in blocks:
        t = b.get("type") if isinstance(b, dict) else None
        if t == "text":
            out.append({"type": "text", "text": b.get("text", "")})
            extra = [k for k in b if k not in ("type", "text")]
            if extra:
                notes.add(f"text block fields not carried ({', '.join(sorted(extra))})")
        elif t == "image" and isinstance(b.get("source"), dict):
            out.append({"type": "image_url", "image_url": {"url": _data_url(b["source"])}})
        elif t == "document" and isinstance(b.get("source"), dict) and b["source"].get("type") == "text":
            out.append({"type": "text", "text": b["source"].get("data", "")})
            notes.add("text documents carried as text parts")
        else:
            out.append({"type": "text", "text": jdump(b)})
            notes.add(f"{t} blocks in {where} carried as JSON text")
    if len(out) == 1 and out[0]["type"] == "text":
        return out[0]["text"]
    return out


def _from_anthropic(m: dict, notes: Notes) -> dict:
    from .anthropic import memo_of

    memo = memo_of(m) or {}
    role = m["role"]
    out = {k: v for k, v in m.items() if k != MSG_KEY}
    if role == "system":
        c = m.get("content")
        out["content"] = c if not isinstance(c, list) else _anthropic_parts_to_openai(c, notes, "system")
        return out
    if role == "assistant":
        native = memo.get("m") or {}
        blocks = cast(list, native.get("content")) if isinstance(native.get("content"), list) else []
        signed = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "thinking" and b.get("signature"))
        notes.add("signed thinking blocks: text kept as reasoning_content, signature dropped", signed)
        notes.add("redacted_thinking blocks dropped (no text to carry)",
                  sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "redacted_thinking"))
        c = m.get("content")
        if isinstance(c, list):
            out["content"] = _anthropic_parts_to_openai(c, notes, "assistant messages") if c else None
        return out
    if role == "tool":
        if memo.get("b", {}).get("is_error"):
            notes.add("tool results with is_error: true (the flag is not carried)")
        c = m.get("content")
        if isinstance(c, list):
            out["content"] = _anthropic_parts_to_openai(c, notes, "tool results")
        return out
    c = m.get("content")
    if isinstance(c, list):
        out["content"] = _anthropic_parts_to_openai(c, notes, "user messages")
    return out


def _anthropic_tools_to_openai(tools: Any, notes: Notes) -> Any:
    if not isinstance(tools, list):
        return tools
    out = []
    for t in tools:
        if isinstance(t, dict) and "input_schema" in t:
            fn = {"name": t.get("name"), "parameters": t["input_schema"]}
            if "description" in t:
                fn = {"name": t.get("name"), "description": t["description"], "parameters": t["input_schema"]}
            out.append({"type": "function", "function": fn})
        else:
            out.append(t)
            notes.add("server tool definitions kept as they are")
    return out


def _openai_tools_to_anthropic(tools: Any, notes: Notes) -> Any:
    if not isinstance(tools, list):
        return tools
    out = []
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict):
            tool = {"name": fn.get("name")}
            if "description" in fn:
                tool["description"] = fn["description"]
            tool["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
            out.append(tool)
        else:
            out.append(t)
            notes.add("tool definitions without a function kept as they are")
    return out


def _openai_tools_to_responses(tools: Any) -> Any:
    if not isinstance(tools, list):
        return tools
    out = []
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        out.append({"type": "function", **fn} if isinstance(fn, dict) else t)
    return out


def _responses_tools_to_openai(tools: Any) -> Any:
    if not isinstance(tools, list):
        return tools
    out = []
    for t in tools:
        if isinstance(t, dict) and t.get("type") == "function" and "name" in t:
            out.append({"type": "function", "function": {k: v for k, v in t.items() if k != "type"}})
        else:
            out.append(t)
    return out


def to_plain_openai(dump: dict, fmt: str, notes: Notes) -> dict:
    """The internal dump of a record read in ``fmt`` as a plain OpenAI dump (no native memory)."""
    rest = {k: v for k, v in dump.items() if k not in ("messages", DUMP_KEY)}
    if any(k in rest for k in OWNED_KEYS[1:]):
        notes.add("records carry compaction bookkeeping, kept as it is (restore them before converting "
                  "to keep restore exact)")
    if fmt == "anthropic":
        msgs = [_from_anthropic(m, notes) for m in dump["messages"]]
        if "tools" in rest:
            rest["tools"] = _anthropic_tools_to_openai(rest["tools"], notes)
    elif fmt == "responses":
        from .responses import clean_message

        counts: dict = {}
        msgs = [clean_message(m, counts) for m in dump["messages"]]
        notes.merge(counts)
        if "tools" in rest:
            rest["tools"] = _responses_tools_to_openai(rest["tools"])
    else:
        msgs = []
        legacy = 0
        for m in dump["messages"]:
            if isinstance(m, dict) and MSG_KEY in m:
                legacy += 1
                m = {k: v for k, v in m.items() if k != MSG_KEY}
            msgs.append(m)
        notes.add("legacy function messages written as tool calls", legacy)
    return {"messages": msgs, **rest}


# ---------------------------------------------------------------- plain OpenAI -> targets

def _image_url(p: dict) -> tuple[str, Any]:
    """(url, detail) of an OpenAI image_url part, checked: a value of another type is the
    record's INVALID_INPUT, not a crash of the batch."""
    from ..errors import InvalidInputError
    from .base import type_name

    image = p.get("image_url")
    if not isinstance(image, dict) or not isinstance(image.get("url"), str):
        got = type_name(image) if not isinstance(image, dict) else f"a 'url' of type {type_name(image.get('url'))}"
        raise InvalidInputError(f"an image_url part needs an object with a string 'url', got {got}: "
                                "write it as {\"image_url\": {\"url\": \"...\"}}")
    return image["url"], image.get("detail")


#: What the writers below read of a plain OpenAI message; any other key with a value is noted.
_READ_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "reasoning_content", "reasoning"})
#: Keys a writer reads for one target only (noted for the others).
_TARGET_KEYS = {"Anthropic": frozenset({"is_error"})}


def _note_dropped(m: dict, target: str, notes: Notes) -> None:
    """Say (per record, counted) which message keys the target format has no place for, e.g.
    ``name``, ``audio``, ``metadata``: nothing is dropped silently (and --strict fails it)."""
    for k, v in m.items():
        if k not in _READ_KEYS and k not in _TARGET_KEYS.get(target, ()) and v is not None:
            notes.add(f"message '{k}' values not carried over ({target} messages have no '{k}')")


def _note_part(p: dict, read: tuple, target: str, notes: Notes) -> None:
    for k, v in p.items():
        if k not in read and v is not None:
            notes.add(f"'{k}' of {p.get('type')} parts not carried over ({target} has no place for it)")


#: What the writers read of a tool call and of its function (or custom) object.
_CALL_KEYS = frozenset({"id", "type", "function", "custom"})
_FUNCTION_KEYS = frozenset({"name", "arguments", "input"})


def _note_call(call: Any, target: str, notes: Notes) -> None:
    """Say which keys of a tool call (``index``...) or of its function (``strict``...) the
    target has no place for: a tool call is written from its id, name and arguments only."""
    if not isinstance(call, dict):
        return
    for k, v in call.items():
        if k not in _CALL_KEYS and v is not None:
            notes.add(f"tool call '{k}' values not carried over ({target} tool calls have no '{k}')")
    fn = call.get("function") if isinstance(call.get("function"), dict) else call.get("custom")
    for k, v in (fn.items() if isinstance(fn, dict) else ()):
        if k not in _FUNCTION_KEYS and v is not None:
            notes.add(f"tool call function '{k}' values not carried over ({target} has no place for it)")


def _openai_parts_to_anthropic(content: Any, notes: Notes) -> Any:
    if not isinstance(content, list):
        return content if content is not None else ""
    out = []
    for p in content:
        t = p.get("type") if isinstance(p, dict) else None
        if t == "text":
            _note_part(p, ("type", "text"), "Anthropic", notes)
            out.append({"type": "text", "text": p.get("text", "")})
        elif t == "image_url":
            _note_part(p, ("type", "image_url"), "Anthropic", notes)
            url, detail = _image_url(p)
            if detail is not None:
                notes.add(f"image detail {detail!r} (Anthropic images have none)")
            if url.startswith("data:") and ";base64," in url:
                media, data = url[5:].split(";base64,", 1)
                out.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
            else:
                out.append({"type": "image", "source": {"type": "url", "url": url}})
        elif isinstance(p, dict) and t in ("tool_use", "tool_result", "image", "document", "thinking"):
            out.append(p)
        else:
            out.append({"type": "text", "text": jdump(p)})
            notes.add(f"{t} parts carried as JSON text")
    return out


def _as_blocks(content: Any, notes: Notes) -> list:
    c = _openai_parts_to_anthropic(content, notes)
    if isinstance(c, str):
        return [{"type": "text", "text": c}] if c else []
    return c


def plain_to_anthropic(plain: dict, notes: Notes) -> dict:
    msgs = plain["messages"]
    system_texts: list[str] = []
    out: list[dict] = []
    i = 0
    leading = True
    for m in msgs:
        role = m.get("role")
        _note_dropped(m, "Anthropic", notes)
        if role in ("system", "developer") and leading:
            c = m.get("content")
            system_texts.append(c if isinstance(c, str) else "\n".join(
                p.get("text", "") for p in c or () if isinstance(p, dict)))
            continue
        leading = False
        if role in ("system", "developer"):
            notes.add(f"{role} messages after the start carried as user text")
            _append(out, "user", [{"type": "text", "text": f"[{role}] " + _text(m.get("content"))}])
        elif role == "user":
            _append(out, "user", _as_blocks(m.get("content"), notes))
        elif role == "assistant":
            blocks = _as_blocks(m.get("content"), notes)
            if m.get("reasoning_content") or m.get("reasoning"):
                notes.add("reasoning texts dropped (an Anthropic thinking block needs a signature)")
            for call in m.get("tool_calls") or ():
                _note_call(call, "Anthropic", notes)
                fn = call.get("function") or call.get("custom") or {}
                raw = fn.get("arguments", fn.get("input", ""))
                try:
                    args = jload(raw) if isinstance(raw, str) and raw.strip() else {}
                except Exception:  # noqa: BLE001  any text that is not JSON
                    args = None
                if not isinstance(args, dict):
                    notes.add("tool-call arguments that are not a JSON object wrapped as {\"input\": ...}")
                    args = {"input": raw}
                blocks.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": args})
            _append(out, "assistant", blocks)
        elif role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.get("tool_call_id")}
            c = m.get("content")
            block["content"] = c if isinstance(c, str) else _as_blocks(c, notes) if c is not None else ""
            if m.get("is_error") is True:  # a Claude Code (or Anthropic) error marker, back where it belongs
                block["is_error"] = True
            if out and out[-1]["role"] == "user":  # results go first in their user message
                blocks = out[-1]["content"]
                k = 0
                while k < len(blocks) and blocks[k].get("type") == "tool_result":
                    k += 1
                blocks.insert(k, block)
            else:
                out.append({"role": "user", "content": [block]})
        else:
            notes.add(f"messages of role {role!r} carried as user text")
            _append(out, "user", [{"type": "text", "text": _text(m.get("content"))}])
        i += 1
    if out and out[0]["role"] != "user":
        notes.add("conversation starts with an assistant message (the Messages API wants a user message first)")
    result: dict[str, Any] = {}
    rest = {k: v for k, v in plain.items() if k != "messages"}
    if "model" in rest:
        result["model"] = rest.pop("model")
    if system_texts:
        result["system"] = "\n\n".join(system_texts)
    result["messages"] = out
    if "tools" in rest:
        rest["tools"] = _openai_tools_to_anthropic(rest["tools"], notes)
    result.update(rest)
    return result


def _append(out: list, role: str, blocks: list) -> None:
    """Consecutive messages of one role become one (the Messages API alternates roles)."""
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": list(blocks)})


def _responses_parts(content: Any, role: str, notes: Notes) -> Any:
    if not isinstance(content, list):
        return content if content is not None else ""
    kind = "output_text" if role == "assistant" else "input_text"
    out = []
    for p in content:
        t = p.get("type") if isinstance(p, dict) else None
        if t == "text":
            _note_part(p, ("type", "text"), "Responses", notes)
            out.append({"type": kind, "text": p.get("text", "")})
        elif t == "image_url" and role != "assistant":
            _note_part(p, ("type", "image_url"), "Responses", notes)
            url, detail = _image_url(p)
            out.append({"type": "input_image", "image_url": url, **({"detail": detail} if detail is not None else {})})
        elif t in ("input_text", "output_text", "input_image", "input_file", "refusal"):
            out.append(p)
        else:
            out.append({"type": kind, "text": jdump(p)})
            notes.add(f"{t} parts carried as JSON text")
    return out


def plain_to_responses(plain: dict, notes: Notes) -> dict:
    msgs = plain["messages"]
    items: list[dict] = []
    result: dict[str, Any] = {}
    rest = {k: v for k, v in plain.items() if k != "messages"}
    if "model" in rest:
        result["model"] = rest.pop("model")
    start = 0
    if msgs and msgs[0].get("role") == "system" and isinstance(msgs[0].get("content"), str):
        result["instructions"] = msgs[0]["content"]
        start = 1
    for m in msgs:
        _note_dropped(m, "Responses", notes)
    custom_ids: set[Any] = set()  # a custom tool call's output is a custom_tool_call_output item
    for m in msgs[start:]:
        role = m.get("role")
        if role in ("user", "system", "developer", "assistant"):
            if role == "assistant" and (m.get("reasoning_content") or m.get("reasoning")):
                notes.add("reasoning texts dropped (a Responses reasoning item needs its id)")
            c = m.get("content")
            if (c is not None and c != [] and c != "") or role != "assistant":
                items.append({"type": "message", "role": role, "content": _responses_parts(c, role, notes)})
            for call in m.get("tool_calls") or ():
                _note_call(call, "Responses", notes)
                if call.get("type") == "custom" and isinstance(call.get("custom"), dict):
                    custom_ids.add(call.get("id"))
                    items.append({"type": "custom_tool_call", "call_id": call.get("id"),
                                  "name": call["custom"].get("name"), "input": call["custom"].get("input", "")})
                else:
                    fn = call.get("function") or {}
                    items.append({"type": "function_call", "call_id": call.get("id"), "name": fn.get("name"),
                                  "arguments": fn.get("arguments", "")})
        elif role == "tool":
            c = m.get("content")
            kind = "custom_tool_call_output" if m.get("tool_call_id") in custom_ids else "function_call_output"
            items.append({"type": kind, "call_id": m.get("tool_call_id"),
                          "output": c if isinstance(c, str) else _responses_parts(c, "user", notes)
                          if c is not None else ""})
        else:
            notes.add(f"messages of role {role!r} carried as user messages")
            items.append({"type": "message", "role": "user", "content": _text(m.get("content"))})
    result["input"] = items
    if "tools" in rest:
        rest["tools"] = _openai_tools_to_responses(rest["tools"])
    result.update(rest)
    return result


def convert(dump: dict, codec: Any, to: str, history: str = "since-compaction") -> tuple[Any, list[str]]:
    """(the record in format ``to``, notes) of an internal dump read with ``codec``."""
    if to not in TARGETS:
        raise ValueError(f"unknown target {to!r}")
    notes = Notes()
    if to == codec.format and not codec.lossy:
        return codec.to_native(dump), []
    if codec.format == "claude-code" and to == "anthropic":
        # Claude Code logs hold Messages API content: kept block for block (signed thinking too)
        from .claude_code import read_claude_code_anthropic

        native: Any
        src = dump.get("source") or {}
        native, lines = read_claude_code_anthropic(codec.original, src.get("file"))
        if history == "since-compaction":
            from .claude_code_tree import split_at_boundary

            split_at_boundary(native, lines)
        return native, lines
    plain = to_plain_openai(dump, codec.format, notes)
    if to == "openai":
        native = plain
    elif to == "anthropic":
        native = plain_to_anthropic(plain, notes)
    else:
        native = plain_to_responses(plain, notes)
    lines = list(getattr(codec, "notes", []) or []) + notes.lines()
    return native, lines


def check_carried(dump: dict, native: Any, to: str) -> list[str]:
    """Every tool call and result of the plain dump is in the converted record (a self-check;
    returns what is missing)."""
    calls = [c.get("id") for m in dump["messages"] for c in (m.get("tool_calls") or ())]
    results = [m.get("tool_call_id") for m in dump["messages"] if m.get("role") == "tool"]
    if to == "openai":
        got_calls = [c.get("id") for m in native["messages"] for c in (m.get("tool_calls") or ())]
        got_results = [m.get("tool_call_id") for m in native["messages"] if m.get("role") == "tool"]
    elif to == "anthropic":
        blocks = [b for m in native["messages"] if isinstance(m.get("content"), list) for b in m["content"]]
        got_calls = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        got_results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
    else:
        items = native["input"] if isinstance(native, dict) else native
        got_calls = [i.get("call_id") for i in items if i.get("type") in ("function_call", "custom_tool_call")]
        got_results = [i.get("call_id") for i in items
                       if i.get("type") in ("function_call_output", "custom_tool_call_output")]
    missing = [f"tool call {c}" for c in calls if c not in got_calls]
    missing += [f"tool result {r}" for r in results if r not in got_results]
    return missing
