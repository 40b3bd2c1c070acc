"""mini-swe-agent trajectories (``.traj.json``: ``{"info", "messages", "trajectory_format":
"mini-swe-agent-1.1"}``, and the older ``"mini-swe-agent-1"``).

``messages`` are chat messages with an ``extra`` key (mini-swe-agent's metadata: raw output,
return code, timestamps, cost), or Responses items for models on the Responses API. Read into an
OpenAI dump (lossy, documented):

- ``extra`` is not carried (the content holds what the model saw; counted in the notes, for
  Responses items too); the other keys of a message are carried as they are (``tool_calls``
  and ``tool`` messages included); Responses items are read as in ``codex``. ``instance_id``
  goes to ``source.instance_id``; ``info`` (the run's statistics and configuration) is not
  carried; any other top-level key is counted in ``source.dropped_fields`` and noted.
- text actions (the ``mswea_bash_command`` or ``bash`` code block of an assistant message
  followed by an observation: a user message whose ``extra`` has ``returncode``/``raw_output``,
  or whose text starts with ``<returncode>`` or ``Observation:``) become a call of ``bash``
  (ID ``call_<n>``) answered by that observation, as SWE-agent text actions are.
- the ``exit`` pseudo-message is no model message: ``source.exit`` holds its ``exit_status``
  and content (the submission).

``source.steps[i]`` is the ``messages`` index message i came from.
"""

from __future__ import annotations

import re
from typing import Any, cast

from .base import SOURCE_KEY, Dropped, fail, jdump, type_name
from .repair import repair_pairing

NO_RESULT = "[no observation recorded in the mini-swe-agent trajectory]"
ROLES = ("system", "user", "assistant", "tool", "developer")
_ACTION = re.compile(r"```(?:mswea_bash_command|bash)\s*\n(.*?)\n```", re.DOTALL)


def looks_like(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    fmt = obj.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return True
    info = obj.get("info")
    return isinstance(obj.get("messages"), list) and isinstance(info, dict) and (
        "mini_version" in info or ("model_stats" in info and "exit_status" in info))


def _is_observation(m: dict) -> bool:
    extra = m.get("extra")
    if isinstance(extra, dict) and ("returncode" in extra or "raw_output" in extra):
        return True
    c = m.get("content")
    return isinstance(c, str) and c.lstrip().startswith(("<returncode>", "Observation:"))


def read_mini_swe_agent(obj: Any, source: str | None = None, line: int | None = None) -> tuple[dict, list[str]]:
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        raise fail("a mini-swe-agent trajectory needs a 'messages' list")
    from .responses import item_type, items_to_openai

    raw = obj["messages"]
    msgs: list[dict] = []
    where: list[Any] = []
    notes: dict[str, int] = {}
    exits: list[dict] = []
    n_action = 0
    i = 0
    while i < len(raw):
        m = raw[i]
        if not isinstance(m, dict):
            raise fail(f"a message must be an object, got {type_name(m)}", f"/messages/{i}")
        if "role" not in m and item_type(m):  # Responses items, as litellm_response models write them
            j = i
            while j < len(raw) and isinstance(raw[j], dict) and "role" not in raw[j]:
                j += 1
            items = [{k: v for k, v in x.items() if k != "extra"} for x in raw[i:j]]
            extras = sum(1 for x in raw[i:j] if "extra" in x)
            if extras:
                notes["extra fields not carried"] = notes.get("extra fields not carried", 0) + extras
            converted, starts, counts = items_to_openai(items)
            msgs.extend(converted)
            where.extend(i + s for s in starts)
            for k, v in counts.items():
                notes[k] = notes.get(k, 0) + v
            i = j
            continue
        role = m.get("role")
        if role == "exit":
            extra = cast(dict, m.get("extra")) if isinstance(m.get("extra"), dict) else {}
            exits.append({"step": i, "exit_status": extra.get("exit_status"), "content": m.get("content")})
            i += 1
            continue
        if role not in ROLES:
            raise fail(f"unknown role {role!r}", f"/messages/{i}/role")
        out = {k: v for k, v in m.items() if k != "extra"}
        if "extra" in m:
            notes["extra fields not carried"] = notes.get("extra fields not carried", 0) + 1
        content = out.get("content")
        if content is not None and not isinstance(content, (str, list)):
            out["content"] = jdump(content)
        nxt = raw[i + 1] if i + 1 < len(raw) else None
        if role == "assistant" and not out.get("tool_calls") and isinstance(content, str) \
                and isinstance(nxt, dict) and nxt.get("role") == "user" and _is_observation(nxt):
            found = _ACTION.findall(content)
            if len(found) == 1:
                n_action += 1
                cid = f"call_{n_action}"
                out["tool_calls"] = [{"id": cid, "type": "function",
                                      "function": {"name": "bash", "arguments": jdump({"command": found[0].strip()})}}]
                msgs.append(out)
                where.append(i)
                msgs.append({"role": "tool", "tool_call_id": cid, "content": nxt.get("content")})
                where.append(i + 1)
                i += 2
                continue
        msgs.append(out)
        where.append(i)
        i += 1
    msgs, where, done = repair_pairing(msgs, where, NO_RESULT)
    src: dict[str, Any] = {"format": "mini-swe-agent", "file": source}
    if line is not None:
        src["line"] = line
    if isinstance(obj.get("trajectory_format"), str):
        src["trajectory_format"] = obj["trajectory_format"]
    if isinstance(obj.get("instance_id"), str):
        src["instance_id"] = obj["instance_id"]
    dropped = Dropped()  # top-level keys: the messages read, ``info`` the run's record (docs/formats.md)
    dropped.check(obj, "", ("messages", "info", "trajectory_format", "instance_id"))
    src["steps"] = where
    if exits:
        src["exit"] = exits[-1] if len(exits) == 1 else exits
    out_notes = [f"{v} {k}" for k, v in sorted(notes.items())]
    for key in ("unanswered", "orphan_results"):
        if done[key]:
            src[key] = done[key]
    if done["unanswered"]:
        out_notes.append(f"{len(done['unanswered'])} calls without a result got the result {NO_RESULT!r}")
    if done["orphan_results"]:
        out_notes.append(f"{len(done['orphan_results'])} results without their call became user messages")
    dropped.finish(src, out_notes)
    if out_notes:
        src["notes"] = out_notes
    return {"messages": msgs, SOURCE_KEY: src}, out_notes
