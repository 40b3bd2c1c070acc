"""Every command's options, declared once as click parameters (as pip-tools' scripts/options.py).

The command line decorates its commands from ``options_of`` (compile.py); the batch function builds a
throw-away ``click.Command`` from the same list (``click_command``) to fill in defaults and check
values with the CLI's own messages. The ``--config`` file option belongs to the command line
alone: it is a slot here (``CONFIG``) that the CLI fills."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..model.format_names import FORMATS
from ..model.tokens import AUTO, ENCODINGS
from ..tiers.options import DEFAULT_KEEP, DEFAULT_KEEP_RECENT, DEFAULT_KEEP_USER_TOKENS, DEFAULT_MAX_SUMMARY_TOKENS

F = Callable[..., Any]
#: Commands that run records through the per-record step (``extract`` prints one result instead).
#: Options that are about files and the run, not about a record (the batch function has none).
RUN_OPTIONS = frozenset({"inputs", "output", "in_place", "report_path", "html", "quiet", "warnings", "jobs", "resume",
                         "engine", "address", "api_ready", "sidecar"})
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

    from ..model.secrets import mask_credentials

    shown = repr(mask_credentials(value))  # a URL's user-info or token is never quoted back
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise click.BadParameter(f"{shown} is not a valid URL ({mask_credentials(str(exc))})", ctx=ctx,
                                 param=param) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{shown}: expected http://HOST[:PORT]/v1 or https://...", ctx=ctx, param=param)
    return value

BUILTIN_BACKENDS = ("auto", "extractive", "openai")


def _backend_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A built-in backend, MODULE:ATTR, or an installed xcompact.backends entry point."""
    if value is None or value in BUILTIN_BACKENDS or ":" in value:
        return value
    from ..model.plugins import entry_point_names

    if value in entry_point_names("xcompact.backends"):
        return value
    raise click.BadParameter(f"{value!r} is not one of {', '.join(BUILTIN_BACKENDS)}, a MODULE:ATTR or an installed "
                             "xcompact.backends entry point", ctx=ctx, param=param)


inputs = click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
output = click.option("-o", "--output", metavar="PATH",
                      help="Output file for one input, or directory for several (same relative names). "
                           "Default: stdout for one input.")
in_place = click.option("--in-place", is_flag=True, help="Replace each input atomically with its output.")
report = click.option("--report", "report_path", metavar="PATH",
                      help="Write a JSON report (schemas/report.schema.json) to PATH.")
html = click.option("--html", "html", metavar="PATH",
                    help="Write the dataset page to PATH: one self-contained HTML file (totals, statuses, charts, "
                         "the largest conversations, failures and warnings) that opens offline.")
quiet = click.option("-q", "--quiet", is_flag=True, help="No progress, warnings or summary on stderr; errors only.")
#: How warnings reach stderr (errors and --check's offenders always do).
WARNING_MODES = ("all", "summary", "none")
warnings_option = click.option("--warnings", type=click.Choice(WARNING_MODES), default="all", show_default=True,
                               help="Warning lines on stderr: all (each record's, the first 20, and the run's); "
                                    "summary (records' warnings only counted in the summary line); none (no warning "
                                    "lines at all). Errors and compact --check's offenders are always printed.")
strict = click.option("--strict", is_flag=True,
                      help="Treat broken tool pairing and repeated tool-call IDs as errors.")
encoding = click.option("--encoding", type=click.Choice(ENCODINGS), default=AUTO, show_default=True,
                        help="Vocabulary for token counts (exact, offline): o200k_base (GPT-4o/4.1/5, o-series), "
                             "cl100k_base (GPT-4, GPT-3.5), llama3, qwen; auto: from the conversation's model "
                             "(compact --model, else the model the record names), else cl100k_base. Claude "
                             "models have no public tokenizer: cl100k_base, an approximation.")
no_tokens = click.option("--no-tokens", is_flag=True, help="Do not count tokens (faster).")
originals = click.option("--originals", type=click.Choice(["keep", "drop"]), default="keep", show_default=True,
                         help="Keep the originals of compacted content in the dump (for extract/restore), "
                              "or drop them for the smallest files.")
keep = click.option("--keep", type=click.IntRange(min=0, max=MAX_INT), default=DEFAULT_KEEP, show_default=True,
                    help="How many of the most recent tool results to leave untouched (toolcall_keep_max).")


def _utf8(value: str, ctx: click.Context, param: click.Parameter) -> None:
    """Text that goes into the output must be text: bytes that are not UTF-8 (a shell's $'\\xff')
    are refused here, not by the writer after work was done."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise click.BadParameter(f"{value!r} is not valid UTF-8 (at character {exc.start})", ctx=ctx,
                                 param=param) from None


def _tool_names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...] | None) -> tuple[str, ...]:
    """--exclude-tools a,b --exclude-tools c -> ("a", "b", "c"); an empty name is refused."""
    names: list[str] = []
    for chunk in value or ():
        _utf8(chunk, ctx, param)
        for name in chunk.split(","):
            if not name.strip():
                raise click.BadParameter(f"{chunk!r}: an empty tool name", ctx=ctx, param=param)
            if name.strip() not in names:
                names.append(name.strip())
    return tuple(names)


def _placeholder_template(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A template is checked here, before any work: unknown fields, no {id}, no text of its own."""
    if value is None:
        return None
    from ..model.placeholders import TemplateError, parse_template

    _utf8(value, ctx, param)
    try:
        parse_template(value)
    except TemplateError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def _preview_lines(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    """``HEAD,TAIL``: two numbers of lines."""
    if value is None:
        return None
    import re

    m = re.fullmatch(r"\s*(\d{1,4})\s*,\s*(\d{1,4})\s*", value)
    if m is None:
        raise click.BadParameter(f"{value[:40]!r}: expected HEAD,TAIL, two numbers of lines (e.g. 5,5)",
                                 ctx=ctx, param=param)
    return int(m.group(1)), int(m.group(2))


#: Tier 1's controls, as Anthropic's context editing (clear_tool_uses) names them.
TIER1_CONTROLS: list[Slot] = [
    click.option("--exclude-tools", "exclude_tools", metavar="NAME[,NAME...]", multiple=True, callback=_tool_names,
                 help="Results of these tools are never cleared (repeat the option or separate names by commas)."),
    click.option("--keep-turns", type=click.IntRange(min=0, max=MAX_INT), default=None,
                 help="Also keep the results of the last M assistant turns (assistant messages that call tools); "
                      "given alone, --keep defaults to 0: counted in turns only."),
    click.option("--clear-at-least", type=click.IntRange(min=1, max=MAX_INT), default=None, metavar="TOKENS",
                 help="Clear only when the placeholders free at least this many tokens; else the conversation is "
                      "left exactly as it was (NOTHING_TO_CONDENSE, reason clear_at_least)."),
    click.option("--clear-tool-inputs", is_flag=True, default=False,
                 help="Also replace the arguments (a custom tool's input, such as Codex's apply_patch patch) of "
                      "the calls whose results are cleared (stored, restored exactly)."),
    click.option("--max-result-tokens", type=click.IntRange(min=1, max=MAX_INT), default=None, metavar="TOKENS",
                 help="Cut any other result over this many tokens, the kept ones included, to its placeholder with "
                      "its first and last lines (the original stored as always)."),
    click.option("--truncate-inputs", "truncate_inputs", type=click.IntRange(min=1, max=MAX_INT), default=None,
                 metavar="CHARS",
                 help="Cut every argument value (a custom tool's input) over CHARS characters of the calls whose "
                      "results are old (cleared or not), so the call stays legible; the whole arguments are stored, "
                      "restored exactly."),
    click.option("--images", "images", type=(click.Choice(["keep-last"]), click.IntRange(min=0, max=MAX_INT)),
                 default=None, metavar="keep-last N",
                 help="Keep the last N image parts (data-URL images, in any message); older ones become "
                      "'[image: MIME, ~KB; …]' placeholders, the originals stored. Not in Anthropic or Responses "
                      "records, which are written from their own blocks."),
    click.option("--thinking", "thinking", type=(click.Choice(["keep-last"]), click.IntRange(min=0, max=MAX_INT)),
                 default=None, metavar="keep-last N",
                 help="Keep the reasoning of the last N assistant messages that have one (reasoning_content); "
                      "older reasoning becomes a placeholder, the original stored. Signed or encrypted blocks of "
                      "Anthropic and Responses records are never altered."),
    click.option("--dedup-reads", "dedup_reads", is_flag=True, default=False,
                 help="Replace a read of a file that a later read repeats (same path, same range, same content) "
                      "by a placeholder naming the later one, wherever it is; the original is stored as always."),
    click.option("--preview", "preview", metavar="HEAD,TAIL", default=None, callback=_preview_lines,
                 help="Keep the first HEAD and last TAIL lines of each cleared result in its placeholder, and the "
                      "lines between them that carry the outcome (exit codes, the line closing a traceback, "
                      "test failures); the original is stored as always."),
    click.option("--placeholder", "placeholder", metavar="TEXT", default=None, callback=_placeholder_template,
                 help="The text a cleared result becomes, with fields {id} (required: the key extract takes), "
                      "{tool}, {lines}, {chars}, {tokens}; e.g. 'Old environment output: ({lines} lines omitted, "
                      "ID {id})'. Default: xun's placeholder."),
]
fit = click.option("--fit", type=click.IntRange(min=1, max=MAX_INT), default=None, metavar="TOKENS",
                   help="Fit each record to at most TOKENS (training data): clear tool results from the oldest only "
                        "as far as needed (then cut old call arguments); a record that still does not fit is written "
                        "compacted as far as tier 1 goes and counted STILL_OVER (exit 1), never dropped.")
trigger = click.option("--trigger", type=click.IntRange(min=1, max=MAX_INT), default=None, metavar="TOKENS",
                       help="Clear only conversations over this many tokens; the others are left as they are "
                            "(UNDER_THRESHOLD).")

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


#: Where the command line puts its --config option (a TOML file of defaults; cli/config_file.py).
CONFIG = "--config"
Decorator = Callable[[F], F]
Slot = Decorator | str

#: Inputs, where outputs go, the report, scale: every command that writes conversations.
IO_OPTIONS: list[Slot] = [inputs, from_format, cc_history, output, in_place, report, html, quiet, warnings_option,
                          strict, jobs, resume, engine, address, CONFIG]
TOKEN_OPTIONS: list[Slot] = [encoding, no_tokens]
#: Tier 2: where the cut goes and how big the summary may be.
CUT_OPTIONS: list[Slot] = [
    click.option("--keep-recent", type=click.IntRange(min=0, max=MAX_INT), default=DEFAULT_KEEP_RECENT,
                 show_default=True,
                 help="Messages kept verbatim at the end (summary_keep_max); the system message is not counted. "
                      "compact without it keeps as many as fit under the threshold beside the summary."),
    click.option("--max-summary-tokens", type=click.IntRange(min=64, max=MAX_INT), default=DEFAULT_MAX_SUMMARY_TOKENS,
                 show_default=True, help="Token budget of the summary (all eight sections)."),
    click.option("--preserve-system/--replace-system", default=True, show_default=True,
                 help="Keep the system prompt verbatim above the summary (Claude Code, Codex and OpenHands "
                      "keep it), or replace it by the summary as xun does."),
    click.option("--keep-task/--no-keep-task", default=True, show_default=True,
                 help="Keep the task (the first user message that is the user speaking, not a harness's "
                      "reminder) verbatim, first after the system message."),
    click.option("--keep-user-tokens", type=click.IntRange(min=0, max=MAX_INT), default=DEFAULT_KEEP_USER_TOKENS,
                 show_default=True,
                 help="The user's later messages (besides the task) kept verbatim, the latest first, within so "
                      "many tokens; 0 summarises them."),
    click.option("--evidence/--no-evidence", default=True, show_default=True,
                 help="End the summary with xcompact's evidence section (files changed and read, errors met, "
                      "tests, failed commands), computed from the transcript for every backend."),
    click.option("--evidence-tokens", type=click.IntRange(min=0, max=MAX_INT), default=None,
                 show_default="auto: 3/4 of --max-summary-tokens, growing in proportion to a head over "
                              "150,000 tokens (at most 2,048)",
                 help="Token budget of the evidence section; what it takes beyond 3/4 of --max-summary-tokens "
                      "is added to the summary, never taken from its sections."),
]
#: compact's own: the trigger, the conversation's model, escalation and retries, --check.
THRESHOLD_OPTIONS: list[Slot] = [
    click.option("--token-threshold", type=click.IntRange(min=1, max=MAX_INT), default=None,
                 help="Compact conversations over this many tokens [default: 192000, or 70% of --model's window]."),
    click.option("--message-threshold", type=click.IntRange(min=1, max=MAX_INT), default=None,
                 help="Compact conversations over this many messages (excludes --token-threshold)."),
    click.option("--model", "conversation_model", default=None,
                 help="The conversation's model: with no threshold, trigger at 70% of its context window."),
    click.option("--context-window", type=click.IntRange(min=1, max=MAX_INT), default=None,
                 help="Context window for --model when the built-in table does not know it."),
]
ROUND_OPTIONS: list[Slot] = [
    click.option("--escalation-rounds", type=click.IntRange(min=1, max=MAX_INT), default=2, show_default=True,
                 help="Consecutive tool-call rounds (counted in the dump) after which a summary is forced."),
    click.option("--max-retries", type=click.IntRange(min=0, max=MAX_INT), default=2, show_default=True,
                 help="Extra rounds when still over after a summary; each halves --keep and --keep-recent."),
    click.option("--check", is_flag=True, help="Write nothing; exit 1 when any conversation is over its threshold."),
    click.option("--strategy", metavar="MODULE:ATTR", default=None,
                 help="A compaction strategy of your own (should_compact/compact, as nagents' CompactionStrategy) "
                      "instead of the tiered policy, or the name of an xcompact.strategies entry point."),
]
#: Every writing command's --dry-run: the work done in memory, reported (output sizes included), nothing written.
dry_run = click.option("--dry-run", is_flag=True,
                       help="Do the work in memory and report what would happen, output sizes included; write "
                            "nothing (no -o, --in-place or --resume) and call no model (the offline extractive "
                            "summariser stands in).")


#: summarize's old spelling of --summary-model (its --model), kept hidden: it still works, with a warning.
old_model = click.option("--model", "model", default=None, hidden=True,
                         help="The old spelling of --summary-model (the summariser's model); use --summary-model.")


def backend_options() -> list[Slot]:
    """The summariser's options, the same on every command that summarises."""
    return [
        click.option("--backend", default="auto", show_default=True, callback=_backend_name,
                     metavar="auto|extractive|openai|MODULE:ATTR",
                     help="auto: openai when a server is named (--base-url, or base-url in a --config file), else "
                          "the offline extractive one (OPENAI_API_KEY or OPENAI_BASE_URL alone never sends data); "
                          "MODULE:ATTR (or an xcompact.backends entry point): a summariser of your own implementing "
                          "the backend protocol."),
        click.option("--summary-model", "summary_model", default=None,
                     help="Model of the openai summariser [default: gpt-4o-mini; for compact, the conversation's "
                          "--model]."),
        click.option("--base-url", default=None, callback=_base_url,
                     help="OpenAI-compatible server URL; chooses the openai backend [with --backend openai: "
                          "OPENAI_BASE_URL, else https://api.openai.com/v1]."),
        click.option("--temperature", type=click.FloatRange(min=0.0, max=2.0), default=0.0, show_default=True,
                     callback=_finite, help="Sampling temperature (0 to 2)."),
        click.option("--timeout", type=click.FloatRange(min=0.1), default=None, callback=_finite,
                     help="Seconds per model request [default: 120; 900 for a server on this machine]."),
        click.option("--retries", type=click.IntRange(min=0, max=MAX_INT), default=4, show_default=True,
                     help="Retries of transient failures (429/5xx/timeouts), with exponential backoff honouring "
                          "Retry-After."),
        click.option("--concurrency", type=click.IntRange(min=1, max=MAX_INT), default=None,
                     help="Model requests in flight at once (conversations summarised concurrently) [default: 4; 1 "
                          "for a server on this machine, which serves one at a time unless started with parallel "
                          "slots]."),
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
                     help="Seed sent with each request (with --temperature 0: the same answer on servers that "
                          "honour it)."),
        click.option("--cache-dir", default=None, help="Summary cache directory [default: ~/.cache/xcompact]."),
        click.option("--no-cache", is_flag=True, help="Do not read or write the summary cache."),
    ]


def apply_slots(slots: list[Slot], config: Decorator | None) -> Decorator:
    def decorate(f: F) -> F:
        for slot in reversed(slots):
            if isinstance(slot, str):  # the CLI's --config (skipped by the batch function)
                if config is not None:
                    f = config(f)
            else:
                f = slot(f)
        return f

    return decorate


def slot_params(slots: list[Slot]) -> list[click.Parameter]:
    """The click parameters a list of decorators defines, in the order a command lists them."""
    def probe() -> None: ...

    apply_slots(slots, None)(probe)
    return list(reversed(probe.__click_params__))  # type: ignore[attr-defined]


#: The keyword arguments the backend options add to a command; all but "backend" are openai-only.
BACKEND_KEYS = tuple(p.name for p in slot_params(backend_options()) if p.name)
OPENAI_ONLY = tuple(k for k in BACKEND_KEYS if k != "backend")
