"""Summariser backends: each turns the head of a conversation into summary text.

A backend has ``name``, ``model``, ``async summarize(request) -> Answer`` and ``async aclose()``
(its connections, its cache). The tier-2 driver (``tiers/summarize.py``) checks the answer's
sections and budget; backends only write text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class SummaryRequest:
    """What a backend summarises: the head messages, the replaced system prompt's text, the
    token budget, and (on a retry) how long the previous answer was."""

    head: list[dict[str, Any]]
    system_text: str
    max_tokens: int
    previous_tokens: int | None = None


@dataclass
class Answer:
    text: str
    calls: int = 0  # model requests made (retries and a repair turn included)
    cached: bool = False
    repaired: bool = False  # a repair turn was needed (sections missing or repeated, over budget, cut off)
    structured: str | None = None  # how the model answered: "json" (response_format) or "markdown"
    #: the server's usage of the requests, summed (prompt_tokens, completion_tokens, cached_tokens);
    #: empty when the server reported none (and for a backend without a server)
    usage: dict[str, int] = field(default_factory=dict)


class Backend(Protocol):
    """What the tiers and the engine call. ``name`` and ``model`` are read-only here, so a class
    attribute (``name = "extractive"``) and an instance attribute both satisfy it."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    async def summarize(self, request: SummaryRequest) -> Answer: ...

    async def aclose(self) -> None: ...
