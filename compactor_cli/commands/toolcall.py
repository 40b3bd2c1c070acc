"""``xcompact toolcall``: tier 1."""

from __future__ import annotations

from typing import Any

from ..model.tokens import chosen_counter
from ..status import Status
from ..tiers.result import TierResult
from ..tiers.store import head_tool_counts
from ..tiers.toolcall import reclaim_tool_results
from . import options as opt
from .base import Command, Transform
from .configure import Configured, kept_last, tier1_controls
from .settings import Settings


class Toolcall(Command):
    name = "toolcall"
    help = """Tier 1: replace old tool results by a placeholder naming their tool-call ID.

    Tool results older than the most recent --keep are replaced where the placeholder is
    shorter; the originals stay in the dump under compacted_tool_results (see extract, restore).

    \b
    Example:
      xcompact toolcall fixtures/taubench_airline_5.jsonl --keep 4 -o out.jsonl --report report.json
    """
    tier1 = True
    light = True

    @classmethod
    def slots(cls) -> list[opt.Slot]:
        return (opt.IO_OPTIONS + [opt.api_ready, opt.keep] + opt.TIER1_CONTROLS
                + [opt.trigger, opt.fit, opt.originals, opt.dry_run] + opt.TOKEN_OPTIONS)

    @classmethod
    def build(cls, values: dict[str, Any], explicit: set[str], config_file: str | None) -> Configured:
        v, controls = tier1_controls(values, explicit, counts_tokens=not values["no_tokens"],
                                     extra=("trigger", "fit"))
        strict = v.get("strict", False)
        tokens = not v["no_tokens"]
        settings = Settings("toolcall", keep=v["keep"], keep_originals=v["originals"] == "keep", strict=strict,
                            count_tokens=tokens, encoding=v["encoding"], write_output=not v["dry_run"],
                            dry_run=v["dry_run"], exclude_tools=v["exclude_tools"], keep_turns=v["keep_turns"],
                            clear_at_least=v["clear_at_least"], trigger=v["trigger"],
                            placeholder=v["placeholder"], clear_tool_inputs=v["clear_tool_inputs"],
                            max_result_tokens=v["max_result_tokens"], dedup_reads=v["dedup_reads"],
                            truncate_inputs=v["truncate_inputs"], images_keep=kept_last(v["images"]),
                            thinking_keep=kept_last(v["thinking"]), fit=v["fit"])
        return Configured("toolcall", settings, dict(keep=v["keep"], originals=v["originals"], strict=strict,
                                                     encoding=v["encoding"], tokens=tokens, dry_run=v["dry_run"],
                                                     **controls))

    @classmethod
    def transform(cls, settings: Settings, counter: Any) -> tuple[Transform, Any]:
        return op_toolcall, None


Result = TierResult


def op_toolcall(dump: dict, settings: Settings) -> Result:
    counter = chosen_counter()  # set for this record whenever tokens are counted (--trigger needs them)
    if settings.trigger is not None and counter is not None:
        size = counter.conversation(dump["messages"])
        if size <= settings.trigger:
            return dump, Status.UNDER_THRESHOLD, {"threshold": settings.trigger, "threshold_unit": "tokens",
                                                  "size_before": size, "reclaimed_count": 0,
                                                  "reclaimed_fraction": 0.0, "tokens_before": size,
                                                  "tokens_after": size}  # counted once

    def reclaim(d: dict, keep: int, cut: int | None) -> tuple[Any, Any]:
        return reclaim_tool_results(d, keep=keep, keep_originals=settings.keep_originals,
                                    key_offsets=head_tool_counts(d), exclude_tools=settings.exclude_tools,
                                    keep_turns=settings.keep_turns, clear_at_least=settings.clear_at_least,
                                    counter=counter, placeholder=settings.placeholder,
                                    clear_tool_inputs=settings.clear_tool_inputs,
                                    max_result_tokens=settings.max_result_tokens,
                                    dedup_reads=settings.dedup_reads, truncate_inputs=cut,
                                    images_keep=settings.images_keep, thinking_keep=settings.thinking_keep)

    fit_fields: dict[str, Any] = {}
    if settings.fit is not None and counter is not None:
        from ..tiers.fit import fit_tool_results

        fitted = fit_tool_results(dump, settings.fit, counter, reclaim, settings.truncate_inputs)
        if fitted.tokens_before <= settings.fit:
            return dump, Status.UNDER_THRESHOLD, {"threshold": settings.fit, "threshold_unit": "tokens",
                                                  "size_before": fitted.tokens_before, "reclaimed_count": 0,
                                                  "reclaimed_fraction": 0.0, "tokens_before": fitted.tokens_before,
                                                  "tokens_after": fitted.tokens_before}
        new, res = fitted.dump, fitted.result
        fit_fields = {"threshold": settings.fit, "threshold_unit": "tokens", "fit_keep": fitted.keep}
        if fitted.truncate_inputs is not None and fitted.truncate_inputs != settings.truncate_inputs:
            fit_fields["fit_truncate_inputs"] = fitted.truncate_inputs
        if not fitted.fits:
            fit_fields["size_after"] = fitted.tokens_after
            fit_fields["warning"] = (f"still {fitted.tokens_after} tokens after clearing every tool result, over "
                                     f"--fit {settings.fit}: written compacted as far as tier 1 goes (compact "
                                     "--token-threshold can summarise)")
    else:
        new, res = reclaim(dump, settings.keep, settings.truncate_inputs)
    changed = res.reclaimed_count or res.inputs_truncated or res.images_cleared or res.thinking_cleared
    status = Status.RECLAIMED if changed else Status.NOTHING_TO_CONDENSE
    if "warning" in fit_fields:
        status = Status.STILL_OVER
    fields: dict[str, Any] = {"reclaimed_count": res.reclaimed_count, "reclaimed_fraction": res.reclaimed_fraction,
                              "skipped_no_id": res.skipped_no_id, "length_before": res.length_before,
                              "length_after": res.length_after}
    if res.excluded_count:
        fields["excluded_count"] = res.excluded_count
    if res.inputs_cleared:
        fields["inputs_cleared"] = res.inputs_cleared
    if res.kept_cheaper:
        fields["kept_cheaper"] = res.kept_cheaper  # cheaper in tokens than their placeholder
    if res.capped_count:
        fields["capped_count"] = res.capped_count  # kept results cut to a preview (--max-result-tokens)
    if res.inputs_truncated:
        fields["inputs_truncated"] = res.inputs_truncated  # older calls whose long arguments were cut
    for name in ("images_cleared", "thinking_cleared", "media_left_native"):
        if getattr(res, name):
            fields[name] = getattr(res, name)
    if res.deduped_reads:
        fields["deduped_reads"] = res.deduped_reads  # earlier reads a later identical read repeats (--dedup-reads)
    fields.update(fit_fields)
    if res.freed_tokens is not None:
        fields["freed_tokens"] = res.freed_tokens
    if res.below_clear_at_least:
        fields["reason"] = (f"clear_at_least: clearing would free {res.freed_tokens} tokens, fewer than "
                            f"{settings.clear_at_least}; left as it was")
    return new, status, fields
