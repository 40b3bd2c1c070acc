"""Summariser backends: each turns the head of a conversation into summary text.

A backend has ``name``, ``model`` and ``async summarize(request) -> Answer``. The tier-2 driver
(``tier2.py``) checks the answer's sections and budget; backends only write text."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class SummaryRequest:
    """What a backend summarises: the head messages, the replaced system prompt's text, the
    token budget, and (on a retry) how long the previous answer was."""

    head: list[dict]
    system_text: str
    max_tokens: int
    previous_tokens: int | None = None


@dataclass
class Answer:
    text: str
    calls: int = 0  # model requests made
    cached: bool = False


class Backend(Protocol):
    name: str
    model: str | None

    async def summarize(self, request: SummaryRequest) -> Answer: ...


def choose_backend_name(requested: str, environ: Any = None) -> str:
    """``auto`` is openai when OPENAI_API_KEY or OPENAI_BASE_URL is set, else extractive."""
    env = os.environ if environ is None else environ
    if requested != "auto":
        return requested
    return "openai" if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL") else "extractive"
