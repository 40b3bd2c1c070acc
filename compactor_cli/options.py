"""Click options shared by the commands, defined once (as pip-tools does)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from .formats.base import FORMATS
from .model.tokens import DEFAULT_ENCODING
from .tiers.options import DEFAULT_KEEP

F = Callable[..., Any]
#: Counts beyond 64 bits are refused at the edge (a report, a journal and the tiers store them as such).
MAX_INT = 2**63 - 1


def _finite(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """nan and inf pass click's FloatRange (comparisons with nan are false): refuse them."""
    import math

    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", ctx=ctx, param=param)
    return value


def _base_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An http(s) URL with a host and, if any, a numeric port: anything else is a usage error
    before any work, not a traceback from the HTTP client."""
    if value is None:
        return value
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a valid URL ({exc})", ctx=ctx, param=param) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{value!r}: expected http://HOST[:PORT]/v1 or https://...", ctx=ctx, param=param)
    return value

inputs = click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
output = click.option("-o", "--output", metavar="PATH",
                      help="Output file for one input, or directory for several (same relative names). "
                           "Default: stdout for one input.")
in_place = click.option("--in-place", is_flag=True, help="Replace each input atomically with its output.")
report = click.option("--report", "report_path", metavar="PATH",
                      help="Write a JSON report (schemas/report.schema.json) to PATH.")
quiet = click.option("-q", "--quiet", is_flag=True, help="No progress, warnings or summary on stderr; errors only.")
strict = click.option("--strict", is_flag=True,
                      help="Treat broken tool pairing and repeated tool-call IDs as errors.")
encoding = click.option("--encoding", default=DEFAULT_ENCODING, show_default=True,
                        help="tiktoken encoding for token counts.")
no_tokens = click.option("--no-tokens", is_flag=True, help="Do not count tokens (faster).")
originals = click.option("--originals", type=click.Choice(["keep", "drop"]), default="keep", show_default=True,
                         help="Keep the originals of compacted content in the dump (for extract/restore), "
                              "or drop them for the smallest files.")
keep = click.option("--keep", type=click.IntRange(min=0, max=MAX_INT), default=DEFAULT_KEEP, show_default=True,
                    help="How many of the most recent tool results to leave untouched (toolcall_keep_max).")


def _config_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from .config import load_config_callback

    return load_config_callback(ctx, param, value)


config = click.option("--config", metavar="FILE", is_eager=True, expose_value=False, callback=_config_callback,
                      help="TOML file of option defaults ([tool.xcompact] tables) [default: ./pyproject.toml].")
jobs = click.option("-j", "--jobs", type=click.IntRange(min=0, max=MAX_INT), default=0, show_default=True,
                    help="Worker processes for the CPU-bound work; 0 = all cores (one for --no-tokens toolcall/restore "
                         "under 256 MiB). Output is the same for any -j.")
resume = click.option("--resume", is_flag=True,
                      help="Continue an interrupted run with the same options from its last checkpoint.")
from_format = click.option("--from", "--input-format", "input_format", type=click.Choice(("auto",) + FORMATS),
                           default="auto", show_default=True,
                           help="Format of the inputs; auto detects it per record (a Claude Code or Codex log per "
                                "file). openai, anthropic and responses are written back in their format, logs as "
                                "OpenAI dumps.")
cc_history = click.option("--claude-code-history", "claude_code_history",
                          type=click.Choice(["since-compaction", "full"]), default="since-compaction",
                          show_default=True,
                          help="Claude Code logs: read from the last compact_boundary (what the model had; the "
                               "earlier part is carried in source.before_compaction and restore gives it back), "
                               "or the whole file.")
api_ready = click.option("--api-ready", "api_ready", metavar="SIDECAR", default=None,
                         help="Write each output record exactly as its API takes it (no xcompact bookkeeping at the "
                              "top level); the bookkeeping goes, record by record, to the JSONL file SIDECAR, which "
                              "restore --sidecar and extract --sidecar read. One input; not with --resume.")
sidecar = click.option("--sidecar", "sidecar", metavar="SIDECAR", default=None,
                       help="The --api-ready sidecar of this input: its bookkeeping is put back record by record "
                            "before reading.")
engine = click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                      help="local: this machine (-j processes); ray: a Ray cluster (pip install 'xcompact[ray]'); "
                           "inputs and -o DIR may be s3:// or gs:// URLs, outputs are directories of ordered parts.")
address = click.option("--address", metavar="ADDR", default=None,
                       help="--engine ray: the cluster to join (HOST:PORT of its head, or 'auto') [default: "
                            "RAY_ADDRESS, else a local cluster started for this run].")


def io_options(f: F) -> F:
    """Inputs, where outputs go, the report, scale: every command that writes conversations."""
    for opt in reversed([inputs, from_format, cc_history, output, in_place, report, quiet, strict, jobs, resume, engine,
                         address, config]):
        f = opt(f)
    return f


def token_options(f: F) -> F:
    for opt in reversed([encoding, no_tokens]):
        f = opt(f)
    return f


def cut_options(f: F) -> F:
    """Tier 2: where the cut goes and how big the summary may be."""
    from .tiers.options import DEFAULT_KEEP_RECENT, DEFAULT_MAX_SUMMARY_TOKENS

    opts = [
        click.option("--keep-recent", type=click.IntRange(min=0, max=MAX_INT), default=DEFAULT_KEEP_RECENT, show_default=True,
                     help="Messages kept verbatim at the end (summary_keep_max); the system message is not counted."),
        click.option("--max-summary-tokens", type=click.IntRange(min=64, max=MAX_INT), default=DEFAULT_MAX_SUMMARY_TOKENS,
                     show_default=True, help="Token budget of the summary (all eight sections)."),
        click.option("--preserve-system/--replace-system", default=True, show_default=True,
                     help="Keep the system prompt verbatim above the summary (Claude Code, Codex and OpenHands "
                          "keep it), or replace it by the summary as xun does."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _backend_opts(model_flag: str) -> list[Callable[[F], F]]:
    return [
        click.option("--backend", type=click.Choice(["auto", "extractive", "openai"]), default="auto",
                     show_default=True,
                     help="auto: openai when --base-url, OPENAI_BASE_URL or OPENAI_API_KEY is given, else the "
                          "offline extractive one."),
        click.option(model_flag, "summary_model", default=None,
                     help="Model of the openai summariser [default: gpt-4o-mini"
                          + ("; for compact, its --model" if model_flag != "--model" else "") + "]."),
        click.option("--base-url", default=None, callback=_base_url,
                     help="OpenAI-compatible server URL (or OPENAI_BASE_URL)."),
        click.option("--temperature", type=click.FloatRange(min=0.0, max=2.0), default=0.0, show_default=True,
                     callback=_finite, help="Sampling temperature (0 to 2)."),
        click.option("--timeout", type=click.FloatRange(min=0.1), default=None, callback=_finite,
                     help="Seconds per model request [default: 120; 900 for a server on this machine]."),
        click.option("--retries", type=click.IntRange(min=0, max=MAX_INT), default=4, show_default=True,
                     help="Retries of transient failures (429/5xx/timeouts), with exponential backoff honouring "
                          "Retry-After."),
        click.option("--concurrency", type=click.IntRange(min=1, max=MAX_INT), default=None,
                     help="Model requests in flight at once (conversations summarised concurrently) [default: 4; 1 "
                          "for a server on this machine, which serves one at a time unless started with parallel slots]."),
        click.option("--prompt-file", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="File whose text replaces the summariser's instructions (the section format is kept)."),
        click.option("--summary-input-tokens", type=click.IntRange(min=1000, max=MAX_INT), default=None,
                     help="Most tokens sent per model request [default: the model's context window from the "
                          "table, else 100000]; longer heads are clipped and summarised in chunks."),
        click.option("--structured", type=click.Choice(["auto", "json_schema", "json_object", "markdown", "json"]),
                     default="auto", show_default=True,
                     help="How the eight sections are asked for: json_schema (response_format, OpenAI, llama-server, "
                          "vLLM), json_object (with a schema: llama-cpp-python), markdown (headings); auto: "
                          "negotiated once per run, stepping down when the server refuses one. json = json_schema."),
        click.option("--seed", type=click.IntRange(min=0, max=2**63 - 1), default=None,
                     help="Seed sent with each request (with --temperature 0: the same answer on servers that honour it)."),
        click.option("--cache-dir", default=None, help="Summary cache directory [default: ~/.cache/xcompact]."),
        click.option("--no-cache", is_flag=True, help="Do not read or write the summary cache."),
    ]


def _param_names(decorators: list[Callable[[F], F]]) -> tuple[str, ...]:
    """The parameter names a list of click decorators defines (so no list is kept by hand)."""
    def probe() -> None: ...

    for d in decorators:
        d(probe)
    return tuple(p.name for p in probe.__click_params__)  # type: ignore[attr-defined]


#: The keyword arguments backend_options adds to a command; all but "backend" are openai-only.
BACKEND_KEYS = _param_names(_backend_opts("--model"))
OPENAI_ONLY = tuple(k for k in BACKEND_KEYS if k != "backend")


def backend_options(model_flag: str = "--model"):
    """The summariser backend. ``compact`` names its model option --summary-model, since its
    --model is the conversation's model (for the threshold), as nagents separates the two."""

    def decorate(f: F) -> F:
        for opt in reversed(_backend_opts(model_flag)):
            f = opt(f)
        return f

    return decorate
