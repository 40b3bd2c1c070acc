"""Drive one tier-2 round: cut, ask the backend, check the answer, commit or leave untouched.

On any failure (backend error, empty answer, missing sections, over budget after one retry
asking for a shorter summary, a result not smaller than what it replaces, a replacement that
breaks tool pairing) the conversation is returned exactly as it was, with SUMMARIZE_FAILED and
the reason. An error text is never written as a summary."""

from __future__ import annotations

from typing import Any

from ..backends import Answer, Backend, SummaryRequest
from ..backends.config import BackendConfig
from ..backends.factory import make_backend
from ..backends.sections import canonical_summary, split_evidence, with_evidence
from ..errors import BackendError, UnusableAnswerError
from ..evidence.extract import evidence_of, project_root
from ..evidence.section import merged_groups, parse_evidence, render_evidence
from ..model.conversation import COUNTER_KEY, content_text
from ..model.tokens import MemoTokens, TokenCounter, counter_for
from ..status import Status
from .cut import (
    NotSmallerError,
    build_summarised,
    choose_cut_point,
    split_system,
    summary_note,
    validate_replacement,
)
from .options import (
    DEFAULT_KEEP_RECENT,
    DEFAULT_KEEP_USER_TOKENS,
    DEFAULT_MAX_SUMMARY_TOKENS,
    MIN_SUMMARY_TOKENS,
    SummarizeOptions,
    evidence_room,
)
from .self_check import repeated_sections


def _earlier_evidence(system_text: str) -> tuple[str, dict[str, list[str]] | None]:
    """(the text without an earlier round's evidence section, that section's groups or None)."""
    at = system_text.find("## system_context")
    if at < 0:
        return system_text, None
    rest, body = split_evidence(system_text[at:])
    return system_text[:at] + rest, (parse_evidence(body) if body is not None else None)


def _system_text(messages: list[dict], index: int | None) -> str:
    if index is None:
        return ""
    return content_text(messages[index].get("content"))


async def summarize_conversation(dump: dict, opts: SummarizeOptions, backend: Backend,
                                 counter: TokenCounter) -> tuple[dict, Status, dict[str, Any]]:
    """One summary round. Returns (dump, status, report fields)."""
    messages = dump["messages"]
    memo = MemoTokens(counter)
    cut = choose_cut_point(messages, opts.keep_recent, opts.keep_task, opts.keep_user_tokens, memo.message)
    fields: dict[str, Any] = {"backend": backend.name, "model": backend.model}
    if not cut.head:
        fields["reason"] = "no messages before the kept ones to summarise"
        return dump, Status.NOTHING_TO_CONDENSE, fields
    # the compaction note's tokens count in the summary's budget (it lists what was summarised away)
    note = summary_note(dump, cut, opts.keep_originals)
    budget = max(MIN_SUMMARY_TOKENS, opts.max_summary_tokens - counter.text(note) - 2)
    # a preserved system prompt stays verbatim, so the summariser reads only an earlier summary
    system_text = _system_text(messages, cut.system)
    if opts.preserve_system and cut.system is not None:
        rounds = (dump.get(COUNTER_KEY) or {}).get("summary_rounds")
        system_text = split_system(system_text, rounds if type(rounds) is int else 0)[1]
    # the evidence section is xcompact's own: computed from the transcript for every backend, an
    # earlier round's items kept unless this head says something newer about the same thing
    system_text, earlier = _earlier_evidence(system_text)
    head = [messages[i] for i in cut.head]
    evidence = merged_groups(evidence_of(head, project_root(messages)), earlier)
    room, share = evidence_room(budget, memo.conversation(head), opts.evidence_tokens)
    room -= counter.text(with_evidence("", "-"))
    body = render_evidence(evidence, room, counter.text) if opts.evidence and room > 0 else ""
    evidence_tokens = counter.text(with_evidence("", body)) if body else 0
    # the sections keep their part of the budget; evidence beyond its share adds to the total
    total_budget = budget + max(0, evidence_tokens - share)
    budget = max(MIN_SUMMARY_TOKENS, budget - min(evidence_tokens, share))
    request = SummaryRequest(head=head, system_text=system_text, max_tokens=budget)
    calls = 0
    repaired = False
    usage: dict[str, int] = {}

    def used(more: Any) -> None:  # the server's usage of a backend's requests, summed
        for key, value in (more or {}).items():
            usage[key] = usage.get(key, 0) + value

    try:
        try:
            answer = await backend.summarize(request)
            calls += answer.calls
            used(getattr(answer, "usage", None))
            repaired = answer.repaired
            summary = canonical_summary(answer.text)
            n = counter.text(summary)
            if n > budget:  # a backend that does not keep the budget itself (both built-in ones do)
                answer = await backend.summarize(SummaryRequest(request.head, request.system_text,
                                                                request.max_tokens, previous_tokens=n))
                calls += answer.calls
                used(getattr(answer, "usage", None))
                repaired = repaired or answer.repaired
                summary = canonical_summary(answer.text)
                n = counter.text(summary)
                if n > budget:
                    raise UnusableAnswerError(f"the summary has {n} tokens, over the limit of {budget} "
                                              "even after a retry asking for a shorter one")
            repeated = repeated_sections(summary) if backend.name != "extractive" else []
            if repeated:  # not a summary: the offline sections of the same head instead, and the item says so
                summary = _offline_sections(request, counter, fields, f"the sections {', '.join(repeated)} "
                                                                      "repeat one another")
        except UnusableAnswerError as exc:
            if backend.name == "extractive":
                raise
            # the model answered, but nothing usable even after a repair turn: the offline sections
            # of the same head (the task, the user's words and the evidence never depended on it)
            calls += getattr(exc, "calls", 0)
            used(getattr(exc, "usage", None))
            repaired = repaired or getattr(exc, "repaired", False)
            answer = Answer("", cached=False)
            summary = _offline_sections(request, counter, fields, f"the model's answer could not be used ({exc})")
        summary = with_evidence(summary, body)
        n = counter.text(summary)
        if n > total_budget:  # token merges across the join (never more than a few)
            raise BackendError(f"the summary with its evidence has {n} tokens, over the limit of {total_budget}")
        new = build_summarised(dump, cut, summary, opts.preserve_system, opts.keep_originals)
        validate_replacement(dump, new)
        before, after = memo.conversation(messages), memo.conversation(new["messages"])
        if after >= before:
            raise NotSmallerError(f"the result ({after} tokens) is not smaller than what it replaces "
                                  f"({before} tokens)")
    except BackendError as exc:
        # the requests of a summary that failed, its repair turn included, count too
        calls += getattr(exc, "calls", 0)
        used(getattr(exc, "usage", None))
        fields.update(model_calls=calls, repaired=repaired or getattr(exc, "repaired", False))
        if usage:
            fields["usage"] = usage
        if isinstance(exc, NotSmallerError):
            # a head too small for a summary to pay off is not a failure: nothing worth condensing
            # (compact takes the next round on it: a smaller keep_recent can succeed)
            fields.update(reason=str(exc), reason_kind=NotSmallerError.kind)
            return dump, Status.NOTHING_TO_CONDENSE, fields
        fields["error"] = str(exc)
        return dump, Status.SUMMARIZE_FAILED, fields
    fields.update(summarized_count=len(cut.head), kept_count=len(cut.kept), summary_tokens=n,
                  forced_user=cut.forced_user is not None, task_kept=cut.task is not None,
                  user_kept=len(cut.moved) - (cut.task is not None),
                  evidence_tokens=evidence_tokens, model_calls=calls, cached=answer.cached, repaired=repaired,
                  tokens_before=before, tokens_after=after)
    if usage:
        fields["usage"] = usage  # as the server reported it: prompt_tokens, completion_tokens, cached_tokens
    if answer.structured:
        fields["structured"] = answer.structured  # how the model answered: json (response_format) or markdown
    return new, Status.SUMMARIZED, fields


def _offline_sections(request: SummaryRequest, counter: TokenCounter, fields: dict[str, Any], why: str) -> str:
    """The extractive sections of the head a model's answer could not be used for; the item and
    a warning on stderr say so (``fallback``, ``self_check``)."""
    from ..backends.extractive import ExtractiveBackend

    fields["self_check"] = fields["warning"] = f"{why}: the extractive sections were written instead"
    fields["fallback"] = "extractive"
    return canonical_summary(ExtractiveBackend(counter.text).summarize_sync(request))


def make_summarize_transform(opts: SummarizeOptions | None, config: BackendConfig | None, counter: TokenCounter):
    """An async transform for the per-record step, and the backend (to close after the run)."""
    opts = opts or SummarizeOptions()
    backend = make_backend(config, counter.text, opts.max_summary_tokens)

    async def transform(dump: dict, settings: Any) -> tuple[dict, Status, dict[str, Any]]:
        return await summarize_conversation(dump, opts, backend, counter)

    return transform, backend


async def run_and_close(coro: Any, backend: Any) -> Any:
    """Await a library call, then close the backend's client (its connections, its cache)."""
    try:
        return await coro
    finally:
        close = getattr(backend, "aclose", None)  # a caller's own backend object may have nothing to close
        if close is not None:
            await close()


def summarize_dump(dump: dict | list, keep_recent: int = DEFAULT_KEEP_RECENT,
                   max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS, preserve_system: bool = True,
                   keep_originals: bool = True, backend: Any = None,
                   encoding: str = "cl100k_base", keep_task: bool = True, evidence: bool = True,
                   keep_user_tokens: int = DEFAULT_KEEP_USER_TOKENS,
                   evidence_tokens: int | None = None) -> tuple[dict, Status, dict[str, Any]]:
    """Library entry point: one summary round on a dumps() dict or a list of messages, by default
    with the offline extractive backend. ``backend`` is a backend object, a ``BackendConfig`` or
    a name ("extractive", "openai": OPENAI_API_KEY / OPENAI_BASE_URL from the environment, or
    "auto"). ``keep_task``: the task (the first real user request) stays verbatim; ``evidence``:
    the summary ends with the evidence section; ``keep_user_tokens``: the user's later messages
    kept verbatim, the latest first, within so many tokens; ``evidence_tokens``: the evidence
    section's budget (None: 3/4 of the summary's, more for a long head). Returns (dump, status, details); the input is
    not modified. ``encoding``: one of
    model.tokens.ENCODINGS; ``auto`` chooses from the dump's ``model``."""
    import asyncio

    from ..model.conversation import normalize_record
    from . import arguments as check

    check.conversation(dump, shape=True)
    check.text("encoding", encoding, optional=False)
    check.backend(backend)
    opts = SummarizeOptions(keep_recent, max_summary_tokens, preserve_system, keep_originals, keep_task, evidence,
                            keep_user_tokens, evidence_tokens)  # checks each option's type and range
    counter = counter_for(encoding, dump.get("model") if isinstance(dump, dict) else None)
    if backend is None or isinstance(backend, (str, BackendConfig)):
        backend = make_backend(backend, counter.text, max_summary_tokens)
    dump, _ = normalize_record(dump)
    return asyncio.run(run_and_close(summarize_conversation(dump, opts, backend, counter), backend))
