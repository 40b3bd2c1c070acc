"""A run's options as typed objects, built once at the CLI edge and passed down as they are.

``Settings`` is what every record needs (picklable, for worker processes); ``RunIO`` is where
the run reads and writes. The summariser's ``BackendConfig`` (backends.config) and the tiers'
own option objects (``SummarizeOptions``, ``Policy``: tiers.options) are defined below and carried here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..tiers.options import DEFAULT_KEEP, Policy, SummarizeOptions

if TYPE_CHECKING:
    from ..backends.config import BackendConfig, OpenAIConfig, choose_backend_name

__all__ = ["BackendConfig", "OpenAIConfig", "Policy", "RunIO", "Settings", "SummarizeOptions", "choose_backend_name"]

_BACKEND_NAMES = frozenset({"BackendConfig", "OpenAIConfig", "choose_backend_name"})


def __getattr__(name: str) -> Any:
    """The summariser's configuration, imported on first use: a tier-1 run never needs it (its
    dataclasses and the backends package are 17 M instructions of start-up)."""
    if name in _BACKEND_NAMES:
        from ..backends import config

        return getattr(config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Settings:
    """Parameters of one run shared by all records (picklable, for worker processes)."""

    command: str
    keep: int = DEFAULT_KEEP
    keep_originals: bool = True
    strict: bool = False
    count_tokens: bool = True
    encoding: str = "auto"  # or one of model.tokens.ENCODINGS
    conversation_model: str | None = None  # compact --model: the conversation's model, for --encoding auto
    write_output: bool = True  # False: validate, compact --check, --dry-run
    dry_run: bool = False  # --dry-run: the output is made (and measured) but not written
    exclude_tools: tuple[str, ...] = ()  # toolcall's tier-1 controls (compact carries them in its Policy)
    keep_turns: int | None = None
    clear_at_least: int | None = None
    placeholder: str | None = None  # --placeholder TEXT: a template of the user's own (model/placeholders.py)
    clear_tool_inputs: bool = False
    max_result_tokens: int | None = None  # --max-result-tokens: any result over it cut to a preview
    truncate_inputs: int | None = None  # --truncate-inputs: older calls' long argument values cut to this
    fit: int | None = None  # toolcall --fit TOKENS: the least tier-1 compaction that fits
    images_keep: int | None = None  # --images keep-last N
    thinking_keep: int | None = None  # --thinking keep-last N
    dedup_reads: bool = False  # --dedup-reads: a read a later identical read repeats becomes a reference to it
    strategy: str | None = None  # compact --strategy MODULE:ATTR: a plug-in policy instead of the tiers
    trigger: int | None = None  # toolcall --trigger: tokens a conversation must exceed to be cleared
    summary: SummarizeOptions | None = None  # summarize
    policy: Policy | None = None  # compact
    check: bool = False  # compact --check
    backend: BackendConfig | None = None  # summarize, compact (not --check)
    input_format: str = "auto"  # --from: one of formats.FORMATS, or auto (detected per record)
    claude_code_history: str = "since-compaction"  # or "full": where a Claude Code log is read from
    to_format: str | None = None  # convert --to


@dataclass(frozen=True)
class RunIO:
    """Where a run reads and writes, and how it reports."""

    inputs: tuple[str, ...]
    output: str | None = None
    in_place: bool = False
    report_path: str | None = None
    html: str | None = None  # --html PATH: the dataset page
    quiet: bool = False
    warnings: str = "all"  # all | summary | none: which warning lines reach stderr (engine/run.py Console)
    jobs: int = 0
    resume: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)  # as the report records them
    api_ready: str | None = None  # --api-ready SIDECAR: outputs without bookkeeping, which goes here
    sidecar: str | None = None  # restore/extract --sidecar SIDECAR: the bookkeeping to put back
    journal: bool = True  # checkpoints for --resume (convert has none: it is cheap to run again)
