"""A run's options as typed objects, built once at the CLI edge and passed down as they are.

``Settings`` is what every record needs (picklable, for worker processes); ``RunIO`` is where
the run reads and writes; ``BackendConfig`` names the summariser and its options. The tiers'
own option objects (``SummarizeOptions``, ``Policy``) live with the tiers and are carried here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the tiers are imported lazily: toolcall never pays for them
    from ..tiers.compact import Policy
    from ..tiers.summarize import SummarizeOptions

from ..tiers.toolcall import DEFAULT_KEEP


@dataclass(frozen=True)
class OpenAIConfig:
    model: str | None = None
    base_url: str | None = None
    temperature: float = 0.0
    timeout: float | None = None  # None: 120 s, or 900 s for a server on this machine (a CPU model is slow)
    retries: int = 4
    concurrency: int | None = None  # None: 4, or 1 for a server on this machine (one request at a time)
    instructions: str | None = None  # the text of --prompt-file
    summary_input_tokens: int | None = None
    structured: str = "auto"  # auto | json_schema | json_object | markdown (json: json_schema)
    seed: int | None = None  # sent as the request's seed (reproducible answers where the server honours it)
    cache_dir: str | None = None  # None: no cache


@dataclass(frozen=True)
class BackendConfig:
    """The summariser a run uses: ``extractive`` (offline) or ``openai`` with its options."""

    name: str = "extractive"
    openai: OpenAIConfig | None = None


def choose_backend_name(requested: str, base_url: str | None = None, environ: Any = None) -> str:
    """``auto`` is openai when a server is named (--base-url, OPENAI_BASE_URL) or OPENAI_API_KEY
    is set, else the offline extractive summariser."""
    env = os.environ if environ is None else environ
    if requested != "auto":
        return requested
    return "openai" if base_url or env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL") else "extractive"


@dataclass(frozen=True)
class Settings:
    """Parameters of one run shared by all records (picklable, for worker processes)."""

    command: str
    keep: int = DEFAULT_KEEP
    keep_originals: bool = True
    strict: bool = False
    count_tokens: bool = True
    encoding: str = "cl100k_base"
    write_output: bool = True  # False: validate, compact --check / --dry-run
    summary: SummarizeOptions | None = None  # summarize
    policy: Policy | None = None  # compact
    check: bool = False  # compact --check
    backend: BackendConfig | None = None  # summarize, compact (not --check)
    input_format: str = "auto"  # --from: one of formats.FORMATS, or auto (detected per record)
    claude_code_history: str = "since-compaction"  # or "full": where a Claude Code log is read from


@dataclass(frozen=True)
class RunIO:
    """Where a run reads and writes, and how it reports."""

    inputs: tuple[str, ...]
    output: str | None = None
    in_place: bool = False
    report_path: str | None = None
    quiet: bool = False
    jobs: int = 0
    resume: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)  # as the report records them
    api_ready: str | None = None  # --api-ready SIDECAR: outputs without bookkeeping, which goes here
    sidecar: str | None = None  # restore/extract --sidecar SIDECAR: the bookkeeping to put back
