"""What a compaction kept: tokens by category before and after, and the retention of the probes
taken from the part it replaced (``probes.probes_of``), per kind and per 1,000 tokens.

One implementation for ``xcompact eval`` and ``bench/bench_evidence.py``. The replaced part of a
conversation is every message that at least one of the compactions compared does not hold
unchanged (compared by value), so several settings are measured on the same probes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..model.conversation import call_parts
from .harness import task_index
from .probes import ESSENTIAL, KINDS, Probe, probes_of, retention, sent_text

CATEGORIES = ("system", "user", "assistant", "tool_calls", "tool_results", "reasoning", "images", "overhead")


def _key(message: Any) -> bytes:
    try:
        return orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a value orjson cannot write (an exact number object): compare by its repr
        return repr(message).encode()


def replaced_part(before: list[dict[str, Any]], afters: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The messages of ``before`` (its system message aside) that at least one of ``afters`` does
    not hold unchanged."""
    kept = [{_key(m) for m in after} for after in afters]
    body = before[1:] if before and isinstance(before[0], dict) and before[0].get("role") == "system" else before
    return [m for m in body if any(_key(m) not in k for k in kept)]


def tokens_by_category(messages: list[dict[str, Any]], counter: Any) -> dict[str, int]:
    """The tokens ``counter`` (a model.tokens.TokenCounter) counts for ``messages``, by what they
    are: they sum to ``counter.conversation(messages)`` exactly, the per-message and per-call
    framing, roles and names under ``overhead``; an image's tokens (its pixels, as its vendor
    bills it) under ``images``; a tool call's name and arguments under ``tool_calls``."""
    from ..model.images import IMAGE_PART_TYPES, image_tokens
    from ..model.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE, TOKENS_PER_NAME, TOKENS_PER_TOOL_CALL

    out = dict.fromkeys(CATEGORIES, 0)
    out["overhead"] += REPLY_PRIMING
    for m in messages:
        role = m.get("role", "")
        out["overhead"] += TOKENS_PER_MESSAGE + counter.short(role)
        key = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
               "tool": "tool_results"}.get(role if isinstance(role, str) else "", "user")
        content = m.get("content")
        if isinstance(content, str):
            out[key] += counter.text(content)
        elif isinstance(content, list):
            for p in content:
                if isinstance(p, dict):
                    text = p.get("text")
                    if isinstance(text, str):
                        out[key] += counter.text(text)
                    elif p.get("type") in IMAGE_PART_TYPES:
                        out["images"] += image_tokens(p)
        if len(m) <= (2 if "content" in m else 1):
            continue  # role and content only: nothing more counted (as TokenCounter.message)
        name = m.get("name")
        if isinstance(name, str):
            out["overhead"] += TOKENS_PER_NAME + counter.text(name)
        for r in ("reasoning", "reasoning_content"):
            if isinstance(m.get(r), str):
                out["reasoning"] += counter.text(m[r])
        for call in m.get("tool_calls") or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                out["overhead"] += TOKENS_PER_TOOL_CALL
                out["tool_calls"] += counter.short(fn.get("name") or "") + counter.text(fn.get("arguments") or "")
            elif isinstance(call, dict) and isinstance(call.get("custom"), dict):
                parts = call_parts(call)
                if parts is not None:
                    out["overhead"] += TOKENS_PER_TOOL_CALL
                    out["tool_calls"] += counter.short(parts[0]) + counter.text(parts[1])
    return out


@dataclass
class Evaluation:
    """One compaction of one conversation (or of a data set, summed)."""

    retention: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (found, probes)
    tokens_before: int = 0
    tokens_after: int = 0
    categories_before: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    categories_after: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    records: int = 1

    def share(self, kinds: tuple[str, ...] = KINDS) -> float | None:
        """Probes found / probes over ``kinds`` (None: no probe of those kinds)."""
        found = sum(self.retention.get(k, (0, 0))[0] for k in kinds)
        total = sum(self.retention.get(k, (0, 0))[1] for k in kinds)
        return found / total if total else None

    @property
    def essential(self) -> float | None:
        return self.share(ESSENTIAL)

    @property
    def per_1k_tokens(self) -> float:
        """Probes kept per 1,000 tokens of the compacted conversation."""
        found = sum(f for f, _ in self.retention.values())
        return 1000 * found / self.tokens_after if self.tokens_after else 0.0

    def add(self, other: Evaluation) -> None:
        for kind, (f, t) in other.retention.items():
            f0, t0 = self.retention.get(kind, (0, 0))
            self.retention[kind] = (f0 + f, t0 + t)
        self.tokens_before += other.tokens_before
        self.tokens_after += other.tokens_after
        for c in CATEGORIES:
            self.categories_before[c] += other.categories_before[c]
            self.categories_after[c] += other.categories_after[c]
        self.records += other.records

    def as_dict(self) -> dict[str, Any]:
        return {"retention": {k: {"found": f, "probes": t} for k, (f, t) in self.retention.items()},
                "essential": self.essential, "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
                "probes_per_1k_tokens": round(self.per_1k_tokens, 3), "tokens_by_category_before":
                self.categories_before, "tokens_by_category_after": self.categories_after, "records": self.records}


def evaluate(before: list[dict[str, Any]], afters: Mapping[str, list[dict[str, Any]]], counter: Any
             ) -> dict[str, Evaluation]:
    """Each compaction in ``afters`` (name -> its messages) of the conversation ``before`` (OpenAI
    form, as ``formats.read`` gives any format), measured on the probes of the part any of them
    replaced; tokens counted by ``counter`` (a model.tokens.TokenCounter), by category too."""
    at = task_index(before)
    probes = probes_of(replaced_part(before, list(afters.values())), before[at] if at is not None else None)
    cats_before = tokens_by_category(before, counter)
    tokens_before = counter.conversation(before)
    out = {}
    for name, after in afters.items():
        out[name] = Evaluation(retention(probes, sent_text(after)), tokens_before, counter.conversation(after),
                               dict(cats_before), tokens_by_category(after, counter))
    return out


def lost_probes(before: list[dict[str, Any]], afters: Mapping[str, list[dict[str, Any]]],
                after: list[dict[str, Any]]) -> tuple[list[Probe], int]:
    """The probes of ``before`` that ``after`` does not send, and how many probes there are (those
    of the part any of ``afters`` replaced, as ``evaluate`` takes them): what ``show`` and the
    eval page list as lost."""
    at = task_index(before)
    probes = probes_of(replaced_part(before, list(afters.values())), before[at] if at is not None else None)
    sent = sent_text(after)
    return [p for p in probes if retention([p], sent)[p.kind][0] == 0], len(probes)
