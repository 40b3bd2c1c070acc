"""What a compaction kept: tokens by category before and after, and the retention of the probes
taken from the part it replaced (``probes.probes_of``), per kind and per 1,000 tokens.

One implementation for ``xcompact eval`` and ``bench/bench_evidence.py``. The replaced part of a
conversation is every message that at least one of the compactions compared does not hold
unchanged (compared by value), so several settings are measured on the same probes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..model.conversation import call_parts, content_text
from .harness import task_index
from .probes import ESSENTIAL, KINDS, Probe, probes_of, retention, sent_text

CATEGORIES = ("system", "user", "assistant", "tool_calls", "tool_results", "reasoning", "images")


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


def tokens_by_category(messages: list[dict[str, Any]], count: Callable[[str], int]) -> dict[str, int]:
    """Tokens of the texts a model is sent, by what they are (the per-message overhead aside)."""
    out = dict.fromkeys(CATEGORIES, 0)
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        content = m.get("content")
        if isinstance(content, list):
            out["images"] += sum(1 for p in content if isinstance(p, dict) and "image" in str(p.get("type", "")))
        text = content_text(content)
        key = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
               "tool": "tool_results"}.get(str(role))
        if key and text:
            out[key] += count(text)
        for call in m.get("tool_calls") or ():
            parts = call_parts(call)
            if parts is not None:
                out["tool_calls"] += count(parts[0]) + count(parts[1])
        for r in ("reasoning", "reasoning_content"):
            if isinstance(m.get(r), str):
                out["reasoning"] += count(m[r])
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


def evaluate(before: list[dict[str, Any]], afters: Mapping[str, list[dict[str, Any]]],
             count_text: Callable[[str], int], count_conversation: Callable[[list[dict[str, Any]]], int]
             ) -> dict[str, Evaluation]:
    """Each compaction in ``afters`` (name -> its messages) of the conversation ``before`` (OpenAI
    form, as ``formats.read`` gives any format), measured on the probes of the part any of them
    replaced."""
    at = task_index(before)
    probes = probes_of(replaced_part(before, list(afters.values())), before[at] if at is not None else None)
    cats_before = tokens_by_category(before, count_text)
    tokens_before = count_conversation(before)
    out = {}
    for name, after in afters.items():
        out[name] = Evaluation(retention(probes, sent_text(after)), tokens_before, count_conversation(after),
                               dict(cats_before), tokens_by_category(after, count_text))
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
