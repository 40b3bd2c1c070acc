"""Compaction strategies of one's own (``compact --strategy MODULE:ATTR``), in the shape of
nagents' ``CompactionStrategy``: ``should_compact(request)`` decides, ``compact(request)``
returns the messages to keep (plain or ``async`` methods alike).

xcompact keeps what makes its own tiers safe: the strategy sees a copy of the conversation
without its system message; what it returns must be the conversation's last messages (new text
goes in ``CompactionResult.summary``), so the messages it drops are archived as a summary round
and ``restore`` gives them back exactly; tool pairing must hold, a user message must stay, the
result must be smaller, and the round must restore to the input. Anything else fails that one
conversation (left as it was), never the batch."""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from typing import Any

from ..errors import BackendError, UsageError
from ..model.plugins import load_plugin
from ..model.tokens import TokenCounter
from ..status import Status
from .cut import Cut, build_summarised, validate_replacement
from .restore import restore_conversation


@dataclass(frozen=True)
class CompactionRequest:
    """What a strategy decides on: the messages after the system message (a copy), their
    tokens in the conversation's encoding, the dump's ``tokens_used`` (0 when unknown)."""

    messages: list[dict[str, Any]]
    estimated_tokens: int
    actual_input_tokens: int = 0
    system: dict[str, Any] | None = None
    model: str | None = None


@dataclass
class CompactionResult:
    """The messages to keep (the conversation's last ones) and, optionally, a summary of the rest."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None


def load_strategy(spec: str) -> Any:
    """The strategy ``spec`` names: an object with ``should_compact`` and ``compact``, or a class
    (or factory) that makes one with no arguments."""
    obj = load_plugin(spec, "xcompact.strategies", "--strategy")
    if inspect.isclass(obj) or not hasattr(obj, "compact"):
        from ..model.plugins import prints_to_stderr

        try:
            with prints_to_stderr():  # its constructor's output too
                obj = obj()
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"--strategy {spec}: making it failed: {type(exc).__name__}: {exc}") from None
    missing = [m for m in ("should_compact", "compact") if not callable(getattr(obj, m, None))]
    if missing:
        raise UsageError(f"--strategy {spec}: a strategy needs should_compact(request) and compact(request); "
                         f"it has no {' or '.join(missing)}")
    return obj


async def _call(method: Any, request: CompactionRequest) -> Any:
    """A strategy's method, what it writes to stdout (print, fd 1, a child process) sent to stderr."""
    from ..model.plugins import call_plugin

    return await call_plugin(method, request)


async def apply_strategy(dump: dict, strategy: Any, spec: str, counter: TokenCounter,
                         keep_originals: bool = True) -> tuple[dict, Status, dict[str, Any]]:
    messages = dump["messages"]
    start = 1 if messages and messages[0].get("role") == "system" else 0
    tokens_used = dump.get("tokens_used")
    request = CompactionRequest(messages=copy.deepcopy(messages[start:]),
                                estimated_tokens=counter.conversation(messages),
                                actual_input_tokens=tokens_used if isinstance(tokens_used, int) else 0,
                                system=copy.deepcopy(messages[0]) if start else None,
                                model=dump.get("model") if isinstance(dump.get("model"), str) else None)
    fields: dict[str, Any] = {"strategy": spec}
    try:
        if not await _call(strategy.should_compact, request):
            return dump, Status.UNDER_THRESHOLD, {**fields, "reason": "the strategy's should_compact said no"}
        result = await _call(strategy.compact, request)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001  a plug-in's failure (SystemExit included) is one conversation's
        return dump, Status.SUMMARIZE_FAILED, {**fields, "error": f"strategy {spec} raised "
                                               f"{type(exc).__name__}: {str(exc)[:200]}"}
    try:
        new, kept = _replacement(dump, result, start, keep_originals, counter, request.estimated_tokens)
    except BackendError as exc:
        return dump, Status.SUMMARIZE_FAILED, {**fields, "error": f"strategy {spec}: {exc}"}
    if new is dump:
        return dump, Status.NOTHING_TO_CONDENSE, {**fields, "reason": "the strategy kept every message"}
    return new, Status.SUMMARIZED, {**fields, "summarized_count": len(messages) - start - kept, "kept_count": kept}


def _replacement(dump: dict, result: Any, start: int, keep_originals: bool, counter: TokenCounter,
                 tokens_before: int) -> tuple[dict, int]:
    """The new dump for a strategy's result, checked; BackendError saying what is wrong."""
    kept = getattr(result, "messages", None)
    summary = getattr(result, "summary", None)
    if not isinstance(kept, list) or not kept:
        raise BackendError("compact() must return a CompactionResult with a nonempty list of messages")
    if summary is not None and not isinstance(summary, str):
        raise BackendError(f"CompactionResult.summary must be text or None, got {type(summary).__name__}")
    messages = dump["messages"]
    body = messages[start:]
    if len(kept) > len(body) or kept != body[len(body) - len(kept):]:
        raise BackendError("the messages returned are not the conversation's last messages: return a suffix of "
                           "request.messages unchanged, and put any new text in CompactionResult.summary")
    if len(kept) == len(body):
        return dump, len(kept)
    cut_at = len(messages) - len(kept)
    cut = Cut(0 if start else None, list(range(start, cut_at)), list(range(cut_at, len(messages))), None)
    text = summary if summary and summary.strip() else "(The earlier messages were removed by a compaction strategy.)"
    new = build_summarised(dump, cut, text, preserve_system=True, keep_originals=keep_originals)
    validate_replacement(dump, new)
    if counter.conversation(new["messages"]) >= tokens_before:
        raise BackendError("the result is not smaller than the conversation (in tokens)")
    if keep_originals and restore_conversation(new)[0] != dump:
        raise BackendError("the round would not restore to the conversation it replaced")
    return new, len(kept)


def make_strategy_transform(spec: str, counter: TokenCounter, keep_originals: bool = True) -> tuple[Any, None]:
    strategy = load_strategy(spec)

    async def transform(dump: dict, settings: Any) -> tuple[dict, Status, dict[str, Any]]:
        return await apply_strategy(dump, strategy, spec, counter, keep_originals)

    return transform, None
