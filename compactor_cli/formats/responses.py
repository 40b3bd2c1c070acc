"""OpenAI Responses API input: ``{"model", "instructions", "input": [items], ...}`` or a bare list
of items (``input`` may also be a string: one user message).

Mapping to the internal dump, exactly reversible:

- ``instructions`` (a string) is the internal system message; without it, a leading
  ``system``/``developer`` message item is.
- ``message`` items (also the type-less ``{"role", "content"}`` form) are messages of their role;
  content parts are kept as they are (``input_text``/``output_text`` carry ``text``).
- A run of consecutive calls (``function_call``, ``custom_tool_call``, and other ``*_call`` items
  with a ``call_id``) is one assistant message with ``tool_calls`` (call ID = ``call_id``).
- ``function_call_output`` and ``custom_tool_call_output`` are tool messages whose content is the
  item's ``output`` (a string or a list of parts): tier 1 replaces it. Outputs of other calls are
  tool messages with null content (never compacted).
- ``reasoning`` items go with the item they precede (their summary and content texts are the
  message's ``reasoning_content``); the cut never separates them.
- Any other item (``compaction``, ``item_reference``, ``web_search_call``...) is an assistant
  message of its own with empty content, written back as it was.

Tier 2 writes the summary into ``instructions`` when the request has that key, else as a
``developer`` message item at the start of ``input``.
"""

from __future__ import annotations

from typing import Any, cast

from ..model.checks import check_messages_shape, check_owned_keys
from ..model.conversation import META_KEY, Problem
from ..model.placeholders import is_input_placeholder, is_truncated_input
from .base import DUMP_KEY, MSG_KEY, Codec, fail, jdump, jload, type_name

FMT = "responses"
ROLES = ("user", "assistant", "system", "developer")
COMPACTABLE_OUTPUTS = ("function_call_output", "custom_tool_call_output")
OUTPUT_TYPES = COMPACTABLE_OUTPUTS + ("computer_call_output", "local_shell_call_output", "shell_call_output",
                                      "apply_patch_call_output")
ITEM_TYPES = ("message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
              "reasoning", "compaction", "compaction_summary", "item_reference", "web_search_call",
              "file_search_call", "computer_call", "computer_call_output", "local_shell_call",
              "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
              "apply_patch_call_output", "image_generation_call", "code_interpreter_call", "mcp_call",
              "mcp_list_tools", "mcp_approval_request", "mcp_approval_response")
PART_TYPES = ("input_text", "output_text", "input_image", "input_file", "refusal", "input_audio")


def item_type(item: dict) -> str:
    t = item.get("type")
    if t is None and "role" in item:
        return "message"
    return t if isinstance(t, str) else ""


def is_call(item: dict) -> bool:
    t = item_type(item)
    return t in ("function_call", "custom_tool_call") or (
        t.endswith("_call") and isinstance(item.get("call_id"), str))


def is_output(item: dict) -> bool:
    return item_type(item) in OUTPUT_TYPES and isinstance(item.get("call_id"), str)


def reasoning_text(item: dict) -> str:
    texts = []
    for key in ("summary", "content"):
        for part in item.get(key) or () if isinstance(item.get(key), list) else ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return "\n\n".join(texts)


def _tool_call(item: dict) -> dict:
    t = item_type(item)
    if t == "function_call":
        fn = {"name": item.get("name"), "arguments": item.get("arguments")}
        return {"id": item["call_id"], "type": "function", "function": fn}
    if t == "custom_tool_call":
        # counted like a function call: the custom input is the arguments text
        return {"id": item["call_id"], "type": "custom", "function": {"name": item.get("name"),
                                                                      "arguments": item.get("input")}}
    rest = {k: v for k, v in item.items() if k not in ("type", "call_id", "id", "status")}
    return {"id": item["call_id"], "type": t, "function": {"name": t, "arguments": jdump(rest)}}


# ---------------------------------------------------------------- checks (native)

def _check_parts(parts: list, ptr: str) -> list[Problem]:
    out = []
    for j, p in enumerate(parts):
        if not isinstance(p, dict):
            out.append(Problem(f"{ptr}/{j}", f"a content part must be an object, got {type_name(p)}", True))
        elif not isinstance(p.get("type"), str):
            out.append(Problem(f"{ptr}/{j}/type", "a content part needs a string 'type'", True))
        elif p["type"] in ("input_text", "output_text", "text") and not isinstance(p.get("text"), str):
            out.append(Problem(f"{ptr}/{j}/text", f"a {p['type']} part needs a string 'text'", True))
    return out


def check_items(items: list, base: str) -> list[Problem]:
    """Shape errors (fatal) of input items."""
    out: list[Problem] = []
    for i, item in enumerate(items):
        ptr = f"{base}/{i}"
        if not isinstance(item, dict):
            out.append(Problem(ptr, f"an input item must be an object, got {type_name(item)}", True))
            continue
        t = item_type(item)
        if not t:
            out.append(Problem(ptr, "an input item needs a string 'type' (or 'role' for a message)", True))
        elif t == "message":
            if item.get("role") not in ROLES:
                out.append(Problem(f"{ptr}/role", f"unknown role {item.get('role')!r}; expected one of "
                                                  f"{', '.join(sorted(ROLES))}", True))
            c = item.get("content")
            if isinstance(c, list):
                out.extend(_check_parts(c, f"{ptr}/content"))
            elif not isinstance(c, str):
                out.append(Problem(f"{ptr}/content", f"content must be a string or a list of parts, "
                                                     f"got {type_name(c)}", True))
        elif t in ("function_call", "custom_tool_call"):
            if not isinstance(item.get("call_id"), str):
                out.append(Problem(f"{ptr}/call_id", f"a {t} needs a string 'call_id'", True))
            if not isinstance(item.get("name"), str):
                out.append(Problem(f"{ptr}/name", f"a {t} needs a string 'name'", True))
            key = "arguments" if t == "function_call" else "input"
            if not isinstance(item.get(key), str):
                out.append(Problem(f"{ptr}/{key}", f"a {t} needs a string '{key}', got {type_name(item.get(key))}",
                                   True))
        elif t in COMPACTABLE_OUTPUTS:
            if not isinstance(item.get("call_id"), str):
                out.append(Problem(f"{ptr}/call_id", f"a {t} needs a string 'call_id'", True))
            o = item.get("output")
            if isinstance(o, list):
                out.extend(_check_parts(o, f"{ptr}/output"))
            elif not isinstance(o, str):
                out.append(Problem(f"{ptr}/output", f"output must be a string or a list of parts, got {type_name(o)}",
                                   True))
        elif t == "reasoning" and not isinstance(item.get("summary", []), list):
            out.append(Problem(f"{ptr}/summary", "a reasoning item's summary must be a list", True))
    return out


def pairing_problems(items: list, base: str) -> list[Problem]:
    """Warnings: every call's call_id answered by a later output, every output answering an
    earlier call, call IDs unique."""
    out: list[Problem] = []
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        if is_call(item):
            cid = item["call_id"]
            if cid in calls:
                out.append(Problem(f"{base}/{i}/call_id", f"call_id {cid!r} is used again", False))
            calls[cid] = i
        elif is_output(item):
            cid = item["call_id"]
            if cid not in calls:
                out.append(Problem(f"{base}/{i}/call_id", f"output {cid!r} answers no earlier call", False))
            answered.add(cid)
    for cid, i in calls.items():
        if cid not in answered:
            out.append(Problem(f"{base}/{i}", f"call {cid!r} has no output", False))
    return out


# ---------------------------------------------------------------- items -> internal messages

def _memo(**kw: Any) -> str:
    return jdump({"f": FMT, **kw})


def items_to_messages(items: list, system_first: bool, starts: list[int] | None = None) -> list[dict]:
    """Internal messages of (shape-checked) input items, each remembering its items.
    ``starts`` (when given) receives the index of each message's first item."""
    msgs: list[dict] = []
    first: list[int] = [] if starts is None else starts
    pend_at: int | None = None
    pending: list[dict] = []  # reasoning items waiting for the item they precede
    run: dict | None = None  # the open call run (an internal assistant message)
    run_items: list[dict] = []

    def close_run() -> None:
        nonlocal run, run_items
        if run is not None:
            run[MSG_KEY] = _memo(items=run_items)
            run = None
            run_items = []

    for i, item in enumerate(items):
        t = item_type(item)
        if t == "reasoning":
            if run is not None:
                run_items.append(item)
                text = reasoning_text(item)
                if text:
                    run["reasoning_content"] = (cast(str, run.get("reasoning_content")) + "\n\n" + text
                                                if run.get("reasoning_content") else text)
            else:
                if not pending:
                    pend_at = i
                pending.append(item)
            continue
        if is_call(item):
            if run is None:
                run = {"role": "assistant", "content": None}
                text = "\n\n".join(x for x in (reasoning_text(r) for r in pending) if x)
                if text:
                    run["reasoning_content"] = text
                run["tool_calls"] = []
                run_items = list(pending)
                first.append(cast(int, pend_at) if pending else i)  # pend_at is set with the first pending item
                pending = []
                msgs.append(run)
            run["tool_calls"].append(_tool_call(item))
            run_items.append(item)
            continue
        close_run()
        first.append(cast(int, pend_at) if pending else i)
        pre, pending = pending, []
        if t == "message":
            role = item["role"]
            if system_first and not msgs and not pre and role in ("system", "developer"):
                role = "system"
            m: dict[str, Any] = {"role": role, "content": item.get("content")}
            text = "\n\n".join(x for x in (reasoning_text(r) for r in pre) if x)
            if text:
                m["reasoning_content"] = text
            m[MSG_KEY] = _memo(items=pre + [item])
        elif is_output(item):
            if t in COMPACTABLE_OUTPUTS:
                shell = dict(item)
                has = "output" in shell
                shell["output"] = None
                m = {"role": "tool", "tool_call_id": item["call_id"], "content": item.get("output")}
                m[MSG_KEY] = _memo(item=shell, pre=pre, **({} if has else {"no": 1}))
            else:
                m = {"role": "tool", "tool_call_id": item["call_id"], "content": None}
                m[MSG_KEY] = _memo(items=pre + [item])
            text = "\n\n".join(x for x in (reasoning_text(r) for r in pre) if x)
            if text:
                m["reasoning_content"] = text
        else:  # an item the tiers need not understand: kept as it is, where it is
            m = {"role": "assistant", "content": []}
            text = "\n\n".join(x for x in (reasoning_text(r) for r in pre) if x)
            if text:
                m["reasoning_content"] = text
            m[MSG_KEY] = _memo(items=pre + [item])
        msgs.append(m)
    close_run()
    if pending:
        first.append(pend_at)  # type: ignore[arg-type]
        m = {"role": "assistant", "content": None}
        text = "\n\n".join(x for x in (reasoning_text(r) for r in pending) if x)
        if text:
            m["reasoning_content"] = text
        m[MSG_KEY] = _memo(items=pending)
        msgs.append(m)
    return msgs


def message_items(m: dict) -> list[dict]:
    """The native items of one internal message (its content as it is now, for a tool message)."""
    memo = jload(m[MSG_KEY])
    if "item" in memo:
        item = dict(memo["item"])
        if memo.get("no") and m.get("content") is None:
            item.pop("output", None)
        else:
            item["output"] = m.get("content")
        return list(memo.get("pre") or ()) + [item]
    items = list(memo.get("items") or ())
    calls = m.get("tool_calls")
    if calls:  # arguments --clear-tool-inputs cleared, or restore gave back
        by_id = {c.get("id"): (c.get("function") or {}).get("arguments") for c in calls if isinstance(c, dict)}
        for j, it in enumerate(items):
            field = {"function_call": "arguments", "custom_tool_call": "input"}.get(item_type(it))
            if field is not None and it.get("call_id") in by_id:
                args = by_id[it["call_id"]]
                if is_input_placeholder(args) or is_input_placeholder(it.get(field)) \
                        or is_truncated_input(args) or is_truncated_input(it.get(field)):
                    items[j] = {**it, field: args}
    return items


def memo_of(m: dict) -> dict | None:
    raw = m.get(MSG_KEY) if isinstance(m, dict) else None
    if isinstance(raw, str) and raw.startswith('{"f":"' + FMT + '"'):
        return jload(raw)
    return None


# ---------------------------------------------------------------- the codec

class ResponsesCodec(Codec):
    format = FMT

    def problems(self, dump: dict) -> list[Problem]:
        items, base = _items_of(self.original)
        fatal = list(check_owned_keys(dump))
        fatal += [p for p in check_messages_shape(dump["messages"]) if p.fatal]
        if fatal:
            return fatal
        return pairing_problems(items, base) if isinstance(items, list) else []

    def to_native(self, dump: dict) -> Any:
        return to_native(dump)


def _items_of(native: Any) -> tuple[Any, str]:
    if isinstance(native, list):
        return native, ""
    return native.get("input"), "/input"


def read_responses(obj: Any) -> tuple[dict, ResponsesCodec]:
    if isinstance(obj, list):
        items, layout = obj, {"format": FMT, "list": True}
        rest: dict = {}
    elif isinstance(obj, dict):
        if "input" not in obj:
            raise fail("a Responses request needs 'input' (a list of items or a string)")
        if "messages" in obj:
            raise fail("a Responses request has 'input', not 'messages'", "/messages")
        items = obj["input"]
        layout = {"format": FMT, "keys": list(obj)}
        meta = obj.get(META_KEY)
        if isinstance(meta, dict) and meta.get("input_form") == "list":
            layout["list"] = True
        rest = {k: v for k, v in obj.items() if k != "input" and not (k == "instructions" and _is_instr(v))}
    else:
        raise fail(f"expected a Responses request object or a list of input items, got {type_name(obj)}")
    base = "" if isinstance(obj, list) else "/input"
    if isinstance(items, str):
        msgs = [{"role": "user", "content": items, MSG_KEY: _memo(str=1)}]
    elif isinstance(items, list):
        problems = check_items(items, base)
        if problems:
            p = problems[0]
            raise fail(p.message + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""), p.pointer)
        msgs = items_to_messages(items, system_first=not (isinstance(obj, dict) and "instructions" in obj
                                                          and _is_instr(obj["instructions"])))
    else:
        raise fail(f"input must be a list of items or a string, got {type_name(items)}", "/input")
    if isinstance(obj, dict) and "instructions" in obj and _is_instr(obj["instructions"]):
        msgs.insert(0, {"role": "system", "content": obj["instructions"], MSG_KEY: _memo(instr=1)})
    dump = {"messages": msgs, **rest, DUMP_KEY: layout}
    return dump, ResponsesCodec(obj)


def _is_instr(value: Any) -> bool:
    """Instructions the tiers can read and replace: a string, or null (no instructions yet)."""
    return value is None or isinstance(value, str)


def to_native(dump: dict) -> Any:
    """The Responses record of an internal dump read by read_responses (compacted or not)."""
    layout = dump.get(DUMP_KEY) or {"format": FMT}
    msgs = dump["messages"]
    instructions: Any = _MISSING
    lead: list[dict] = []
    body = msgs
    if msgs and msgs[0].get("role") == "system":
        memo = memo_of(msgs[0])
        if memo is None or "instr" in memo:  # a summary, or the request's own instructions
            body = msgs[1:]
            text = msgs[0].get("content")
            # instructions that are not text (a list of parts) stay as they were: the summary is
            # written before the input instead of over them, so restore gives them back
            keeps_own = "instructions" in dump and not _is_instr(dump["instructions"])
            if not keeps_own and ("instructions" in (layout.get("keys") or ())
                                  or (memo is not None and "instr" in memo)):
                instructions = text
            else:
                lead = [{"type": "message", "role": "developer", "content": text}]
    if len(body) == 1 and (memo_of(body[0]) or {}).get("str"):
        items: Any = body[0]["content"]
    else:
        items = lead
        for m in body:
            if memo_of(m) is None:
                raise fail("a message has no Responses item to write back (it was not read from this format)")
            items.extend(message_items(m))
    extra = {k: v for k, v in dump.items() if k not in ("messages", DUMP_KEY)}
    if layout.get("list") and instructions is _MISSING and not extra:
        return items
    out: dict[str, Any] = {}
    keys = list(layout.get("keys") or ())
    if "input" not in keys:
        keys = ["input"] + keys
    for k in keys:
        if k == "input":
            if instructions is not _MISSING and "instructions" not in keys:
                out["instructions"] = instructions
            out["input"] = items
        elif k == "instructions":
            if instructions is not _MISSING:
                out["instructions"] = instructions
                extra.pop(k, None)
            elif k in extra:  # instructions that are not text (a list of items) stay as they were
                out[k] = extra.pop(k)
        elif k in extra:
            out[k] = extra.pop(k)
    for k, v in extra.items():
        out[k] = v
    if layout.get("list") and "keys" not in layout:
        meta = cast(dict, out.get(META_KEY)) if isinstance(out.get(META_KEY), dict) else {}
        out[META_KEY] = {**meta, "input_form": "list"}
    return out


class _Missing:
    pass


_MISSING = _Missing()


# ---------------------------------------------------------------- lossy: items -> a plain OpenAI dump

def _openai_parts(parts: list, notes: dict) -> Any:
    out = []
    for p in parts:
        t = p.get("type") if isinstance(p, dict) else None
        if t in ("input_text", "output_text", "text"):
            out.append({"type": "text", "text": p.get("text", "")})
        elif t == "input_image" and isinstance(p.get("image_url"), str):
            out.append({"type": "image_url", "image_url": {"url": p["image_url"]}})
        elif t == "refusal":
            out.append({"type": "text", "text": p.get("refusal", "")})
            notes["refusal parts carried as text"] = notes.get("refusal parts carried as text", 0) + 1
        else:
            out.append({"type": "text", "text": jdump(p)})
            notes[f"{t} parts carried as JSON text"] = notes.get(f"{t} parts carried as JSON text", 0) + 1
    if len(out) == 1 and out[0]["type"] == "text":
        return out[0]["text"]
    return out


def clean_message(m: dict, notes: dict) -> dict:
    """An internal message read from Responses items as a plain OpenAI chat message."""
    memo = memo_of(m) or {}
    items = list(memo.get("items") or ()) + list(memo.get("pre") or ())
    for it in items:
        if item_type(it) == "reasoning" and it.get("encrypted_content"):
            notes["encrypted reasoning dropped"] = notes.get("encrypted reasoning dropped", 0) + 1
    out = {k: v for k, v in m.items() if k != MSG_KEY}
    opaque = [it for it in memo.get("items") or () if item_type(it) not in ("reasoning", "message")
              and not is_call(it) and not is_output(it)]
    if m.get("role") == "tool":
        c = out.get("content")
        if c is None:
            item = (memo.get("items") or [{}])[-1]
            c = item.get("output")
            c = c if isinstance(c, str) else jdump(c)
        elif isinstance(c, list):
            c = _openai_parts(c, notes)
        out["content"] = c
        return out
    if opaque:
        notes[f"{item_type(opaque[0])} items carried as JSON text"] = notes.get(
            f"{item_type(opaque[0])} items carried as JSON text", 0) + 1
        out["content"] = jdump(opaque[0])
        return out
    if isinstance(out.get("content"), list):
        out["content"] = _openai_parts(out["content"], notes)
    calls = []
    for call in out.get("tool_calls") or ():
        if call.get("type") == "custom":
            calls.append({"id": call["id"], "type": "custom",
                          "custom": {"name": call["function"]["name"], "input": call["function"]["arguments"]}})
        elif call.get("type") != "function":
            calls.append({"id": call["id"], "type": "function", "function": call["function"]})
        else:
            calls.append(call)
    if calls:
        out["tool_calls"] = calls
    return out


def items_to_openai(items: list) -> tuple[list[dict], list[int], dict]:
    """(plain OpenAI messages, index of each one's first item, notes) of input items."""
    starts: list[int] = []
    msgs = items_to_messages(items, system_first=False, starts=starts)
    notes: dict = {}
    return [clean_message(m, notes) for m in msgs], starts, notes
