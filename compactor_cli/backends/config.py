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
    #: why the run sends to this server ("--backend openai", "--base-url", "base-url in FILE"),
    #: for the messages that name it (the notice on stderr, a failure to connect)
    chosen_by: str | None = None


@dataclass(frozen=True)
class BackendConfig:
    """The summariser a run uses: ``extractive`` (offline) or ``openai`` with its options."""

    name: str = "extractive"  # or "openai", or "plugin" (then ``plugin`` names it)
    openai: OpenAIConfig | None = None
    plugin: str | None = None  # --backend MODULE:ATTR or an xcompact.backends entry point


def choose_backend_name(requested: str, base_url: str | None = None, environ: Any = None) -> str:
    """``auto`` is openai only when the user named a server (``base_url``: --base-url, or a config
    file the user named); else the offline extractive summariser. The environment never chooses:
    OPENAI_API_KEY is only the key, and OPENAI_BASE_URL only the server, of a run that chose the
    openai backend (``environ`` is accepted for older callers and not read)."""
    if requested != "auto":
        return requested
    return "openai" if base_url else "extractive"


#: Where the openai client sends requests when no base URL is given.
DEFAULT_SERVER = "https://api.openai.com/v1"


class BadServerURL(ValueError):
    """A base URL that is not http(s)://HOST[:PORT]/... (never quoted: it may hold credentials)."""


def server_url(base_url: str | None, environ: Any = None) -> str:
    """The URL the openai backend sends to: ``base_url``, else OPENAI_BASE_URL, else OpenAI's API.
    Raises BadServerURL for one that is not http(s) with a host."""
    env = os.environ if environ is None else environ
    url = base_url or env.get("OPENAI_BASE_URL") or DEFAULT_SERVER
    server_host(url)
    return url


def server_host(url: str) -> str:
    """HOST[:PORT] of a server URL, without user-info (what the run names on stderr)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise BadServerURL("not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadServerURL("expected http://HOST[:PORT]/v1 or https://...")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}" if port is not None else host
