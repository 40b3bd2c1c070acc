"""Build the summariser a ``BackendConfig`` names (apart from config.py: the backends import
their options from there, and this imports the backends)."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from . import Backend
from .config import BackendConfig, OpenAIConfig, choose_backend_name


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
