"""SWE-agent trajectories (``.traj``: ``{"environment", "trajectory", "history", "info"}``).

``history`` is what the model saw; it is read into an OpenAI dump (lossy, documented):

- function calling: assistant ``tool_calls`` stay as they are; ``tool`` messages answer the
  first ID of their ``tool_call_ids``.
- text actions: an assistant message with an ``action`` becomes a call of ``bash`` with that
  command (ID ``call_<n>``, the n-th action), its content (thought and action block) is kept; the
  user message that follows it (the observation) becomes that call's result. An action whose
  observation is not in the history (the last one, usually ``submit``) takes the observation of
  its step in ``trajectory`` (listed in ``source.from_trajectory``), else a result saying none
  was recorded.
- ``thought``, ``action``, ``agent``, ``message_type`` are not carried (the content holds them);
  demonstration messages (``is_demo``) stay user messages. Any other key of a history entry or
  of a tool call, and any top-level key besides ``history``, ``trajectory``, ``info``,
  ``environment`` and ``replay_config``, is counted in ``source.dropped_fields`` and noted.

``source.steps[i]`` is the ``history`` index message i came from; ``source.exit_status`` is
``info.exit_status``.
"""

from __future__ import annotations

from typing import Any, cast

from .base import SOURCE_KEY, Dropped, fail, jdump, type_name
from .repair import repair_pairing

NO_RESULT = "[no observation recorded in the SWE-agent trajectory]"
ROLES = ("system", "user", "assistant", "tool")
#: Keys of a history entry that are read, held by the content (``thought``, ``action``), or
#: SWE-agent's bookkeeping (docs/formats.md); any other is counted in source.dropped_fields.
ENTRY_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_ids", "tool_call_id", "thought", "action",
                        "agent", "message_type", "is_demo"})
#: Top-level keys: the history read, the rest the run's records (exit_status and the
#: observations of ``trajectory`` are read; the model of ``replay_config`` names the encoding).
TOP_KEYS = frozenset({"history", "trajectory", "info", "environment", "replay_config"})


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("history"), list) and (
        "trajectory" in obj or "info" in obj or all(isinstance(m, dict) and "role" in m for m in obj["history"][:3]))


def read_swe_agent(obj: Any, source: str | None = None, line: int | None = None) -> tuple[dict, list[str]]:
    if not isinstance(obj, dict) or not isinstance(obj.get("history"), list):
        raise fail("a SWE-agent trajectory needs a 'history' list")
    history = obj["history"]
    trajectory = cast(list, obj.get("trajectory")) if isinstance(obj.get("trajectory"), list) else []
    msgs: list[dict] = []
    where: list[Any] = []
    from_traj: list[str] = []
    n_action = 0
    pending: str | None = None  # the text action awaiting its observation
    dropped = Dropped()
    dropped.check(obj, "", TOP_KEYS)
    for i, m in enumerate(history):
        if not isinstance(m, dict):
            raise fail(f"a history entry must be an object, got {type_name(m)}", f"/history/{i}")
        dropped.check(m, "history[].", ENTRY_KEYS)
        role = m.get("role")
        if role not in ROLES:
            raise fail(f"unknown role {role!r} in the history", f"/history/{i}/role")
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            content = jdump(content)
        if role == "tool":
            ids = m.get("tool_call_ids") or ([m["tool_call_id"]] if isinstance(m.get("tool_call_id"), str) else [])
            if not isinstance(ids, list) or not all(isinstance(c, str) for c in ids):
                raise fail(f"'tool_call_ids' must be a list of strings, got {type_name(ids)}"
                           + (" holding other values" if isinstance(ids, list) else ""), f"/history/{i}/tool_call_ids")
            for k, cid in enumerate(ids or [None]):
                out = {"role": "tool",
                       "content": content if k == 0 else f"[the result of {ids[0]} answers this call too]"}
                if cid is not None:
                    out["tool_call_id"] = cid
                msgs.append(out)
                where.append(i)
            continue
        if role == "user" and pending is not None:
            msgs.append({"role": "tool", "tool_call_id": pending, "content": content})
            where.append(i)
            pending = None
            continue
        if pending is not None:  # an action whose observation is not in the history
            _observation_from_trajectory(msgs, where, trajectory, n_action, pending, from_traj, i)
            pending = None
        out = {"role": role, "content": content}
        if role == "assistant":
            calls = m.get("tool_calls")
            if isinstance(calls, list) and calls:
                out["tool_calls"] = [{"id": c.get("id"), "type": c.get("type", "function"),
                                      "function": c.get("function")}
                                     for c in calls if isinstance(c, dict)]
                for c in calls:
                    dropped.check(c, "history[].tool_calls[].", ("id", "type", "function"))
            elif isinstance(m.get("action"), str) and m["action"].strip():
                n_action += 1
                pending = f"call_{n_action}"
                out["tool_calls"] = [{"id": pending, "type": "function",
                                      "function": {"name": "bash",
                                                   "arguments": jdump({"command": m["action"].strip()})}}]
        msgs.append(out)
        where.append(i)
    if pending is not None:
        _observation_from_trajectory(msgs, where, trajectory, n_action, pending, from_traj, len(history) - 1)
    msgs, where, done = repair_pairing(msgs, where, NO_RESULT)
    info = cast(dict, obj.get("info")) if isinstance(obj.get("info"), dict) else {}
    src: dict[str, Any] = {"format": "swe-agent", "file": source}
    if line is not None:
        src["line"] = line
    src["steps"] = where
    if isinstance(info.get("exit_status"), str):
        src["exit_status"] = info["exit_status"]
    notes = []
    if from_traj:
        src["from_trajectory"] = from_traj
        notes.append(f"{len(from_traj)} observations taken from the trajectory")
    for key in ("unanswered", "orphan_results"):
        if done[key]:
            src[key] = done[key]
    if done["unanswered"]:
        notes.append(f"{len(done['unanswered'])} actions without an observation got the result {NO_RESULT!r}")
    if done["orphan_results"]:
        notes.append(f"{len(done['orphan_results'])} results without their call became user messages")
    dropped.finish(src, notes)
    if notes:
        src["notes"] = notes
    return {"messages": msgs, SOURCE_KEY: src}, notes


def _observation_from_trajectory(msgs: list, where: list, trajectory: list, n_action: int, cid: str,
                                 from_traj: list, at: int) -> None:
    step = trajectory[n_action - 1] if 0 < n_action <= len(trajectory) else None
    obs = step.get("observation") if isinstance(step, dict) else None
    if isinstance(obs, str):
        msgs.append({"role": "tool", "tool_call_id": cid, "content": obs})
        where.append(f"trajectory/{n_action - 1}")
        from_traj.append(cid)
