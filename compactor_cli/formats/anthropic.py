"""Anthropic Messages API requests and logs: ``{"model", "system", "messages", "tools", ...}`` or a
bare list of messages.

Mapping to the internal dump, exactly reversible:

- ``system`` (a string or a list of text blocks) is the internal system message.
- An assistant message is one internal assistant message: its ``text`` and server-tool blocks
  are its content (blocks as they are), its ``thinking`` texts its ``reasoning_content``, its
  ``tool_use`` blocks its ``tool_calls`` (``input`` as JSON arguments). It is written back as it
  was (signed ``thinking`` and ``redacted_thinking`` blocks are never edited).
- A user message's ``tool_result`` blocks are tool messages (content: the block's ``content``, a
  string or a list of blocks; tier 1 replaces it), its other blocks one user message after them.
  Written back, the blocks take their places again.

Tier 2 puts the summary into the top-level ``system`` (the request never gets a system-role
message) and cuts only before a user message without tool results, so the kept messages start
with a user message, alternate, and keep every ``tool_use`` with its ``tool_result``.
"""

from __future__ import annotations

from typing import Any, cast

from ..model.checks import check_messages_shape, check_owned_keys
from ..model.conversation import META_KEY, Problem
from ..model.placeholders import cleared_input, is_input_placeholder, is_truncated_input
from .base import DUMP_KEY, MSG_KEY, Codec, fail, jdump, jload, type_name

FMT = "anthropic"
#: Blocks that carry no text of their own in the internal view.
THINKING = ("thinking", "redacted_thinking")
SERVER_BLOCKS = ("server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
                 "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "mcp_tool_use",
                 "mcp_tool_result", "container_upload", "tool_search_tool_result")
SIGNAL_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "document",
                 "search_result") + SERVER_BLOCKS


def _memo(**kw: Any) -> str:
    return jdump({"f": FMT, **kw})


def memo_of(m: Any) -> dict | None:
    raw = m.get(MSG_KEY) if isinstance(m, dict) else None
    if isinstance(raw, str) and raw.startswith('{"f":"' + FMT + '"'):
        return jload(raw)
    return None


# ---------------------------------------------------------------- checks (native)

def _check_block(b: Any, ptr: str, role: str) -> list[Problem]:
    if not isinstance(b, dict):
        return [Problem(ptr, f"a content block must be an object, got {type_name(b)}", True)]
    t = b.get("type")
    if not isinstance(t, str):
        return [Problem(f"{ptr}/type", "a content block needs a string 'type'", True)]
    out = []
    if t == "text" and not isinstance(b.get("text"), str):
        out.append(Problem(f"{ptr}/text", "a text block needs a string 'text'", True))
    elif t == "tool_use":
        if not isinstance(b.get("id"), str):
            out.append(Problem(f"{ptr}/id", "a tool_use block needs a string 'id'", True))
        if not isinstance(b.get("name"), str):
            out.append(Problem(f"{ptr}/name", "a tool_use block needs a string 'name'", True))
        if not isinstance(b.get("input"), dict):
            out.append(Problem(f"{ptr}/input",
                               f"a tool_use block needs an 'input' object, got {type_name(b.get('input'))}", True))
    elif t == "tool_result":
        if not isinstance(b.get("tool_use_id"), str):
            out.append(Problem(f"{ptr}/tool_use_id", "a tool_result block needs a string 'tool_use_id'", True))
        c = b.get("content")
        if isinstance(c, list):
            for j, x in enumerate(c):
                if not isinstance(x, dict) or not isinstance(x.get("type"), str):
                    out.append(Problem(f"{ptr}/content/{j}", "a tool_result content block needs a string 'type'", True))
                elif x["type"] == "text" and not isinstance(x.get("text"), str):
                    out.append(Problem(f"{ptr}/content/{j}/text", "a text block needs a string 'text'", True))
        elif c is not None and not isinstance(c, str):
            out.append(Problem(f"{ptr}/content", f"a tool_result's content must be a string or a list of blocks, "
                                                 f"got {type_name(c)}", True))
        if role != "user":
            out.append(Problem(ptr, "tool_result blocks belong in user messages", True))
    elif t == "thinking" and not isinstance(b.get("thinking"), str):
        out.append(Problem(f"{ptr}/thinking", "a thinking block needs a string 'thinking'", True))
    return out


def check_messages(messages: Any, base: str) -> list[Problem]:
    """Shape errors (fatal)."""
    if not isinstance(messages, list):
        return [Problem(base or "/", f"messages must be an array, got {type_name(messages)}", True)]
    out: list[Problem] = []
    for i, m in enumerate(messages):
        ptr = f"{base}/{i}"
        if not isinstance(m, dict):
            out.append(Problem(ptr, f"a message must be an object, got {type_name(m)}", True))
            continue
        role = m.get("role")
        if role not in ("user", "assistant"):
            hint = "; a system prompt goes in the top-level 'system'" if role == "system" else ""
            out.append(Problem(f"{ptr}/role", f"an Anthropic message has role user or assistant, got {role!r}{hint}",
                               True))
            continue
        c = m.get("content")
        if isinstance(c, list):
            for j, b in enumerate(c):
                out.extend(_check_block(b, f"{ptr}/content/{j}", role))
        elif not isinstance(c, str):
            out.append(Problem(f"{ptr}/content", f"content must be a string or a list of blocks, got {type_name(c)}",
                               True))
    return out


def check_system(system: Any) -> list[Problem]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return [Problem("/system", f"system must be a string or a list of text blocks, got {type_name(system)}", True)]
    return [Problem(f"/system/{j}", "a system block must be a text block with a string 'text'", True)
            for j, b in enumerate(system)
            if not (isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))]


def rule_problems(messages: list, base: str) -> list[Problem]:
    """Warnings of the Messages API rules: the first message is a user message, roles alternate,
    every tool_use is answered by a tool_result in the next (user) message, tool_result blocks
    come first in their message and answer a tool_use of the message before, IDs are unique."""
    out: list[Problem] = []
    if messages and messages[0].get("role") != "user":
        out.append(Problem(f"{base}/0/role", "the first message is not a user message", False))
    seen: set[str] = set()
    for i, m in enumerate(messages):
        if i and m.get("role") == messages[i - 1].get("role"):
            out.append(Problem(f"{base}/{i}/role", f"two {m.get('role')} messages in a row", False))
        blocks = m["content"] if isinstance(m.get("content"), list) else []
        prev = messages[i - 1] if i else None
        prev_uses = [b["id"] for b in prev["content"] if isinstance(b, dict) and b.get("type") == "tool_use"] \
            if prev is not None and prev.get("role") == "assistant" and isinstance(prev.get("content"), list) else []
        answered = set()
        other_seen = False
        for j, b in enumerate(blocks):
            t = b.get("type")
            if t == "tool_use":
                if b["id"] in seen:
                    out.append(Problem(f"{base}/{i}/content/{j}/id", f"tool_use ID {b['id']!r} is used again", False))
                seen.add(b["id"])
            elif t == "tool_result":
                cid = b["tool_use_id"]
                if cid not in prev_uses:
                    out.append(Problem(f"{base}/{i}/content/{j}/tool_use_id",
                                       f"tool_result {cid!r} answers no tool_use of the message before it", False))
                if other_seen:
                    out.append(Problem(f"{base}/{i}/content/{j}",
                                       "a tool_result block comes after other content; tool results come first", False))
                answered.add(cid)
            else:
                other_seen = True
        if m.get("role") == "assistant" and blocks:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            nxt_ids = {b.get("tool_use_id") for b in nxt["content"] if isinstance(b, dict)
                       and b.get("type") == "tool_result"} if nxt is not None and isinstance(nxt.get("content"), list) \
                else set()
            for j, b in enumerate(blocks):
                if b.get("type") == "tool_use" and b["id"] not in nxt_ids:
                    out.append(Problem(f"{base}/{i}/content/{j}",
                                       f"tool_use {b['id']!r} is not answered by a tool_result in the next message",
                                       False))
    return out


# ---------------------------------------------------------------- messages -> internal

def _assistant(m: dict, i: int) -> dict:
    c = cast("str | list", m.get("content"))  # shape-checked: a string or a list of blocks
    if isinstance(c, str):
        return {"role": "assistant", "content": c, MSG_KEY: _memo(m=m)}
    content = [b for b in c if b.get("type") not in THINKING and b.get("type") != "tool_use"]
    out: dict[str, Any] = {"role": "assistant", "content": content or None}
    thinking = [b["thinking"] for b in c if b.get("type") == "thinking"]
    if thinking:
        out["reasoning_content"] = "\n\n".join(thinking)
    calls = [{"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": jdump(b["input"])}}
             for b in c if b.get("type") == "tool_use"]
    if calls:
        out["tool_calls"] = calls
    out[MSG_KEY] = _memo(m=m)
    return out


def _user(m: dict, i: int) -> list[dict]:
    c = cast("str | list", m.get("content"))  # shape-checked: a string or a list of blocks
    if isinstance(c, str) or not any(b.get("type") == "tool_result" for b in c):
        return [{"role": "user", "content": c, MSG_KEY: _memo(m=m)}]
    shell = {k: (None if k == "content" else v) for k, v in m.items()}
    results = [(j, b) for j, b in enumerate(c) if b.get("type") == "tool_result"]
    others = [(j, b) for j, b in enumerate(c) if b.get("type") != "tool_result"]
    n = len(results) + (1 if others else 0)
    out = []
    for k, (j, b) in enumerate(results):
        block = {key: (None if key == "content" else v) for key, v in b.items()}
        memo = {"k": k, "n": n, "mk": shell, "p": j, "b": block}
        if "content" not in b:
            memo["no"] = 1
        out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": b.get("content"),
                    MSG_KEY: _memo(**memo)})
    if others:
        out.append({"role": "user", "content": [b for _, b in others],
                    MSG_KEY: _memo(k=len(results), n=n, mk=shell, p=[j for j, _ in others])})
    return out


def messages_to_internal(messages: list) -> list[dict]:
    out: list[dict] = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            out.append(_assistant(m, i))
        else:
            out.extend(_user(m, i))
    return out


def _with_inputs(native: dict, calls: Any) -> dict:
    """An assistant message whose tool_use inputs follow its calls' arguments where
    --clear-tool-inputs cleared them or restore gave them back (else it is written as read)."""
    content = native.get("content")
    if not calls or not isinstance(content, list):
        return native
    uses = [j for j, b in enumerate(content) if isinstance(b, dict) and b.get("type") == "tool_use"]
    new_content: list | None = None
    for j, call in zip(uses, calls, strict=False):
        args = (call.get("function") or {}).get("arguments")
        if isinstance(args, str) and (is_input_placeholder(args) or cleared_input(content[j].get("input"))
                                      or is_truncated_input(args) or is_truncated_input(content[j].get("input"))):
            if new_content is None:
                new_content = list(content)
            new_content[j] = {**content[j], "input": jload(args)}
    return native if new_content is None else {**native, "content": new_content}


def _native_messages(msgs: list[dict]) -> list[dict]:
    """The native messages of internal messages (each remembering its native form)."""
    out: list[dict] = []
    group: list[tuple[int, Any]] | None = None
    shell: dict | None = None
    last: tuple[int, int] | None = None  # (k, n) of the previous part

    def flush() -> None:
        nonlocal group, shell
        if group is not None and shell is not None:
            native = dict(shell)
            native["content"] = [b for _, b in sorted(group, key=lambda x: x[0])]
            out.append(native)
        group, shell = None, None

    for m in msgs:
        memo = memo_of(m)
        if memo is None:
            raise fail("a message has no Anthropic form to write back (it was not read from this format)")
        if "m" in memo:
            flush()
            last = None
            out.append(_with_inputs(memo["m"], m.get("tool_calls")))
            continue
        k, n = memo["k"], memo["n"]
        if group is None or last is None or last != (k - 1, n) or k == 0:
            flush()
            group, shell = [], memo["mk"]
        if m.get("role") == "tool":
            block = dict(memo["b"])
            if memo.get("no") and m.get("content") is None:
                block.pop("content", None)
            else:
                block["content"] = m.get("content")
            group.append((memo["p"], block))
        else:
            group.extend(zip(memo["p"], m.get("content") or (), strict=False))
        last = (k, n)
    flush()
    return out


# ---------------------------------------------------------------- the codec

class AnthropicCodec(Codec):
    format = FMT

    def problems(self, dump: dict) -> list[Problem]:
        fatal = list(check_owned_keys(dump))
        fatal += [p for p in check_messages_shape(dump["messages"]) if p.fatal]
        if fatal:
            return fatal
        native = self.original
        messages = native if isinstance(native, list) else native.get("messages")
        return rule_problems(messages, "" if isinstance(native, list) else "/messages")

    def to_native(self, dump: dict) -> Any:
        return to_native(dump)


def read_anthropic(obj: Any) -> tuple[dict, AnthropicCodec]:
    if isinstance(obj, list):
        messages, base = obj, ""
        layout: dict[str, Any] = {"format": FMT, "list": True}
        rest: dict = {}
        system = _NONE
    elif isinstance(obj, dict):
        if "messages" not in obj:
            raise fail("an Anthropic request needs 'messages'")
        messages, base = obj["messages"], "/messages"
        layout = {"format": FMT, "keys": list(obj)}
        meta = obj.get(META_KEY)
        if isinstance(meta, dict) and meta.get("input_form") == "list":
            layout["list"] = True
        rest = {k: v for k, v in obj.items() if k not in ("messages", "system")}
        system = obj.get("system", _NONE)
        problems = check_system(obj.get("system"))
        if problems:
            raise fail(problems[0].message, problems[0].pointer)
    else:
        raise fail(f"expected an Anthropic request object or a list of messages, got {type_name(obj)}")
    problems = check_messages(messages, base)
    if problems:
        p = problems[0]
        raise fail(p.message + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""), p.pointer)
    msgs = messages_to_internal(messages)
    if system is not _NONE:
        msgs.insert(0, {"role": "system", "content": system, MSG_KEY: _memo(sys=1)})
    return {"messages": msgs, **rest, DUMP_KEY: layout}, AnthropicCodec(obj)


def to_native(dump: dict) -> Any:
    """The Anthropic record of an internal dump read by read_anthropic (compacted or not)."""
    layout = dump.get(DUMP_KEY) or {"format": FMT}
    msgs = dump["messages"]
    system: Any = _NONE
    if msgs and msgs[0].get("role") == "system":
        memo = memo_of(msgs[0])
        if memo is None or "sys" in memo:
            system = msgs[0].get("content")
            msgs = msgs[1:]
    messages = _native_messages(msgs)
    extra = {k: v for k, v in dump.items() if k not in ("messages", DUMP_KEY)}
    if layout.get("list") and system is _NONE and not extra:
        return messages
    out: dict[str, Any] = {}
    keys = list(layout.get("keys") or ())
    if "messages" not in keys:
        keys.append("messages")
    for k in keys:
        if k == "messages":
            if system is not _NONE and "system" not in keys:
                out["system"] = system
            out["messages"] = messages
        elif k == "system":
            if system is not _NONE:
                out["system"] = system
        elif k in extra:
            out[k] = extra.pop(k)
    out.update(extra)
    if layout.get("list") and "keys" not in layout:
        meta = cast(dict, out.get(META_KEY)) if isinstance(out.get(META_KEY), dict) else {}
        out[META_KEY] = {**meta, "input_form": "list"}
    return out


class _None:
    pass


_NONE = _None()
