"""Claude Code session logs (``~/.claude/projects/<dir>/<session>.jsonl``, and sub-agent files).

One file is one conversation spread over many JSON lines, so it is read whole (read_file). The
reading, lossy and documented:

- ``user`` and ``assistant`` events become messages in file order. Assistant events sharing one
  ``message.id`` (Claude Code writes one event per content block) are one assistant message, even
  when tool results were written between them; text blocks are its content, ``thinking`` blocks
  its ``reasoning_content`` (the signature is dropped), ``tool_use`` blocks its ``tool_calls``
  (``input`` as JSON arguments). Server tool blocks are carried as text parts.
- A user event's ``tool_result`` blocks become ``tool`` messages (string or text/image parts;
  ``is_error: true`` is kept as a key of the tool message, and written back by convert --to
  anthropic), its other blocks one user message (images as data-URL parts).
- ``isSidechain`` events of a sub-agent are read when the whole file is a sub-agent's; in a main
  session that also holds them (old versions), they are skipped and counted.
- ``progress``, ``file-history-snapshot``, ``queue-operation`` and other ``system`` events carry
  nothing the model saw: skipped, counted in ``source.skipped``; ``toolUseResult`` (the tool's
  structured result) too. ``compact_boundary`` events are listed in
  ``source.compact_boundaries`` with the index of the first message after them (the session's
  own summary follows as a user message); by default the conversation starts at the last one
  (what the model had) and the messages before it are carried in ``source.before_compaction``,
  which restore puts back (``--claude-code-history full`` reads the whole file); ``summary``
  lines in ``source.summaries``.
- A rewind (a prompt edited or a reply regenerated: two turns under one ``parentUuid``) keeps
  the branch the session continued on, the ancestry of its last event; the events of the other
  branches are not read, listed in ``source.rewound_branches`` (line, events) and noted. A
  ``compact_boundary`` on such a branch is one of its events: it never cuts the branch kept.
- Keys of events, messages and blocks that are neither read nor Claude Code's bookkeeping
  (EVENT_KEYS, MESSAGE_KEYS, BLOCK_KEYS; docs/formats.md) are counted in
  ``source.dropped_fields`` and noted.
- Every tool call keeps a result: a call the log never answers gets the result
  ``[no result recorded in the Claude Code log]`` (listed in ``source.unanswered``), a result
  whose call is not in the log becomes a user message (listed in ``source.orphan_results``).

``source.lines[i]`` is the 1-based line of the event message i came from (the first one, for a
merged assistant message).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .base import SOURCE_KEY, Dropped, fail, jdump, type_name
from .claude_code_tree import rewound_branches, split_at_boundary

NO_RESULT = "[no result recorded in the Claude Code log]"
_EVENT_KEYS = ("sessionId", "parentUuid", "uuid", "isSidechain", "userType")
#: Keys of a user/assistant event and of its message that are read, or Claude Code's bookkeeping
#: (ids, timestamps, the environment, the tool's structured result beside the result block the
#: model saw, the API's usage; docs/formats.md). Any other key, and any key of a text, thinking,
#: tool_use, tool_result or image block not read, is counted in source.dropped_fields and noted.
EVENT_KEYS = frozenset({"type", "message", "uuid", "parentUuid", "logicalParentUuid", "isSidechain", "sessionId",
                        "agentId", "userType", "cwd", "gitBranch", "version", "timestamp", "requestId", "slug",
                        "permissionMode", "thinkingMetadata", "todos", "isMeta", "isCompactSummary",
                        "isVisibleInTranscriptOnly", "sourceToolAssistantUUID", "toolUseResult"})
MESSAGE_KEYS = frozenset({"role", "content", "id", "model", "type", "usage", "stop_reason", "stop_sequence",
                          "container", "context_management"})
BLOCK_KEYS = {"text": ("type", "text"), "thinking": ("type", "thinking", "signature"),
              "tool_use": ("type", "id", "name", "input", "caller"), "image": ("type", "source"),
              "tool_result": ("type", "tool_use_id", "content", "is_error"), "redacted_thinking": ("type", "data")}
_CC_TYPES = ("user", "assistant", "system", "progress", "summary", "file-history-snapshot", "queue-operation",
             "attachment", "custom-title", "tag")


def looks_like_line(obj: Any) -> bool:
    """A single event line of a Claude Code session."""
    if not isinstance(obj, dict):
        return False
    t = obj.get("type")
    if t in ("file-history-snapshot", "queue-operation"):
        return True
    if t == "summary" and "leafUuid" in obj:
        return True
    return t in _CC_TYPES and sum(1 for k in _EVENT_KEYS if k in obj) >= 2


def _image_part(block: dict) -> dict:
    src = block.get("source") or {}
    if src.get("type") == "base64":
        url = f"data:{src.get('media_type', 'image/png')};base64,{src.get('data', '')}"
    else:
        url = src.get("url") or ""
    return {"type": "image_url", "image_url": {"url": url}}


def check_block(b: Any, dropped: Dropped | None) -> None:
    """Count the keys of a block the reading has no place for (a tool_use's ``caller`` only when
    it is not a direct call, which is what an OpenAI tool call is)."""
    t = b.get("type") if isinstance(b, dict) else None
    if dropped is None or not isinstance(t, str) or t not in BLOCK_KEYS:
        return
    dropped.check(b, f"{t}.", BLOCK_KEYS[t])
    if t == "tool_use" and b.get("caller") not in (None, {"type": "direct"}):
        dropped.add("tool_use.caller")


def _parts(blocks: list, notes: dict, dropped: Dropped | None = None) -> list:
    out = []
    for b in blocks:
        t = b.get("type") if isinstance(b, dict) else None
        check_block(b, dropped)
        if t == "text":
            out.append({"type": "text", "text": b.get("text", "")})
        elif t == "image":
            out.append(_image_part(b))
        else:
            notes["blocks carried as JSON text"] = notes.get("blocks carried as JSON text", 0) + 1
            out.append({"type": "text", "text": jdump(b)})
    return out


class _Reader:
    def __init__(self, source: str | None) -> None:
        self.messages: list[dict] = []
        self.lines: list[int] = []
        self.src: dict[str, Any] = {"format": "claude-code", "file": source}
        self.skipped: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.boundaries: list[dict] = []
        self.summaries: list[str] = []
        self.unanswered: list[str] = []
        self.orphans: list[str] = []
        self.cur: dict | None = None  # the open assistant message
        self.cur_id: Any = None
        self.open: dict[str, None] = {}  # calls of cur without a result yet
        self.known: set[str] = set()
        self.dropped = Dropped()

    def emit(self, m: dict, line: int) -> None:
        self.messages.append(m)
        self.lines.append(line)

    def close_calls(self, line: int) -> None:
        """Before anything but a result: every open call gets a result."""
        for cid in list(self.open):
            self.emit({"role": "tool", "tool_call_id": cid, "content": NO_RESULT}, line)
            self.unanswered.append(cid)
        self.open.clear()
        self.cur = None
        self.cur_id = None

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def user(self, msg: dict, line: int) -> None:
        content = msg.get("content")
        if isinstance(content, str):
            self.close_calls(line)
            self.emit({"role": "user", "content": content}, line)
            return
        if not isinstance(content, list):
            raise fail(f"line {line}: a user message's content must be a string or a list of blocks, "
                       f"got {type_name(content)}")
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        others = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")]
        orphans = []
        for b in results:
            check_block(b, self.dropped)
            cid = b.get("tool_use_id")
            body = b.get("content")
            if isinstance(body, list):
                body = _parts(body, self.counts, self.dropped)
            elif body is not None and not isinstance(body, str):
                body = jdump(body)
            if isinstance(cid, str) and cid in self.open:
                del self.open[cid]
                result: dict[str, Any] = {"role": "tool", "tool_call_id": cid, "content": body}
                if b.get("is_error") is True:  # kept as a marker on the tool message (back in Anthropic form)
                    result["is_error"] = True
                self.emit(result, line)
            else:
                orphans.append((cid, body))
        if orphans or others:
            self.close_calls(line)
        for cid, body in orphans:
            self.orphans.append(cid if isinstance(cid, str) else "")
            text = body if isinstance(body, str) else "\n".join(
                p.get("text", "") for p in body or () if isinstance(p, dict))
            self.emit({"role": "user", "content": f"[tool result {cid}]\n{text}"}, line)
        if others:
            parts = _parts(others, self.counts, self.dropped)
            if len(parts) == 1 and parts[0]["type"] == "text":
                self.emit({"role": "user", "content": parts[0]["text"]}, line)
            else:
                self.emit({"role": "user", "content": parts}, line)

    def assistant(self, msg: dict, line: int) -> None:
        content = msg.get("content")
        mid = msg.get("id")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise fail(f"line {line}: an assistant message's content must be a string or a list of blocks, "
                       f"got {type_name(content)}")
        if self.cur is None or mid is None or mid != self.cur_id:
            self.close_calls(line)
            self.cur = {"role": "assistant", "content": None}
            self.cur_id = mid
            self.emit(self.cur, line)
        m = self.cur
        for b in content:
            t = b.get("type") if isinstance(b, dict) else None
            check_block(b, self.dropped)
            if t == "text":
                self._add_text(m, b.get("text", ""))
            elif t == "thinking":
                text = b.get("thinking", "")
                m["reasoning_content"] = (text if "reasoning_content" not in m
                                          else m["reasoning_content"] + "\n\n" + text)
                if b.get("signature"):
                    self.count("thinking signatures dropped")
            elif t == "redacted_thinking":
                self.count("redacted_thinking blocks dropped")
            elif t == "tool_use":
                cid = b.get("id")
                if not isinstance(cid, str):
                    raise fail(f"line {line}: a tool_use block needs a string 'id'")
                call = {"id": cid, "type": "function",
                        "function": {"name": b.get("name", ""), "arguments": jdump(b.get("input", {}))}}
                m.setdefault("tool_calls", []).append(call)
                self.open[cid] = None
                self.known.add(cid)
            else:
                self.count(f"{t} blocks carried as JSON text")
                self._add_text(m, jdump(b))

    @staticmethod
    def _add_text(m: dict, text: str) -> None:
        if m["content"] is None:
            m["content"] = text
        elif isinstance(m["content"], str):
            m["content"] = [{"type": "text", "text": m["content"]}, {"type": "text", "text": text}]
        else:
            m["content"].append({"type": "text", "text": text})

    def finish(self, last_line: int) -> tuple[dict, list[str]]:
        self.close_calls(last_line)
        src = self.src
        src["lines"] = self.lines
        if self.boundaries:
            src["compact_boundaries"] = self.boundaries
        if self.summaries:
            src["summaries"] = self.summaries
        if self.skipped:
            src["skipped"] = dict(sorted(self.skipped.items()))
        if self.unanswered:
            src["unanswered"] = self.unanswered
        if self.orphans:
            src["orphan_results"] = self.orphans
        notes = [f"{n} {what}" for what, n in sorted(self.counts.items())]
        if self.unanswered:
            notes.append(f"{len(self.unanswered)} tool calls without a result in the log got "
                         f"the result {NO_RESULT!r}")
        if self.orphans:
            notes.append(f"{len(self.orphans)} tool results without their call became user messages")
        self.dropped.finish(src, notes)
        if notes:
            src["notes"] = notes
        return {"messages": self.messages, SOURCE_KEY: src}, notes


def read_claude_code(events: Iterable[tuple[int, Any]], source: str | None = None,
                     history: str = "since-compaction") -> tuple[dict, list[str]]:
    """(OpenAI dump, notes) of a session given as (line, parsed event) pairs. ``history``:
    "since-compaction" reads from the last compact_boundary (the earlier part is carried, see
    claude_code_tree.split_at_boundary), "full" the whole file."""
    events = list(events)
    if not events:
        raise fail("empty Claude Code session: no events")
    dropped, branches = rewound_branches(events)
    dialogue = [(n, e) for n, e in events if isinstance(e, dict) and e.get("type") in ("user", "assistant")]
    main = [e for _, e in dialogue if not e.get("isSidechain")]
    sidechain_file = bool(dialogue) and not main
    r = _Reader(source)
    dropped_ids = {(events[i][0], id(events[i][1])) for i in dropped}
    if branches:  # a rewind: the session continued on another branch; this one is not read
        r.src["rewound_branches"] = branches
        r.count(f"events of {len(branches)} rewound branch{'es' if len(branches) > 1 else ''} not read "
                "(the session continued on another; listed in source.rewound_branches)", len(dropped))
    for n, e in events:
        if not isinstance(e, dict):
            raise fail(f"line {n}: a Claude Code event must be an object, got {type_name(e)}")
        if "sessionId" in e and "session_id" not in r.src:
            r.src["session_id"] = e["sessionId"]
        if e.get("agentId") and "agent_id" not in r.src and (sidechain_file or not e.get("isSidechain")):
            r.src["agent_id"] = e["agentId"]
        t = e.get("type")
        if t in ("user", "assistant"):
            if (n, id(e)) in dropped_ids:
                continue
            if e.get("isSidechain") and not sidechain_file:
                r.skipped["sidechain events"] = r.skipped.get("sidechain events", 0) + 1
                continue
            msg = e.get("message")
            if not isinstance(msg, dict):
                raise fail(f"line {n}: a {t} event needs a 'message' object")
            r.dropped.check(e, f"{t}.", EVENT_KEYS)
            r.dropped.check(msg, "message.", MESSAGE_KEYS)
            if t == "user":
                r.user(msg, n)
            else:
                r.assistant(msg, n)
        elif t == "system" and e.get("subtype") == "compact_boundary" and (n, id(e)) in dropped_ids:
            continue  # on a rewound branch: counted with its events, never the live branch's cut
        elif t == "system" and e.get("subtype") == "compact_boundary":
            meta = e.get("compactMetadata") or {}
            r.boundaries.append({"line": n, "before_message": len(r.messages), **{
                k: meta[k] for k in ("trigger", "preTokens") if k in meta}})
            r.skipped["system"] = r.skipped.get("system", 0) + 1
        elif t == "summary":
            if isinstance(e.get("summary"), str):
                r.summaries.append(e["summary"])
        else:
            key = str(t) if t is not None else "untyped"
            r.skipped[key] = r.skipped.get(key, 0) + 1
    if sidechain_file:
        r.src["sidechain"] = True
    dump, notes = r.finish(events[-1][0])
    if history == "since-compaction":
        split_at_boundary(dump, notes)
    return dump, notes


# ---------------------------------------------------------------- as an Anthropic request

def read_claude_code_anthropic(events: Iterable[tuple[int, Any]], source: str | None = None) -> tuple[dict, list[str]]:
    """(Anthropic request ``{"messages", "source"}``, notes) of a session: Claude Code logs are
    Messages API content, so blocks stay as they are (signed thinking included). Assistant
    events of one ``message.id`` are one message; the tool results that answer it are the next
    user message (results first, then any text); consecutive messages of one role are merged
    so roles alternate. Skipped events, provenance and repairs as for the OpenAI reading."""
    events = list(events)
    if not events:
        raise fail("empty Claude Code session: no events")
    dialogue = [e for _, e in events if isinstance(e, dict) and e.get("type") in ("user", "assistant")]
    sidechain_file = bool(dialogue) and not any(not e.get("isSidechain") for e in dialogue)
    out: list[dict] = []
    lines: list[int] = []
    src: dict[str, Any] = {"format": "claude-code", "file": source}
    dropped, branches = rewound_branches(events)
    dropped_ids = {(events[i][0], id(events[i][1])) for i in dropped}
    if branches:
        src["rewound_branches"] = branches
    skipped: dict[str, int] = {}
    unanswered: list[str] = []
    orphans: list[str] = []
    boundaries: list[dict] = []
    cur_id: Any = None
    cur_msg: dict | None = None
    open_calls: dict[str, None] = {}
    unplaced = Dropped()  # keys of events and messages: blocks are kept as they are

    def close(line: int) -> None:
        nonlocal cur_id
        if open_calls:
            blocks = [{"type": "tool_result", "tool_use_id": cid, "content": NO_RESULT, "is_error": True}
                      for cid in open_calls]
            unanswered.extend(open_calls)
            open_calls.clear()
            _add(out, lines, "user", blocks, line, results=True)
        cur_id = None

    for n, e in events:
        if not isinstance(e, dict):
            raise fail(f"line {n}: a Claude Code event must be an object, got {type_name(e)}")
        if "sessionId" in e and "session_id" not in src:
            src["session_id"] = e["sessionId"]
        t = e.get("type")
        if t in ("user", "assistant"):
            if (n, id(e)) in dropped_ids:
                continue
            if e.get("isSidechain") and not sidechain_file:
                skipped["sidechain events"] = skipped.get("sidechain events", 0) + 1
                continue
            msg = e.get("message")
            if not isinstance(msg, dict):
                raise fail(f"line {n}: a {t} event needs a 'message' object")
            unplaced.check(e, f"{t}.", EVENT_KEYS)
            unplaced.check(msg, "message.", MESSAGE_KEYS)
            content = msg.get("content")
            if isinstance(content, str):
                blocks = [{"type": "text", "text": content}]
            elif isinstance(content, list):
                blocks = [b for b in content if isinstance(b, dict)]
            else:
                raise fail(f"line {n}: a message's content must be a string or a list of blocks")
            if t == "assistant":
                mid = msg.get("id")
                if mid is None or mid != cur_id or cur_msg is None:
                    close(n)
                    cur_id = mid
                    _add(out, lines, "assistant", [], n)
                    cur_msg = out[-1]
                cur_msg["content"].extend(blocks)
                for b in blocks:
                    if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                        open_calls[b["id"]] = None
                continue
            results = [b for b in blocks if b.get("type") == "tool_result"]
            others = [b for b in blocks if b.get("type") != "tool_result"]
            mine = [b for b in results if isinstance(b.get("tool_use_id"), str) and b["tool_use_id"] in open_calls]
            stray = [b for b in results if b not in mine]
            if mine:
                for b in mine:
                    del open_calls[b["tool_use_id"]]
                _add(out, lines, "user", mine, n, results=True)
            if stray or others:
                close(n)
                cur_msg = None
                for b in stray:
                    orphans.append(str(b.get("tool_use_id")))
                    body: Any = b.get("content")  # a tool result's content: any JSON value
                    text = body if isinstance(body, str) else "\n".join(
                        x.get("text", "") for x in body or () if isinstance(x, dict))
                    others.insert(0, {"type": "text", "text": f"[tool result {b.get('tool_use_id')}]\n{text}"})
                if isinstance(content, str) and not stray:
                    _add(out, lines, "user", content, n)
                else:
                    _add(out, lines, "user", others, n)
        elif t == "system" and e.get("subtype") == "compact_boundary" and (n, id(e)) in dropped_ids:
            continue  # on a rewound branch (see the OpenAI reading)
        elif t == "system" and e.get("subtype") == "compact_boundary":
            meta = e.get("compactMetadata") or {}
            boundaries.append({"line": n, "before_message": len(out), **{
                k: meta[k] for k in ("trigger", "preTokens") if k in meta}})
            skipped["system"] = skipped.get("system", 0) + 1
        else:
            key = str(t) if t is not None else "untyped"
            skipped[key] = skipped.get(key, 0) + 1
    close(events[-1][0])
    src["lines"] = lines
    if sidechain_file:
        src["sidechain"] = True
    if boundaries:
        src["compact_boundaries"] = boundaries
    if skipped:
        src["skipped"] = dict(sorted(skipped.items()))
    notes = []
    if unanswered:
        src["unanswered"] = unanswered
        notes.append(f"{len(unanswered)} tool calls without a result in the log got the result {NO_RESULT!r}")
    if orphans:
        src["orphan_results"] = orphans
        notes.append(f"{len(orphans)} tool results without their call became text")
    unplaced.finish(src, notes)
    if notes:
        src["notes"] = notes
    return {"messages": out, SOURCE_KEY: src}, notes


def _add(out: list, lines: list, role: str, content: Any, line: int, results: bool = False) -> None:
    """Append content to the conversation, merging into the last message when it has the same
    role (tool results go before any text of that message)."""
    if out and out[-1]["role"] == role:
        last = out[-1]
        if isinstance(last["content"], str):
            last["content"] = [{"type": "text", "text": last["content"]}]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if results:
            k = 0
            while k < len(last["content"]) and last["content"][k].get("type") == "tool_result":
                k += 1
            last["content"][k:k] = blocks
        else:
            last["content"].extend(blocks)
        return
    out.append({"role": role, "content": content if isinstance(content, str) else list(content)})
    lines.append(line)
