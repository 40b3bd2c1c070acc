"""The tiers' own options and defaults, light enough for ``commands.settings`` to import without
loading a tier (``toolcall`` never pays for the summariser)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

DEFAULT_KEEP = 12  # xun's toolcall_keep_max
DEFAULT_KEEP_RECENT = 16  # xun's summary_keep_max
DEFAULT_MAX_SUMMARY_TOKENS = 1024
MIN_SUMMARY_TOKENS = 64  # what the eight section headings alone need
#: Most of the summary's budget the evidence section may take (the model's or the extractive
#: sections get the rest, and at least MIN_SUMMARY_TOKENS): what a run changed and met comes
#: first, since an agent cannot re-derive it; the sections' prose is what a long run gives up.
EVIDENCE_SHARE = 0.75
#: A long head's evidence may take more than that share (--evidence-tokens auto): the share grows
#: in proportion to the head beyond LONG_HEAD_TOKENS, up to EVIDENCE_AUTO_MAX. The full evidence of
#: the long real Codex sessions is 0.5-0.6% of their heads (1,400-1,600 tokens of 230,000-250,000);
#: a small budget stays small (the share of 64 tokens is none).
LONG_HEAD_TOKENS = 150_000
EVIDENCE_AUTO_MAX = 2048


def evidence_room(budget: int, head_tokens: int, evidence_tokens: int | None) -> tuple[int, int]:
    """(the evidence section's budget, the part of it taken from the summary's ``budget``): a
    budget of the user's own, or 3/4 of the summary's, growing with a head over LONG_HEAD_TOKENS;
    whatever the evidence takes beyond its share is added to the summary, never taken from its
    sections."""
    share = max(0, min(int(budget * EVIDENCE_SHARE), budget - MIN_SUMMARY_TOKENS))
    if evidence_tokens is not None:
        return evidence_tokens, min(evidence_tokens, share)
    return max(share, min(share * head_tokens // LONG_HEAD_TOKENS, EVIDENCE_AUTO_MAX)), share
DEFAULT_TOKEN_THRESHOLD = 192_000
#: The user's later messages kept verbatim by tier 2 (besides the task), in tokens: the user's own
#: words are what an agent can least re-derive; 8,000 (Codex keeps 20,000) keeps every later user
#: turn of the shared real runs but the oldest few of a 50-turn Codex session, at 2–3% of its tokens.
DEFAULT_KEEP_USER_TOKENS = 8000


#: How each option field is checked when the object is made (a library caller's wrong type or
#: value is a UsageError naming it): (kind, minimum); kinds: count, optional count, flag, text, names.
_CHECKS: dict[str, tuple[str, int]] = {
    "keep_recent": ("optional count", 0), "max_summary_tokens": ("count", MIN_SUMMARY_TOKENS),
    "keep_user_tokens": ("count", 0), "evidence_tokens": ("optional count", 0), "keep": ("count", 0),
    "escalation_rounds": ("count", 1),
    "max_retries": ("count", 0), "token_threshold": ("optional count", 1), "message_threshold": ("optional count", 1),
    "keep_turns": ("optional count", 0), "clear_at_least": ("optional count", 1),
    "max_result_tokens": ("optional count", 1), "truncate_inputs": ("optional count", 1),
    "images_keep": ("optional count", 0), "thinking_keep": ("optional count", 0),
    "preserve_system": ("flag", 0), "keep_originals": ("flag", 0), "keep_task": ("flag", 0),
    "evidence": ("flag", 0), "clear_tool_inputs": ("flag", 0), "dedup_reads": ("flag", 0),
    "placeholder": ("text", 0), "exclude_tools": ("names", 0),
}


def _check_fields(obj: Any) -> None:
    from . import arguments as check

    for f in fields(obj):
        kind, minimum = _CHECKS.get(f.name, ("", 0))
        value = getattr(obj, f.name)
        if kind == "count" or kind == "optional count":
            check.count(f.name, value, minimum, optional=kind == "optional count")
        elif kind == "flag":
            check.flag(f.name, value)
        elif kind == "text":
            check.text(f.name, value)
        elif kind == "names":
            check.names(f.name, value)


@dataclass
class SummarizeOptions:
    keep_recent: int = DEFAULT_KEEP_RECENT
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS
    preserve_system: bool = True  # the system prompt stays verbatim above the summary
    keep_originals: bool = True
    keep_task: bool = True  # the task (the first real user request) stays verbatim, first after the system message
    evidence: bool = True  # the summary ends with xcompact's evidence section (files, errors, tests, commands)
    keep_user_tokens: int = DEFAULT_KEEP_USER_TOKENS  # the user's later messages kept verbatim, at most
    #: the evidence section's budget; None: 3/4 of the summary's, more for a long head (evidence_room)
    evidence_tokens: int | None = None

    def __post_init__(self) -> None:
        from .arguments import count

        count("keep_recent", self.keep_recent)  # first: a number here (only compact's Policy fits it: None)
        _check_fields(self)


@dataclass
class Policy:
    token_threshold: int | None = DEFAULT_TOKEN_THRESHOLD
    message_threshold: int | None = None
    keep: int = DEFAULT_KEEP
    #: None: as many recent messages as fit under the threshold beside the summary (fit_keep_recent);
    #: a number: xun's fixed keep
    keep_recent: int | None = None
    escalation_rounds: int = 2
    max_retries: int = 2
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS
    preserve_system: bool = True
    keep_originals: bool = True
    exclude_tools: tuple[str, ...] = ()  # tier 1's controls (toolcall's own, in every round)
    keep_turns: int | None = None
    clear_at_least: int | None = None
    placeholder: str | None = None  # a placeholder template of the user's own (model/placeholders.py)
    clear_tool_inputs: bool = False
    max_result_tokens: int | None = None  # any result over it (the kept ones too) cut to a preview
    truncate_inputs: int | None = None  # older calls' argument values cut to this many characters
    images_keep: int | None = None  # only the last N image parts stay
    thinking_keep: int | None = None  # only the last N assistant reasonings stay
    dedup_reads: bool = False  # a read that a later identical read repeats becomes a reference to it
    keep_task: bool = True  # tier 2's (SummarizeOptions)
    evidence: bool = True
    keep_user_tokens: int = DEFAULT_KEEP_USER_TOKENS
    evidence_tokens: int | None = None

    def __post_init__(self) -> None:
        _check_fields(self)

    @property
    def threshold(self) -> int:
        return self.message_threshold if self.message_threshold is not None else int(self.token_threshold or 0)

    @property
    def unit(self) -> str:
        return "messages" if self.message_threshold is not None else "tokens"
