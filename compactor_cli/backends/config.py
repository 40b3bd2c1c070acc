"""Which summariser a run uses, and its options.

Below the tiers so that the tiers, the engine and a backend all read one definition
(``OpenAIBackend``'s options extend ``OpenAIConfig``); ``factory.make_backend`` builds it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


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

    name: str = "extractive"  # or "openai", or "plugin" (then ``plugin`` names it)
    openai: OpenAIConfig | None = None
    plugin: str | None = None  # --backend MODULE:ATTR or an xcompact.backends entry point


def choose_backend_name(requested: str, base_url: str | None = None, environ: Any = None) -> str:
    """``auto`` is openai when a server is named (--base-url, OPENAI_BASE_URL) or OPENAI_API_KEY
    is set, else the offline extractive summariser."""
    env = os.environ if environ is None else environ
    if requested != "auto":
        return requested
    return "openai" if base_url or env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL") else "extractive"
