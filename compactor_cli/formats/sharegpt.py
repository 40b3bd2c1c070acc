"""ShareGPT records: ``{"conversations": [{"from", "value"}, ...], "system"?, "tools"?}`` (also the
LLaMA-Factory function-calling form), one per JSONL line or JSON document.

Read into an OpenAI dump (lossy, documented): ``system`` turns and the ``system`` key are system
messages; ``human``/``user`` turns user messages; ``gpt``/``assistant``/``model``/``chatgpt``
turns assistant messages; a ``function_call`` turn (a JSON ``{"name", "arguments"}`` or a list
of them; consecutive ones are one message) an assistant message with tool calls (IDs
``call_<n>``, in order); ``observation``/``tool``/``function`` turns their results, in call
order: one observation per call, or one holding a JSON list as long as the pending calls
answers them all; any other count after several calls is an error (ambiguous), never a result
attached to another call. Turns in the ``{"role", "content"}`` form are read as chat
messages. ``tools`` (a JSON string or a list) is kept as the dump's ``tools``; other keys go to
``source.record``. Other keys of a ``from``/``value`` turn (``weight``...) have no place: counted
in ``source.dropped_fields`` and noted.

``source.turns[i]`` is the ``conversations`` index message i came from.
"""

from __future__ import annotations

from typing import Any

import orjson

from .base import SOURCE_KEY, Dropped, fail, jdump, type_name
from .repair import repair_pairing

NO_RESULT = "[no observation recorded in the ShareGPT record]"
USER = ("human", "user")
ASSISTANT = ("gpt", "assistant", "model", "chatgpt", "bard", "bing")
RESULT = ("observation", "tool", "function", "function_response", "ipython")
CALL = ("function_call", "tool_call", "tool_calls")


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("conversations"), list)


def _calls(value: Any) -> list[dict] | None:
    try:
        parsed = orjson.loads(value) if isinstance(value, str) else value
    except orjson.JSONDecodeError:
        return None
    calls = parsed if isinstance(parsed, list) else [parsed]
    if not calls or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
        return None
    return calls


def _result_run(turns: list, start: int) -> list[tuple[int, str | None]]:
    """(index, value) of the observation turns in a row from ``start`` (the first is one)."""
    run: list[tuple[int, str | None]] = []
    for k in range(start, len(turns)):
        t = turns[k]
        if not (isinstance(t, dict) and isinstance(t.get("from"), str) and t["from"].lower() in RESULT):
            break
        v = t.get("value")
        run.append((k, v if v is None or isinstance(v, str) else jdump(v)))
    return run


def _pair(run: list[tuple[int, str | None]], pending: list[str]) -> list[tuple[int, str | None]]:
    """(turn index, result) for the calls ``pending``, in call order, from a run of
    observations: one per call; or, for several calls, one observation holding a JSON list of
    their results (LLaMA-Factory's parallel calls). With one call (or none) the first answers it
    and the rest are results without a call (repair_pairing says so). Any other count is
    ambiguous: an error, never a result attached to another call."""
    n, k, at = len(pending), len(run), run[0][0]
    if n <= 1 or k == n:
        return run
    if k == 1:
        try:
            parsed = orjson.loads(run[0][1] or "")
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list) and len(parsed) == n:
            return [(at, x if isinstance(x, str) else jdump(x)) for x in parsed]
    raise fail(f"{n} function calls are followed by {k} observation turns: which observation answers which call "
               f"is ambiguous (give one observation per call, in call order, or one holding a JSON list of the "
               f"{n} results)", f"/conversations/{at}")


def read_sharegpt(obj: Any, source: str | None = None, line: int | None = None) -> tuple[dict, list[str]]:
    if not looks_like(obj):
        raise fail("a ShareGPT record needs a 'conversations' list")
    msgs: list[dict] = []
    where: list[Any] = []
    notes: list[str] = []
    if isinstance(obj.get("system"), str) and obj["system"]:
        msgs.append({"role": "system", "content": obj["system"]})
        where.append("system")
    pending: list[str] = []
    n_call = 0
    unparsed = 0
    turns = obj["conversations"]
    dropped = Dropped()
    for turn in turns:
        if isinstance(turn, dict) and "from" in turn:  # the chat form is carried key for key
            dropped.check(turn, "conversations[].", ("from", "value"))
    after_call = False  # the previous turn was a call turn: a call turn now adds to its message
    i = 0
    while i < len(turns):
        turn = turns[i]
        ptr = f"/conversations/{i}"
        if not isinstance(turn, dict):
            raise fail(f"a turn must be an object, got {type_name(turn)}", ptr)
        if "from" not in turn and "role" in turn:  # the chat form
            msgs.append(dict(turn.items()))
            where.append(i)
            after_call = False
            i += 1
            continue
        who, value = turn.get("from"), turn.get("value")
        if not isinstance(who, str):
            raise fail("a turn needs a string 'from'", f"{ptr}/from")
        if value is not None and not isinstance(value, str):
            value = jdump(value)
        who_l = who.lower()
        if who_l in CALL:
            calls = _calls(value)
            if calls is None:
                unparsed += 1
                calls = [{"name": "unknown", "arguments": value}]
            if not after_call:  # a new assistant turn; consecutive call turns are one (parallel calls)
                msgs.append({"role": "assistant", "content": None, "tool_calls": []})
                where.append(i)
                pending = []
            for c in calls:
                n_call += 1
                args = c.get("arguments", c.get("parameters", {}))
                msgs[-1]["tool_calls"].append({"id": f"call_{n_call}", "type": "function", "function": {
                    "name": c["name"], "arguments": args if isinstance(args, str) else jdump(args)}})
                pending.append(f"call_{n_call}")
            after_call = True
        elif who_l in RESULT:
            run = _result_run(turns, i)
            for k, r in _pair(run, pending):
                out: dict[str, Any] = {"role": "tool"}
                if pending:
                    out["tool_call_id"] = pending.pop(0)
                out["content"] = r
                msgs.append(out)
                where.append(k)
            after_call = False
            i += len(run)
            continue
        elif who_l in USER or who_l == "system" or who_l in ASSISTANT:
            role = "user" if who_l in USER else "system" if who_l == "system" else "assistant"
            msgs.append({"role": role, "content": value})
            where.append(i)
            after_call = False
        else:
            raise fail(f"unknown speaker {who!r}; expected human, gpt, system, function_call or observation",
                       f"{ptr}/from")
        i += 1
    msgs, where, done = repair_pairing(msgs, where, NO_RESULT)
    dump: dict[str, Any] = {"messages": msgs}
    tools = obj.get("tools")
    if isinstance(tools, str) and tools.strip():
        try:
            tools = orjson.loads(tools)
        except orjson.JSONDecodeError:
            notes.append("tools is not JSON: kept as text in source.record")
            tools = None
    if isinstance(tools, list):
        dump["tools"] = tools
    src: dict[str, Any] = {"format": "sharegpt", "file": source}
    if line is not None:
        src["line"] = line
    src["turns"] = where
    record = {k: v for k, v in obj.items() if k not in ("conversations", "system") and not (
        k == "tools" and "tools" in dump)}
    if record:
        src["record"] = record
    if unparsed:
        notes.append(f"{unparsed} function_call turns were not JSON calls: carried as a call of 'unknown'")
    for key in ("unanswered", "orphan_results"):
        if done[key]:
            src[key] = done[key]
    if done["unanswered"]:
        notes.append(f"{len(done['unanswered'])} calls without an observation got the result {NO_RESULT!r}")
    if done["orphan_results"]:
        notes.append(f"{len(done['orphan_results'])} observations without a call became user messages")
    dropped.finish(src, notes)
    if notes:
        src["notes"] = notes
    dump[SOURCE_KEY] = src
    return dump, notes
