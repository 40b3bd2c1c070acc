"""``xcompact summarize``: tier 2."""

from __future__ import annotations

from typing import Any

from . import options as opt
from .base import Command, Transform
from .configure import Configured, backend_settings, old_model_spelling
from .settings import Settings


class Summarize(Command):
    name = "summarize"
    help = """Tier 2: replace older messages by one structured summary; keep recent ones verbatim.

    The summary has eight sections (system_context, overview, key_facts, user_preferences,
    decisions, pending_tasks, open_questions, tone_context) within --max-summary-tokens. On
    a model's answer still unusable after a repair turn, the offline sections are written
    instead (the report says so); on any other failure the conversation is left exactly as it
    was (SUMMARIZE_FAILED).

    \b
    Example:
      xcompact summarize fixtures/swe_agent_3.jsonl --backend extractive --keep-recent 8 -o summarized.jsonl
    """
    models = True

    @classmethod
    def slots(cls) -> list[opt.Slot]:
        return (opt.IO_OPTIONS + [opt.api_ready] + opt.CUT_OPTIONS + opt.backend_options()
                + [opt.old_model, opt.originals, opt.dry_run, opt.encoding])

    @classmethod
    def build(cls, values: dict[str, Any], explicit: set[str], config_file: str | None) -> Configured:
        from ..tiers.options import SummarizeOptions

        strict = values.get("strict", False)
        v, renamed = old_model_spelling(values, explicit)
        dry_run = v["dry_run"]
        backend, params, warnings = backend_settings(v, explicit, dry_run=dry_run, config_file=config_file)
        keep_originals = v["originals"] == "keep"
        summary = SummarizeOptions(keep_recent=v["keep_recent"], max_summary_tokens=v["max_summary_tokens"],
                                   preserve_system=v["preserve_system"], keep_originals=keep_originals,
                                   keep_task=v["keep_task"], evidence=v["evidence"],
                                   keep_user_tokens=v["keep_user_tokens"], evidence_tokens=v["evidence_tokens"])
        params.update(keep_recent=v["keep_recent"], max_summary_tokens=v["max_summary_tokens"],
                      preserve_system=v["preserve_system"], keep_task=v["keep_task"], evidence=v["evidence"],
                      keep_user_tokens=v["keep_user_tokens"], evidence_tokens=v["evidence_tokens"],
                      originals=v["originals"], strict=strict,
                      encoding=v["encoding"], dry_run=dry_run)
        return Configured("summarize", Settings("summarize", keep_originals=keep_originals, strict=strict,
                                            encoding=v["encoding"], summary=summary, backend=backend,
                                            write_output=not dry_run, dry_run=dry_run),
                          params, tuple(renamed + warnings))

    @classmethod
    def transform(cls, settings: Settings, counter: Any) -> tuple[Transform, Any]:
        from ..tiers.summarize import make_summarize_transform

        return make_summarize_transform(settings.summary, settings.backend, counter)
