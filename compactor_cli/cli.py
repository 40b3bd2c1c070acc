"""The ``xcompact`` command: parse options, call the library, print, map errors to exit codes.

stdout carries data only; progress, warnings, errors and the summary go to stderr."""

from __future__ import annotations

import sys
from typing import Any

import click

from .engine import params as opt
from .engine.params import MAX_INT, options_of
from .engine.report import EXIT_FAILED, EXIT_OK, EXIT_STDOUT_CLOSED, EXIT_USAGE
from .errors import InvalidInputError, OutputError, UsageError, XCompactError
from .version import __version__

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _config_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from .config import load_config_callback

    return load_config_callback(ctx, param, value)


#: --config: the command line's alone (the batch function reads no file); the commands' option
#: lists (engine/params.py) leave a slot for it.
config_option = click.option("--config", metavar="FILE", is_eager=True, expose_value=False, callback=_config_callback,
                             help="TOML file of option defaults ([tool.xcompact] tables) [default: ./pyproject.toml].")


def _emit(line: str) -> None:
    click.echo(line, err=True)


class _Bar:
    """A tqdm bar over bytes (rate, ETA) that also counts conversations."""

    def __init__(self, total: int, desc: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total or None, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
                        file=sys.stderr, leave=False, dynamic_ncols=True)
        self.conversations = 0

    def update(self, nbytes: int) -> None:
        self.conversations += 1
        self.bar.update(nbytes)
        if self.conversations % 50 == 0:
            self.bar.set_postfix_str(f"{self.conversations} conv", refresh=False)

    def close(self) -> None:
        self.bar.close()


def _progress(quiet: bool):
    """Progress on stderr, only for a person watching a terminal."""
    if quiet or not sys.stderr.isatty():
        return None
    return _Bar


def _run(settings: Any, io: dict[str, Any], parameters: dict[str, Any]) -> None:
    """Hand the typed options to the runner; map what it raises to exit codes."""
    from .engine.local import run_command
    from .engine.report import ReportError
    from .engine.settings import RunIO

    ctx = click.get_current_context()
    for name, source in ctx.meta.get("xcompact_config_destructive", []):
        if not io.get(name):
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(f"{source} sets {name.replace('_', '-')} = true: {flag} rewrites inputs, so it is "
                                   f"never taken from a config file; give {flag} on the command line (or remove "
                                   "it from the file)")
    if io.get("engine") == "ray":
        _run_ray(settings, io, parameters)
    if io.get("address"):
        raise click.UsageError("--address names a Ray cluster: use it with --engine ray")
    run_io = RunIO(inputs=tuple(io["inputs"]), output=io.get("output"), in_place=io.get("in_place", False),
                   report_path=io.get("report_path"), quiet=io.get("quiet", False), jobs=io.get("jobs") or 0,
                   resume=io.get("resume", False),
                   parameters={**parameters, "config": ctx.meta.get("xcompact_config")},
                   api_ready=io.get("api_ready"), sidecar=io.get("sidecar"))
    from .files.sinks import StdoutClosed

    try:
        code = run_command(settings, run_io, _emit, _progress(run_io.quiet))
    except StdoutClosed:  # the report went to stdout and its reader left
        from .engine.local import silence_stdout

        silence_stdout()
        sys.exit(EXIT_STDOUT_CLOSED)
    except (UsageError, OutputError) as exc:
        if isinstance(exc, ReportError):
            _emit(f"error: {exc}")
            sys.exit(EXIT_FAILED)
        raise click.UsageError(str(exc)) from None
    except OSError as exc:  # outside any one input (e.g. the tokenizer's cache under a full disk or ulimit -f)
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        _emit(f"error: a file this run needs cannot be read or written: {exc.strerror or exc}{where}; "
              "free space or raise the limit and run again")
        sys.exit(EXIT_FAILED)
    sys.exit(code)


def _run_ray(settings: Any, io: dict[str, Any], parameters: dict[str, Any]) -> None:
    """--engine ray: the same records through the same step on a Ray cluster (compactor_cli.ray)."""
    for name, flag, why in (("in_place", "--in-place", "object stores and Ray workers cannot rename over an input; "
                             "write to -o DIR"),
                            ("resume", "--resume", "a Ray run is not journaled; run it again (its output "
                             "directory must be new or empty)"),
                            ("jobs", "-j/--jobs", "Ray schedules its own workers (size the cluster instead)"),
                            ("api_ready", "--api-ready", "its sidecar follows one local input's records; run locally"),
                            ("sidecar", "--sidecar", "its lines follow one local input's records; run locally")):
        if io.get(name) and _explicit(name):
            raise click.UsageError(f"{flag} does not apply to --engine ray: {why}")
    try:
        from .ray import run_cli
    except ImportError as exc:
        raise click.UsageError(f"--engine ray needs Ray Data and pyarrow: pip install 'xcompact[ray]' ({exc})") \
            from None
    ctx = click.get_current_context()
    parameters = {**parameters, "config": ctx.meta.get("xcompact_config"), "engine": "ray"}
    try:
        code = run_cli(settings, inputs=list(io["inputs"]), output=io.get("output"), report_path=io.get("report_path"),
                       address=io.get("address"), quiet=io.get("quiet", False), parameters=parameters, emit=_emit)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    except OutputError as exc:
        _emit(f"error: {exc}")
        sys.exit(EXIT_FAILED)
    sys.exit(code)


def _explicit(name: str) -> bool:
    """Was option ``name`` given on the command line (not a default or a config value)?"""
    source = click.get_current_context().get_parameter_source(name)
    return source is click.core.ParameterSource.COMMANDLINE


def _configured(command: str, kw: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(batch.Configured, the run's io options). Record options become Settings through the
    same function the library uses (batch.build), so they are defined once."""
    from .engine.configure import build
    from .engine.params import RUN_OPTIONS

    io = {k: v for k, v in kw.items() if k in RUN_OPTIONS}
    values = {k: v for k, v in kw.items() if k not in RUN_OPTIONS}
    io["strict"] = values.get("strict", False)
    explicit = {k for k in values if _explicit(k)}
    try:
        configured = build(command, values, explicit)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    if not io.get("quiet"):
        for text in configured.warnings:
            _emit(f"warning: {text}")
    return configured, io


def _command(command: str, kw: dict[str, Any]) -> None:
    configured, io = _configured(command, kw)
    _run(configured.settings, io, configured.parameters)


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="xcompact")
def cli() -> None:
    """Compact saved LLM conversation transcripts offline, in batch.

    Inputs are dumps() JSON objects, bare lists of messages, or JSONL (one conversation per
    line); "-" reads stdin; directories are searched for *.json and *.jsonl. Exit codes:
    0 all went well, 1 some conversation or file failed, 2 usage error, 130 interrupted.
    """


@cli.command()
@options_of("toolcall", config_option)
def toolcall(**kw: Any) -> None:
    """Tier 1: replace old tool results by a placeholder naming their tool-call ID.

    Tool results older than the most recent --keep are replaced where the placeholder is
    shorter; the originals stay in the dump under compacted_tool_results (see extract, restore).

    \b
    Example:
      xcompact toolcall fixtures/taubench_airline_5.jsonl --keep 4 -o out.jsonl --report report.json
    """
    _command("toolcall", kw)


@cli.command()
@options_of("summarize", config_option)
def summarize(**kw: Any) -> None:
    """Tier 2: replace older messages by one structured summary; keep recent ones verbatim.

    The summary has eight sections (system_context, overview, key_facts, user_preferences,
    decisions, pending_tasks, open_questions, tone_context) within --max-summary-tokens. On
    any failure the conversation is left exactly as it was (SUMMARIZE_FAILED).

    \b
    Example:
      xcompact summarize fixtures/swe_agent_3.jsonl --backend extractive --keep-recent 8 -o summarized.jsonl
    """
    _command("summarize", kw)


@cli.command()
@options_of("compact", config_option)
def compact(**kw: Any) -> None:
    """The tiered policy: reclaim tool results first, summarise only when still over.

    Conversations over --token-threshold (or --message-threshold) get tier 1; if the estimate
    is still above 95% of the threshold (or the dump has had --escalation-rounds tool-call
    rounds) a summary follows in the same round; still over, up to --max-retries more rounds
    halve both keep counts.

    \b
    Example:
      xcompact compact fixtures/taubench_airline_5.jsonl --token-threshold 3000 --backend extractive -o compacted.jsonl
    """
    configured, io = _configured("compact", kw)  # refuses --check with --dry-run first
    if kw["check"] or kw["dry_run"]:
        if kw.get("in_place") or kw.get("output"):
            raise click.UsageError("--check and --dry-run write nothing: drop -o/--in-place")
        if kw.get("resume"):
            raise click.UsageError("--check and --dry-run write nothing to resume: drop --resume")
    _run(configured.settings, io, configured.parameters)


@cli.command()
@options_of("restore", config_option)
def restore(**kw: Any) -> None:
    """Give back the conversations as they were before compaction.

    Puts every stored original back in place of its placeholder and undoes summaries.

    \b
    Example:
      xcompact restore out.jsonl -o restored.jsonl   (out.jsonl: see the toolcall example)
    """
    _command("restore", kw)


@cli.command()
@options_of("validate", config_option)
def validate(**kw: Any) -> None:
    """Check conversations against the schema and the tool-pairing rules; write nothing.

    Exit 1 when any conversation is invalid (with --strict, also on broken tool pairing or
    repeated tool-call IDs).

    \b
    Example:
      xcompact validate fixtures/taubench_airline_5.jsonl fixtures/claude_code_session.json
    """
    _command("validate", kw)


@cli.command()
@click.argument("tool_call_id")
@click.argument("input_path", metavar="INPUT")
@click.option("--occurrence", type=click.IntRange(min=1, max=MAX_INT), default=None,
              help="With a repeated tool-call ID: the K-th result with that ID (default: the first).")
@click.option("--line", "line_no", type=click.IntRange(min=1, max=MAX_INT), default=None,
              help="JSONL: look only in the conversation on this line.")
@opt.from_format
@opt.sidecar
def extract(tool_call_id: str, input_path: str, occurrence: int | None, line_no: int | None,
            input_format: str, sidecar: str | None) -> None:
    """Print the original content of a compacted tool result.

    A string is printed as it is; list-of-parts content is printed as JSON. When several
    conversations hold the ID, the first one is used (--line chooses).

    \b
    Example:
      xcompact extract call_oIHazX6yQrB8hUwl4cRilFKj out.jsonl --line 1   (out.jsonl: see toolcall)
    """
    import orjson

    from .formats import iter_records, parse_record
    from .tiers.toolcall import extract_tool_result

    found = []
    errors = 0
    last_line = 0
    try:
        records = iter_records(input_path, from_=input_format)
        if sidecar is not None:  # an --api-ready output: its bookkeeping comes back record by record
            from .engine.apiready import SidecarReader, merged

            records = merged(records, SidecarReader(sidecar))
        for rec in records:
            last_line = rec.line or last_line
            if line_no is not None and rec.line not in (line_no, None):
                continue
            try:
                dump, codec = parse_record(rec.raw, input_format, source=rec.source, line=rec.line)
                fatal = [p for p in codec.problems(dump) if p.fatal]  # shapes checked before any lookup
                if fatal:
                    raise InvalidInputError(fatal[0].message, fatal[0].pointer)
                content, shared = extract_tool_result(dump, tool_call_id, occurrence)
                found.append((rec, content, shared))
            except InvalidInputError as exc:
                if "no compacted tool result" not in str(exc):
                    errors += 1
                    _emit(f"error: {rec.where}: {exc}")
            except Exception as exc:  # noqa: BLE001  one odd record never ends the search
                from .engine.step import unexpected_error

                errors += 1
                _emit(f"error: {rec.where}: {unexpected_error(exc)}")
    except (InvalidInputError, OSError) as exc:
        _emit(f"error: {input_path}: {getattr(exc, 'strerror', None) or exc}")
        sys.exit(EXIT_FAILED)
    if line_no is not None and line_no > last_line and last_line:
        _emit(f"error: {input_path}: there is no line {line_no}: the file's last conversation is on line {last_line}")
        sys.exit(EXIT_FAILED)
    if not found:
        where = f"{input_path}:{line_no}" if line_no is not None else input_path
        _emit(f"error: {where}: no compacted tool result with ID {tool_call_id!r}"
              + (f" (occurrence {occurrence})" if occurrence else ""))
        sys.exit(EXIT_FAILED)
    rec, content, shared = found[0]
    if shared > 1 and occurrence is None:
        _emit(f"warning: {rec.where}: {shared} compacted results share ID {tool_call_id!r}; "
              "printing the first (use --occurrence K)")
    if len(found) > 1:
        _emit(f"warning: {len(found)} conversations hold ID {tool_call_id!r}; printing {rec.where} (use --line)")
    if isinstance(content, str):
        sys.stdout.write(content if content.endswith("\n") else content + "\n")
    else:
        sys.stdout.buffer.write(orjson.dumps(content) + b"\n")
    sys.exit(EXIT_FAILED if errors else EXIT_OK)


from .formats.convert_cmd import convert  # noqa: E402  (xcompact convert: formats/convert_cmd.py)

cli.add_command(convert)


def main() -> None:
    """Console-script entry point: XCompactError never escapes as a traceback."""
    try:
        cli(prog_name="xcompact")
    except XCompactError as exc:
        _emit(f"error: {exc}")
        sys.exit(EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILED)
