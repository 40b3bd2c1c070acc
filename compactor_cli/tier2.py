"""Drive one tier-2 round: cut, ask the backend, check the answer, commit or leave untouched.

On any failure (backend error, empty answer, missing sections, over budget after one retry
asking for a shorter summary, a result not smaller than what it replaces, a replacement that
breaks tool pairing) the conversation is returned exactly as it was, with SUMMARIZE_FAILED and
the reason. An error text is never written as a summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .backends import Backend, SummaryRequest
from .conversation import content_text
from .errors import BackendError
from .sections import canonical_summary
from .status import Status
from .summarize import (DEFAULT_KEEP_RECENT, DEFAULT_MAX_SUMMARY_TOKENS, build_summarised, choose_cut_point,
                        validate_replacement)
from .tokens import MemoTokens, TokenCounter


@dataclass
class SummarizeOptions:
    keep_recent: int = DEFAULT_KEEP_RECENT
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS
    preserve_system: bool = False
    keep_originals: bool = True


def _system_text(messages: list[dict], index: int | None) -> str:
    if index is None:
        return ""
    return content_text(messages[index].get("content"))


async def summarize_conversation(dump: dict, opts: SummarizeOptions, backend: Backend,
                                 counter: TokenCounter) -> tuple[dict, Status, dict[str, Any]]:
    """One summary round. Returns (dump, status, report fields)."""
    messages = dump["messages"]
    cut = choose_cut_point(messages, opts.keep_recent)
    fields: dict[str, Any] = {"backend": backend.name, "model": backend.model}
    if not cut.head:
        return dump, Status.NOTHING_TO_CONDENSE, fields
    request = SummaryRequest(head=[messages[i] for i in cut.head], system_text=_system_text(messages, cut.system),
                             max_tokens=opts.max_summary_tokens)
    calls = 0
    try:
        answer = await backend.summarize(request)
        calls += answer.calls
        summary = canonical_summary(answer.text)
        n = counter.text(summary)
        if n > opts.max_summary_tokens:
            answer = await backend.summarize(SummaryRequest(request.head, request.system_text, request.max_tokens,
                                                            previous_tokens=n))
            calls += answer.calls
            summary = canonical_summary(answer.text)
            n = counter.text(summary)
            if n > opts.max_summary_tokens:
                raise BackendError(f"the summary has {n} tokens, over the limit of {opts.max_summary_tokens} "
                                   "even after a retry asking for a shorter one")
        new = build_summarised(dump, cut, summary, opts.preserve_system, opts.keep_originals)
        validate_replacement(dump, new)
        memo = MemoTokens(counter)
        before, after = memo.conversation(messages), memo.conversation(new["messages"])
        if after >= before:
            raise BackendError(f"the result ({after} tokens) is not smaller than what it replaces ({before} tokens)")
    except BackendError as exc:
        fields.update(model_calls=calls, error=str(exc))
        return dump, Status.SUMMARIZE_FAILED, fields
    fields.update(summarized_count=len(cut.head), kept_count=len(cut.kept), summary_tokens=n,
                  forced_user=cut.forced_user is not None, model_calls=calls, cached=answer.cached,
                  tokens_before=before, tokens_after=after)
    return new, Status.SUMMARIZED, fields


def make_backend(settings_extra: dict[str, Any], counter: TokenCounter) -> Backend:
    """The backend named by ``--backend`` (``auto``: openai when its environment is set)."""
    from .backends import choose_backend_name

    name = choose_backend_name(settings_extra.get("backend", "auto"))
    if name == "extractive":
        from .backends.extractive import ExtractiveBackend

        return ExtractiveBackend(counter.text)
    if name == "openai":
        from .backends.openai_backend import OpenAIBackend, OpenAIOptions

        return OpenAIBackend(OpenAIOptions(**settings_extra.get("openai", {})), counter.text)
    raise ValueError(f"unknown backend {name!r}")


def make_summarize_transform(settings_extra: dict[str, Any], counter: TokenCounter):
    """An async transform for the pipeline, and the backend (to close after the run)."""
    backend = make_backend(settings_extra, counter)
    opts = SummarizeOptions(keep_recent=settings_extra.get("keep_recent", DEFAULT_KEEP_RECENT),
                            max_summary_tokens=settings_extra.get("max_summary_tokens", DEFAULT_MAX_SUMMARY_TOKENS),
                            preserve_system=settings_extra.get("preserve_system", False),
                            keep_originals=settings_extra.get("keep_originals", True))

    async def transform(dump: dict, settings: Any) -> tuple[dict, Status, dict[str, Any]]:
        return await summarize_conversation(dump, opts, backend, counter)

    return transform, backend


def summarize_dump(dump: dict, keep_recent: int = DEFAULT_KEEP_RECENT,
                   max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS, preserve_system: bool = False,
                   keep_originals: bool = True, backend: Backend | None = None,
                   encoding: str = "cl100k_base") -> tuple[dict, Status, dict[str, Any]]:
    """Library entry point: one summary round on a dict, by default with the offline
    extractive backend. Returns (dump, status, details); the input is not modified."""
    import asyncio

    counter = TokenCounter(encoding)
    if backend is None:
        from .backends.extractive import ExtractiveBackend

        backend = ExtractiveBackend(counter.text)
    opts = SummarizeOptions(keep_recent, max_summary_tokens, preserve_system, keep_originals)
    return asyncio.run(summarize_conversation(dump, opts, backend, counter))
