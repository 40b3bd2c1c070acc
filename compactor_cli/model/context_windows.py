"""Context windows of common models, for defaults (summariser input, compact thresholds).

A small documented table: models not listed need ``--context-window`` / ``--summary-input-tokens``.
Names match by longest prefix, so dated snapshots ("gpt-4o-2024-08-06") find their family."""

from __future__ import annotations

CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "deepseek": 128_000,
    "qwen": 131_072,
    "llama-3": 128_000,
    "mistral": 128_000,
}


def context_window(model: str | None) -> int | None:
    """The context window of ``model`` by longest matching prefix, or None when unknown."""
    if not model:
        return None
    name = model.lower().rsplit("/", 1)[-1]
    best = max((p for p in CONTEXT_WINDOWS if name.startswith(p)), key=len, default=None)
    return CONTEXT_WINDOWS[best] if best else None
