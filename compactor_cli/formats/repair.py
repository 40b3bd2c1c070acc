"""Keep every tool call of a converted log paired with its result, saying what it did.

Logs are not requests: a call may have no recorded result (the run stopped), a result may come
after other messages, or answer a call the log does not hold. ``repair_pairing`` makes the
OpenAI pairing hold without dropping anything: a late result moves up to just after its call,
a call with no result gets a result saying so, a result with no call becomes a user message
naming its ID. Each message keeps its provenance (``where``) through the moves.
"""

from __future__ import annotations

import itertools
from typing import Any

from ..model.conversation import content_text as _text  # one owner of 'the text of a content value'


def repair_pairing(messages: list[dict], where: list[Any], no_result: str) -> tuple[list[dict], list[Any], dict]:
    """(messages, where, what was done: {"unanswered": [ids], "orphan_results": [ids], "moved": n})."""
    n = len(messages)
    consumed = [False] * n
    placed: dict[int, list[int]] = {}
    unanswered: list[Any] = []  # the IDs as the log has them (a wrong type is reported by the checks)
    for i, m in enumerate(messages):
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        if not calls or not isinstance(calls, list):  # a wrong type is reported by the checks
            continue
        ids = [c.get("id") for c in calls if isinstance(c, dict)]
        found: list[int] = []
        for cid in ids:
            for j in range(i + 1, n):
                mj = messages[j]
                if mj.get("role") == "assistant" and any(isinstance(c, dict) and c.get("id") == cid
                                                         for c in mj.get("tool_calls") or ()):
                    break  # the ID is called again: a later result is that call's
                if not consumed[j] and mj.get("role") == "tool" and mj.get("tool_call_id") == cid:
                    consumed[j] = True
                    found.append(j)
                    break
            else:
                unanswered.append(cid)
                found.append(-len(unanswered))  # a synthetic result: unanswered[-1 - j]
        placed[i] = found
    out: list[dict] = []
    out_where: list[Any] = []
    orphans: list[str] = []
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            if consumed[i]:
                continue  # written after its call
            cid = m.get("tool_call_id")
            orphans.append(cid if isinstance(cid, str) else "")
            out.append({"role": "user", "content": f"[tool result {cid}]\n{_text(m.get('content'))}"})
            out_where.append(where[i])
            continue
        out.append(m)
        out_where.append(where[i])
        for j in placed.get(i, ()):
            if j < 0:
                cid = unanswered[-1 - j]
                out.append({"role": "tool", "tool_call_id": cid, "content": no_result})
                out_where.append(where[i])
            else:
                out.append(messages[j])
                out_where.append(where[j])
    done = {"unanswered": unanswered, "orphan_results": orphans, "moved": _moved(messages, out)}
    return out, out_where, done


def _moved(before: list[dict], after: list[dict]) -> int:
    """Tool results whose position relative to the other messages changed."""
    order = {id(m): k for k, m in enumerate(before)}
    seq = [order[id(m)] for m in after if id(m) in order]
    return sum(1 for a, b in itertools.pairwise(seq) if b < a)
