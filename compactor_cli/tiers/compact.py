"""The tiered policy (xun's automatic compaction, applied offline), for one conversation.

Over the trigger (a token or a message threshold), reclaim old tool results first; escalate
to a summary in the same round when the estimate is still above threshold x ESCALATION_RATIO,
or when the dump's count of consecutive tool-call rounds reaches ``escalation_rounds``; still
over after the summary, retry up to ``max_retries`` rounds, each halving both keep counts.
"""

from __future__ import annotations

from typing import Any

from ..backends import Backend
from ..backends.config import BackendConfig
from ..backends.factory import make_backend
from ..errors import UsageError
from ..evidence.harness import real_user_indices
from ..model.conversation import COUNTER_KEY, REPLACED_KEYS, estimated_message_length
from ..model.tokens import MemoTokens, TokenCounter, counter_for
from ..status import Status
from .cut import NotSmallerError, head_tool_counts
from .options import DEFAULT_KEEP_RECENT, DEFAULT_TOKEN_THRESHOLD, Policy, SummarizeOptions, evidence_room
from .store import remember as _remember
from .summarize import summarize_conversation
from .toolcall import reclaim_tool_results

#: The estimate must fall below 95% of the threshold to count as real progress (xun: a module
#: constant, not a per-run option).
ESCALATION_RATIO = 0.95
THRESHOLD_SHARE_OF_WINDOW = 0.70  # nagents: with no threshold, 70% of the model's context


def resolve_threshold(token_threshold: int | None, message_threshold: int | None, model: str | None,
                      context_window: int | None) -> tuple[int | None, int | None, str]:
    """(token threshold, message threshold, where it came from). The two thresholds exclude
    each other; with neither, 70% of the model's window, else xun's 192000 tokens."""
    from ..model.context_windows import context_window as window_of

    if token_threshold is not None and message_threshold is not None:
        raise UsageError("--token-threshold and --message-threshold cannot be used together; choose one")
    if message_threshold is not None:
        return None, message_threshold, "--message-threshold"
    if token_threshold is not None:
        return token_threshold, None, "--token-threshold"
    if model is not None or context_window is not None:
        window = context_window or window_of(model)
        if window is None:
            raise UsageError(f"the context window of model {model!r} is not in the table; give --context-window N "
                             "or a --token-threshold")
        return int(window * THRESHOLD_SHARE_OF_WINDOW), None, f"70% of the {window}-token context window"
    return DEFAULT_TOKEN_THRESHOLD, None, "default"


def measure(dump: dict, policy: Policy, memo: MemoTokens | None, observed_ok: bool = True) -> tuple[int, str]:
    """(size, source): messages, or the dump's observed ``tokens_used``, else a token count."""
    if policy.message_threshold is not None:
        return len(dump["messages"]), "messages"
    observed = dump.get("tokens_used")
    if observed_ok and isinstance(observed, int) and not isinstance(observed, bool) and observed >= 0:
        return observed, "observed"
    assert memo is not None
    return memo.conversation(dump["messages"]), "counted"


def _with_counters(dump: dict, original: dict, **changes: Any) -> dict:
    counter = dict(dump.get(COUNTER_KEY) or {})
    counter.setdefault("summary_rounds", 0)
    counter.setdefault("toolcall_rounds", 0)
    counter.update(changes)
    new = {**dump, COUNTER_KEY: counter, "tokens_used": None}
    return _remember(new, original, REPLACED_KEYS)


async def compact_conversation(dump: dict, policy: Policy, backend: Backend | None,
                               counter: TokenCounter) -> tuple[dict, Status, dict[str, Any]]:
    """Apply the policy. Returns (dump, status, report fields with every round taken)."""
    memo = MemoTokens(counter)
    new, status, fields = await _apply_policy(dump, policy, backend, counter, memo)
    # the memo already holds most messages' counts: the report's token fields cost little more
    fields["tokens_before"] = memo.conversation(dump["messages"])
    fields["tokens_after"] = memo.conversation(new["messages"])
    fields["reclaimed_count"] = sum(r.get("reclaimed_count", 0) for r in fields["rounds"])
    before = estimated_message_length(dump["messages"])
    after = estimated_message_length(new["messages"]) if new is not dump else before
    fields["length_before"], fields["length_after"] = before, after
    fields["reclaimed_fraction"] = max(0.0, (before - after) / before) if before else 0.0
    return new, status, fields


async def _apply_policy(dump: dict, policy: Policy, backend: Backend | None, counter: TokenCounter,
                        memo: MemoTokens) -> tuple[dict, Status, dict[str, Any]]:
    size, source = measure(dump, policy, memo)
    threshold = policy.threshold
    fields: dict[str, Any] = {"threshold": threshold, "threshold_unit": policy.unit, "size_before": size,
                              "size_source": source, "rounds": []}
    if size <= threshold:
        fields["size_after"] = size
        return dump, Status.UNDER_THRESHOLD, fields
    original = dump
    keep, fixed_recent, keep_turns = policy.keep, policy.keep_recent, policy.keep_turns
    changed = summarized = False
    summary_error = None
    for attempt in range(policy.max_retries + 1):
        # tier 1
        new, res = reclaim_tool_results(dump, keep=keep, keep_originals=policy.keep_originals,
                                        key_offsets=head_tool_counts(dump), exclude_tools=policy.exclude_tools,
                                        keep_turns=keep_turns, clear_at_least=policy.clear_at_least,
                                        counter=counter, placeholder=policy.placeholder,
                                        clear_tool_inputs=policy.clear_tool_inputs,
                                        max_result_tokens=policy.max_result_tokens, dedup_reads=policy.dedup_reads,
                                        truncate_inputs=policy.truncate_inputs,
                                        images_keep=policy.images_keep, thinking_keep=policy.thinking_keep)
        rounds = int((dump.get(COUNTER_KEY) or {}).get("toolcall_rounds") or 0) + 1
        if source == "observed" and attempt == 0:
            estimate = round(size * (1 - res.reclaimed_fraction))
        else:
            estimate, _ = measure(new, policy, memo, observed_ok=False)
        if res.reclaimed_count or res.inputs_truncated or res.images_cleared or res.thinking_cleared:
            changed = True
        dump = _with_counters(new, original, toolcall_rounds=rounds)
        fields["rounds"].append({"tier": 1, "keep": keep, "reclaimed_count": res.reclaimed_count,
                                 "estimate": estimate})
        ratio_escalate = estimate > threshold * ESCALATION_RATIO
        rounds_escalate = rounds >= policy.escalation_rounds
        if not ratio_escalate and not rounds_escalate:
            fields["size_after"] = estimate
            return dump, _done(changed, summarized), fields
        # tier 2, same round: the recent messages verbatim as the threshold leaves room for, unless fixed
        # (a summary forced by --escalation-rounds alone, the size already under: xun's fixed keep)
        fit = fixed_recent is None and ratio_escalate
        if fit:
            keep_recent = fit_keep_recent(dump["messages"], policy, memo) >> attempt
        else:
            keep_recent = (DEFAULT_KEEP_RECENT if fixed_recent is None else fixed_recent) >> attempt
        opts = SummarizeOptions(keep_recent=keep_recent, max_summary_tokens=policy.max_summary_tokens,
                                preserve_system=policy.preserve_system, keep_originals=policy.keep_originals,
                                keep_task=policy.keep_task, evidence=policy.evidence,
                                keep_user_tokens=policy.keep_user_tokens, evidence_tokens=policy.evidence_tokens)
        assert backend is not None
        summarised, status, sfields = await summarize_conversation(dump, opts, backend, counter)
        _add_requests(fields, sfields)
        entry: dict[str, Any] = {"tier": 2, "keep_recent": keep_recent, "status": status.value,
                 "reason": "ratio" if ratio_escalate else "escalation_rounds"}
        if fit:
            entry["keep_recent_fit"] = True
        if status is Status.SUMMARIZED:
            changed = summarized = True
            dump = _remember(summarised, original, REPLACED_KEYS)
            estimate, _ = measure(dump, policy, memo, observed_ok=False)
            entry.update(summarized_count=sfields["summarized_count"], estimate=estimate)
            fields.setdefault("backend", sfields.get("backend"))
            fields.setdefault("model", sfields.get("model"))
            if "fallback" in sfields:  # the model's sections could not be used: the round says so, and stderr
                entry.update(fallback=sfields["fallback"], self_check=sfields.get("self_check"))
                fields["warning"] = sfields.get("warning")
        elif sfields.get("reason_kind") == NotSmallerError.kind:
            entry["reason"] = sfields.get("reason")  # a smaller keep_recent can do better: next round
            entry["reason_kind"] = NotSmallerError.kind
        elif status is Status.SUMMARIZE_FAILED:
            entry["error"] = sfields.get("error")
            summary_error = sfields.get("error")
        fields["rounds"].append(entry)
        if estimate <= threshold:
            fields["size_after"] = estimate
            return dump, _done(changed, summarized), fields
        if summary_error is not None:
            # the fallback ladder: every tool output cleared, then the offline extractive summary;
            # each step a round of its own; the summary's failure stays the status
            dump, estimate = await _fallback_ladder(dump, original, policy, opts, backend, counter, memo,
                                                    fields["rounds"], rounds)
            fields["size_after"] = estimate
            fields["error"] = summary_error
            return dump, Status.SUMMARIZE_FAILED, fields
        keep = keep // 2
        keep_turns = keep_turns // 2 if keep_turns is not None else None
    fields["size_after"] = estimate
    fields["over_by"] = estimate - threshold
    if not changed:
        return original, Status.NOTHING_TO_CONDENSE, fields
    fields["error"] = (f"still over the threshold after {policy.max_retries + 1} rounds: {estimate} {policy.unit}, "
                       f"{estimate - threshold} over {threshold}")
    return dump, Status.STILL_OVER, fields


async def _fallback_ladder(dump: dict, original: dict, policy: Policy, opts: SummarizeOptions, backend: Backend,
                           counter: TokenCounter, memo: MemoTokens, rounds_done: list[dict[str, Any]],
                           toolcall_rounds: int) -> tuple[dict, int]:
    """What compact writes when the summariser failed and the conversation is still over: first
    every tool output cleared (tier 1 with keep 0), then, if still over and the summariser was a
    model, the offline extractive summary of the same cut. Never an error text as a summary."""
    new, res = reclaim_tool_results(dump, keep=0, keep_originals=policy.keep_originals,
                                    key_offsets=head_tool_counts(dump), exclude_tools=policy.exclude_tools,
                                    counter=counter, placeholder=policy.placeholder,
                                    clear_tool_inputs=policy.clear_tool_inputs,
                                    max_result_tokens=policy.max_result_tokens, dedup_reads=policy.dedup_reads,
                                    truncate_inputs=policy.truncate_inputs,
                                    images_keep=policy.images_keep, thinking_keep=policy.thinking_keep)
    estimate, _ = measure(new, policy, memo, observed_ok=False)
    if res.reclaimed_count or res.inputs_truncated or res.images_cleared or res.thinking_cleared:
        dump = _with_counters(new, original, toolcall_rounds=toolcall_rounds + 1)
    rounds_done.append({"tier": 1, "keep": 0, "reclaimed_count": res.reclaimed_count, "estimate": estimate,
                        "fallback": "the summary failed: every tool output cleared"})
    if estimate <= policy.threshold or backend.name == "extractive":
        return dump, estimate
    from ..backends.extractive import ExtractiveBackend

    summarised, status, sfields = await summarize_conversation(dump, opts, ExtractiveBackend(counter.text), counter)
    entry: dict[str, Any] = {"tier": 2, "keep_recent": opts.keep_recent, "status": status.value,
                             "fallback": "the summary failed: the offline extractive summary instead"}
    if status is Status.SUMMARIZED:
        dump = _remember(summarised, original, REPLACED_KEYS)
        estimate, _ = measure(dump, policy, memo, observed_ok=False)
        entry.update(summarized_count=sfields["summarized_count"], estimate=estimate)
    rounds_done.append(entry)
    return dump, estimate


def fit_keep_recent(messages: list[dict], policy: Policy, memo: MemoTokens) -> int:
    """How many of the last messages fit under the threshold beside what tier 2 writes: the system
    message (its prompt and the summary's budget), the task kept verbatim; in messages, the
    threshold less those two. A 20,000-token threshold gives a result of about 20,000 tokens,
    not xun's fixed 16 messages."""
    start = 1 if messages and messages[0].get("role") == "system" else 0
    body = messages[start:]
    if policy.message_threshold is not None:
        return max(0, policy.message_threshold - start - 2)  # the system message, the task, the summary's
    room = int(policy.threshold * ESCALATION_RATIO) - policy.max_summary_tokens - memo.conversation(messages[:start])
    if policy.evidence:  # what the evidence of a long head may add to the summary's budget (at most)
        most, share = evidence_room(policy.max_summary_tokens, memo.conversation(body), policy.evidence_tokens)
        room -= most - share
    task = None
    if policy.keep_task and body:
        from ..formats.rules import task_message

        task = task_message(messages, list(range(start, len(messages))), [])
        if task is not None:
            room -= memo.message(messages[task])
    users = policy.keep_user_tokens  # the user's later messages the cut will keep too (at most this)
    for i in reversed(real_user_indices(messages)):
        if i == task:
            continue
        n = memo.message(messages[i])
        if n <= users:
            users -= n
    room -= policy.keep_user_tokens - users
    n = 0
    for m in reversed(body):
        room -= memo.message(m)
        if room < 0:
            break
        n += 1
    return n


def _done(changed: bool, summarized: bool) -> Status:
    """What a finished compact did: a summary in any round is SUMMARIZED, tier 1 alone RECLAIMED."""
    if summarized:
        return Status.SUMMARIZED
    return Status.RECLAIMED if changed else Status.NOTHING_TO_CONDENSE


def check_conversation_size(dump: dict, policy: Policy, counter: TokenCounter) -> tuple[dict, Status, dict[str, Any]]:
    """--check: measure only."""
    memo = MemoTokens(counter)
    size, source = measure(dump, policy, memo)
    status = Status.OVER_THRESHOLD if size > policy.threshold else Status.UNDER_THRESHOLD
    tokens = memo.conversation(dump["messages"])
    fields: dict[str, Any] = {"threshold": policy.threshold, "threshold_unit": policy.unit, "size_before": size,
                              "size_source": source, "size_after": size, "tokens_before": tokens,
                              "tokens_after": tokens}
    if status is Status.OVER_THRESHOLD:
        fields["over_by"] = size - policy.threshold
    return dump, status, fields


def make_compact_transform(policy: Policy | None, check: bool, config: BackendConfig | None, counter: TokenCounter):
    """An async transform for the per-record step, and the summary backend (None with --check)."""
    policy = policy or Policy()
    if check:
        def measure_only(dump: dict, settings: Any) -> tuple[dict, Status, dict[str, Any]]:
            return check_conversation_size(dump, policy, counter)

        return measure_only, None
    backend = make_backend(config, counter.text, policy.max_summary_tokens)

    async def transform(dump: dict, settings: Any) -> tuple[dict, Status, dict[str, Any]]:
        return await compact_conversation(dump, policy, backend, counter)

    return transform, backend


def compact_dump(dump: dict | list, policy: Policy | None = None, backend: Any = None,
                 encoding: str = "cl100k_base") -> tuple[dict, Status, dict[str, Any]]:
    """Library entry point: the tiered policy on a dumps() dict or a list of messages, by default
    with the offline extractive summariser (``backend`` as for summarize_dump). Returns (dump,
    status, details with the rounds); the input is not modified. ``encoding``: one of
    model.tokens.ENCODINGS; ``auto`` chooses from the dump's ``model``."""
    import asyncio

    from ..errors import UsageError
    from ..model.conversation import normalize_record
    from . import arguments as check
    from .summarize import run_and_close

    check.conversation(dump, shape=True)
    check.text("encoding", encoding, optional=False)
    check.backend(backend)
    if policy is not None and not isinstance(policy, Policy):
        raise UsageError(f"policy must be a Policy (compactor_cli.Policy), got {type(policy).__name__}")
    policy = policy or Policy()
    counter = counter_for(encoding, dump.get("model") if isinstance(dump, dict) else None)
    if backend is None or isinstance(backend, (str, BackendConfig)):
        backend = make_backend(backend, counter.text, policy.max_summary_tokens)
    dump, _ = normalize_record(dump)
    return asyncio.run(run_and_close(compact_conversation(dump, policy, backend, counter), backend))


def _add_requests(fields: dict[str, Any], sfields: dict[str, Any]) -> None:
    """A summary round's model requests (``model_calls``) and the server's ``usage`` of them,
    added to the item's, summed over the rounds."""
    if sfields.get("model_calls"):  # (the offline backend makes none: its items stay as they were)
        fields["model_calls"] = fields.get("model_calls", 0) + sfields["model_calls"]
    for key, value in (sfields.get("usage") or {}).items():
        usage = fields.setdefault("usage", {})
        usage[key] = usage.get(key, 0) + value
