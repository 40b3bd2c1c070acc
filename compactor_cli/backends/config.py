"""Which summariser a run uses and its options, and the factory that builds it.

At the bottom of the tiers so that the tiers, the engine and a backend all read one definition
(``OpenAIBackend``'s options extend ``OpenAIConfig``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from . import Backend


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


def make_backend(config: BackendConfig | str | None, text_tokens: Any, max_summary_tokens: int) -> Backend:
    """The backend a ``BackendConfig`` names (or a name: "auto", "extractive", "openai").
    ``text_tokens`` counts the tokens of a text. Option problems (an input budget too small for
    the prompt) raise UsageError here, before any work."""
    if config is None or isinstance(config, str):
        name = choose_backend_name(config or "extractive")
        config = BackendConfig(name, OpenAIConfig() if name == "openai" else None)
    if config.name == "extractive":
        from .extractive import ExtractiveBackend

        return ExtractiveBackend(text_tokens)
    if config.name == "openai":
        from dataclasses import asdict

        from .openai_backend import OpenAIBackend, OpenAIOptions

        backend = OpenAIBackend(OpenAIOptions(**asdict(config.openai or OpenAIConfig())), text_tokens)
        backend.check_budget(max_summary_tokens)
        return backend
    raise UsageError(f"unknown backend {config.name!r}; choose extractive or openai")
