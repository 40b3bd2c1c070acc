"""Retention probes: the items a compaction should keep, taken mechanically from the part it
replaces, and which of them survive in what a model is sent.

Kinds: ``task`` (the task's requirements: its first sentences and those that state what is
wanted), ``user`` (the user's later words), ``files_modified``, ``errors`` (the distinctive error
lines met), ``commands`` and ``decisions`` (the assistant's statements of what it decided or
did). A probe is a short exact string (whitespace folded); it survives when that string occurs
in the text a model is sent — message contents and tool calls, never xcompact's bookkeeping
keys (the stored originals, the archive). Exact-string scoring is fair for extractive summaries
and the evidence section; a model's paraphrase of a sentence does not count."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..model.conversation import call_parts, content_text
from .extract import error_lines, evidence_of, output_text, shell_text
from .harness import harness_keys, is_harness, without_injected
from .section import item_key

KINDS = ("task", "user", "files_modified", "errors", "commands", "decisions")
#: The kinds a continuing agent cannot do without (the evidence issue's target).
ESSENTIAL = ("task", "user", "files_modified", "errors")
PROBE_CHARS = 60
_SENTENCE = re.compile(r"(?<=[.!?:])\s+|\n+")
_REQUIREMENT = re.compile(r"(?i)\b(should|must|need|needs|expected|expect|instead|fails?|error|raises?|wrong|"
                          r"want|please|make sure|do not|don't|never|always|required?|bug|incorrect|return)\b")
_DECISION = re.compile(r"(?i)\b(i will|i'll|i've|let's|decided|the fix|the issue is|the problem is|root cause|"
                       r"i have (?:updated|changed|created|fixed|added|removed)|instead of|switch(?:ed)? to)\b")
_WORDS = re.compile(r"[A-Za-z]{2,}")


@dataclass(frozen=True)
class Probe:
    kind: str
    text: str  # what must occur in the sent text (whitespace folded)


def fold(text: str) -> str:
    return " ".join(text.split())


def _probe(kind: str, text: str) -> Probe | None:
    t = fold(text)
    t = t[:PROBE_CHARS].rstrip()
    return Probe(kind, t) if len(_WORDS.findall(t)) >= 2 or kind == "files_modified" else None


def _sentences(text: str) -> list[str]:
    out = []
    for s in _SENTENCE.split(text):
        s = s.strip().strip("`*#>-").strip()
        if len(s.split()) >= 4 and len(s) <= 400 and not s.startswith(("```", "<")):
            out.append(s)
    return out


def probes_of(head: list[dict[str, Any]], task: dict[str, Any] | bool | None = True) -> list[Probe]:
    """The probes of ``head`` (the messages a compaction replaces), deduplicated, in order.
    ``task``: the conversation's task message (its sentences are ``task`` probes, other user
    messages' ``user`` probes); True: the first user message of ``head`` that is the user speaking."""
    keys = harness_keys(head)
    out: list[Probe] = []
    seen_task = task is False or task is None
    for m in head:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        text = content_text(m.get("content"))
        if role == "user" and text.strip() and not is_harness(text, keys):
            sents = _sentences(without_injected(text))
            if (task is True and not seen_task) or (isinstance(task, dict) and m is task):
                seen_task = True
                picked = sents[:3] + [s for s in sents[3:] if _REQUIREMENT.search(s)]
                out += [p for s in picked[:12] if (p := _probe("task", s))]
            else:
                out += [p for s in sents[:5] if (p := _probe("user", s))]
        elif role == "assistant":
            out += [p for s in _sentences(text) if _DECISION.search(s) and (p := _probe("decisions", s))][:3]
            for call in m.get("tool_calls") or ():
                parts = call_parts(call)
                if parts is None:
                    continue
                cmd, patch = shell_text(*parts)
                if cmd is not None and patch is None and (p := _probe("commands", cmd.split("\n", 1)[0])):
                    out.append(p)
        elif role == "tool":
            out += [p for line in error_lines(output_text(m.get("content")))[-3:] if (p := _probe("errors", line))]
    ev = evidence_of(head)
    for item in ev.items("Files changed"):
        p = _probe("files_modified", item_key("Files changed", item))
        if p:
            out.append(p)
    return list(dict.fromkeys(out))


def sent_text(messages: Iterable[dict[str, Any]]) -> str:
    """What a model is sent of ``messages``: contents, tool names and inputs, whitespace folded;
    a Codex result's JSON read as its output, as the probes are (a model reads JSON escapes)."""
    parts: list[str] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        parts.append(output_text(content) if m.get("role") == "tool" else content_text(content))
        for call in m.get("tool_calls") or ():
            cp = call_parts(call)
            if cp is not None:
                parts.append(cp[0] + " " + cp[1])
    return fold("\n".join(parts))


def retention(probes: list[Probe], sent: str) -> dict[str, tuple[int, int]]:
    """Per kind: (probes found in ``sent``, probes)."""
    out: dict[str, tuple[int, int]] = {}
    for p in probes:
        found, total = out.get(p.kind, (0, 0))
        out[p.kind] = (found + (p.text in sent), total + 1)
    return out
