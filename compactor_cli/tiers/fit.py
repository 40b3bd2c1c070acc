"""Fit to a length (``toolcall --fit TOKENS``): the least tier-1 compaction that brings a record
to at most TOKENS, for training data with a fixed context (the hermes trajectory compressor fits
SFT records to 15,250 tokens).

Tool results are cleared in order of age (the largest ``keep`` that fits, found by bisection:
each placeholder is written only where it costs fewer tokens, so keeping fewer never costs
more); when clearing every result is not enough, the arguments of the old calls are cut too
(``truncate_inputs`` at 1,000, then 200, then 50 characters per value). A record that still does
not fit is written compacted as far as tier 1 goes, and counted: it is never dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model.tokens import MemoTokens, TokenCounter
from .toolcall import ToolCallCompactResult

#: The argument cuts tried, in characters per value, once every result is cleared.
INPUT_CUTS = (1000, 200, 50)

Reclaim = Callable[[dict, int, "int | None"], tuple[Any, ToolCallCompactResult]]


@dataclass
class Fitted:
    dump: Any
    result: ToolCallCompactResult
    keep: int  # the results kept whole
    tokens_before: int
    tokens_after: int
    fits: bool
    truncate_inputs: int | None = None  # the argument cut it needed, if any


def fit_tool_results(dump: dict, limit: int, counter: TokenCounter, reclaim: Reclaim,
                     truncate_inputs: int | None = None) -> Fitted:
    """The largest ``keep`` (and, past keep 0, the mildest argument cut) under which ``reclaim``
    brings ``dump`` to at most ``limit`` tokens; the smallest result when none does."""
    memo = MemoTokens(counter)
    messages = dump["messages"]
    before = memo.conversation(messages)
    results = sum(1 for m in messages if m.get("role") == "tool")
    if before <= limit:
        return Fitted(dump, ToolCallCompactResult(), results, before, before, True)

    def attempt(keep: int, cut: int | None) -> tuple[Any, ToolCallCompactResult, int]:
        new, res = reclaim(dump, keep, cut)
        out = new["messages"] if isinstance(new, dict) else new
        return new, res, memo.conversation(out)

    lo, hi = 0, results  # the answer is in [lo, hi]; size(hi + 1 ...) is over
    best: tuple[Any, ToolCallCompactResult, int, int] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        new, res, size = attempt(mid, truncate_inputs)
        if size <= limit:
            best = (new, res, size, mid)
            lo = mid + 1
        else:
            hi = mid - 1
    if best is not None:
        return Fitted(best[0], best[1], best[3], before, best[2], True, truncate_inputs)
    new, res, size = attempt(0, truncate_inputs)
    cut = truncate_inputs
    for c in INPUT_CUTS:
        if truncate_inputs is not None and c >= truncate_inputs:
            continue
        new, res, size = attempt(0, c)
        cut = c
        if size <= limit:
            break
    return Fitted(new, res, 0, before, size, size <= limit, cut)
