"""What a tier returns, typed once for the tiers and the engine that runs them.

A tier is a pure function of a dump: ``(dump, Status, details)``. ``details`` become report
keys of the conversation (``reclaimed_count``, ``rounds``, ``summary_tokens``...; see
schemas/report.schema.json); the per-record step reads four of them itself: ``warning`` (one
line for stderr, not a report key), ``tokens_before``/``tokens_after`` (the tier counted them
already) and ``error`` (why it failed)."""

from __future__ import annotations

from typing import Any, TypedDict

from ..model.conversation import Dump
from ..status import Status


class TierDetails(TypedDict, total=False):
    """The keys of ``details`` the engine reads; a tier may add any report key beside them."""

    warning: str
    tokens_before: int
    tokens_after: int
    error: str


TierResult = tuple[Dump, Status, dict[str, Any]]
