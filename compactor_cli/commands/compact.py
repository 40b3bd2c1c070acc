"""``xcompact compact``: the tiered policy."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from . import options as opt
from .base import Command, Transform
from .configure import Configured, backend_settings, kept_last, tier1_controls
from .settings import Settings


class Compact(Command):
    name = "compact"
    help = """The tiered policy: reclaim tool results first, summarise only when still over.

    Conversations over --token-threshold (or --message-threshold) get tier 1; if the estimate
    is still above 95% of the threshold (or the dump has had --escalation-rounds tool-call
    rounds) a summary follows in the same round; still over, up to --max-retries more rounds
    halve both keep counts.

    \b
    Example:
      xcompact compact fixtures/taubench_airline_5.jsonl --token-threshold 3000 --backend extractive -o compacted.jsonl
    """
    models = True
    tier1 = True
    writes_nothing_with = "--check and --dry-run write"

    @classmethod
    def slots(cls) -> list[opt.Slot]:
        return (opt.IO_OPTIONS + [opt.api_ready] + opt.THRESHOLD_OPTIONS + [opt.keep] + opt.TIER1_CONTROLS
                + opt.CUT_OPTIONS + opt.ROUND_OPTIONS + [opt.dry_run] + opt.backend_options()
                + [opt.originals, opt.encoding])

    @classmethod
    def build(cls, values: dict[str, Any], explicit: set[str], config_file: str | None) -> Configured:
        from ..tiers.compact import resolve_threshold
        from ..tiers.options import DEFAULT_KEEP_RECENT, Policy

        v, controls = tier1_controls(values, explicit)
        strict = v.get("strict", False)
        if v.get("summary_model") is None:  # as nagents: the conversation's own model unless told
            v["summary_model"] = v["conversation_model"]
        check, dry_run = v["check"], v["dry_run"]
        if check and dry_run:
            raise UsageError("--check and --dry-run cannot be used together: --check only measures, "
                             "--dry-run runs the policy without writing")
        if v["strategy"] is not None:
            if check:
                raise UsageError("--strategy and --check cannot be used together: --check measures against the "
                                 "threshold, a strategy decides for itself")
            from ..tiers.strategy import load_strategy

            load_strategy(v["strategy"])  # a name that cannot be loaded fails here, before any work
            controls["strategy"] = v["strategy"]
        token_threshold, message_threshold, source = resolve_threshold(
            v["token_threshold"], v["message_threshold"], v["conversation_model"], v["context_window"])
        backend, params, warnings = ((None, {}, []) if check
                                     else backend_settings(v, explicit, dry_run=dry_run, config_file=config_file))
        keep_originals = v["originals"] == "keep"
        # --keep-recent left at its default: as many recent messages as fit under the threshold
        fit = "keep_recent" not in explicit and v["keep_recent"] == DEFAULT_KEEP_RECENT
        policy = Policy(token_threshold=token_threshold, message_threshold=message_threshold, keep=v["keep"],
                        keep_recent=None if fit else v["keep_recent"], escalation_rounds=v["escalation_rounds"],
                        max_retries=v["max_retries"], max_summary_tokens=v["max_summary_tokens"],
                        preserve_system=v["preserve_system"], keep_originals=keep_originals,
                        exclude_tools=v["exclude_tools"], keep_turns=v["keep_turns"],
                        clear_at_least=v["clear_at_least"], placeholder=v["placeholder"],
                        clear_tool_inputs=v["clear_tool_inputs"], max_result_tokens=v["max_result_tokens"],
                        dedup_reads=v["dedup_reads"], truncate_inputs=v["truncate_inputs"],
                        images_keep=kept_last(v["images"]), thinking_keep=kept_last(v["thinking"]),
                        keep_task=v["keep_task"], evidence=v["evidence"],
                        keep_user_tokens=v["keep_user_tokens"], evidence_tokens=v["evidence_tokens"])
        params.update(controls)
        params.update(token_threshold=token_threshold, message_threshold=message_threshold, keep=v["keep"],
                      keep_recent="fit" if fit else v["keep_recent"], escalation_rounds=v["escalation_rounds"],
                      max_retries=v["max_retries"], max_summary_tokens=v["max_summary_tokens"],
                      preserve_system=v["preserve_system"], keep_task=v["keep_task"], evidence=v["evidence"],
                      keep_user_tokens=v["keep_user_tokens"], evidence_tokens=v["evidence_tokens"],
                      keep_originals=keep_originals, threshold_source=source,
                      model=v["conversation_model"], context_window=v["context_window"], check=check,
                      dry_run=dry_run, originals=v["originals"], strict=strict, encoding=v["encoding"])
        settings = Settings("compact", keep=v["keep"], keep_originals=keep_originals, strict=strict,
                            encoding=v["encoding"], conversation_model=v["conversation_model"],
                            write_output=not (check or dry_run), policy=policy, check=check,
                            backend=backend, dry_run=dry_run, strategy=v["strategy"])
        return Configured("compact", settings, params, tuple(warnings))

    @classmethod
    def transform(cls, settings: Settings, counter: Any) -> tuple[Transform, Any]:
        if settings.strategy is not None:
            from ..tiers.strategy import make_strategy_transform

            return make_strategy_transform(settings.strategy, counter,
                                           settings.policy.keep_originals if settings.policy else True)
        from ..tiers.compact import make_compact_transform

        return make_compact_transform(settings.policy, settings.check, settings.backend, counter)
