"""The ``xcompact`` command: parse options, call the library, print, map errors to exit codes.

stdout carries data only; progress, warnings, errors and the summary go to stderr."""

from __future__ import annotations

import sys
from typing import Any

import click

from . import __version__
from . import options as opt
from .errors import InvalidInputError, OutputError, UsageError, XCompactError
from .report import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Report

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


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


def _run_command(command: str, io: dict[str, Any], settings_kwargs: dict[str, Any],
                 parameters: dict[str, Any]) -> None:
    """Plan outputs, run, report, exit. ``io`` holds the options of options.io_options."""
    import os
    import signal

    from .files import plan_outputs
    from .journal import Journal, journal_path
    from .pipeline import Settings
    from .runner import run

    quiet, report_path = io.get("quiet", False), io.get("report_path")
    settings = Settings(command=command, **settings_kwargs)
    try:
        targets = plan_outputs(list(io["inputs"]), io.get("output"), io.get("in_place", False)) \
            if settings.write_output else _read_only_targets(io["inputs"])
    except (UsageError, OutputError) as exc:
        raise click.UsageError(str(exc)) from None
    ctx = click.get_current_context()
    parameters = {**parameters, "config": ctx.meta.get("xcompact_config")}
    journal = None
    if settings.write_output and all(t.path is not None for t in targets):
        path = journal_path(command, parameters, targets, report_path)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            journal = Journal(path, resume=io.get("resume", False))
        except OSError as exc:
            if io.get("resume"):
                raise click.UsageError(f"cannot read the journal in {os.path.dirname(path)}: {exc.strerror}") from None
            _emit(f"warning: cannot keep checkpoints in {os.path.dirname(path)} ({exc.strerror}); "
                  "this run cannot be resumed (set XDG_CACHE_HOME)")
    elif io.get("resume"):
        raise click.UsageError("--resume needs outputs in files (-o or --in-place), not stdout")
    if journal is not None and journal.resumed and journal.state.get("complete"):
        # resuming a finished run must not run it again: --in-place it would compact its own output
        if not quiet:
            _emit("nothing to resume: this run already finished (run without --resume to start again)")
        sys.exit(EXIT_OK)
    try:
        report = Report(command=command, parameters=parameters, report_path=report_path,
                        resume_state=journal.state.get("report") if journal and journal.resumed else None)
    except OSError as exc:
        raise click.UsageError(f"cannot write the report {report_path}: {exc.strerror}") from None
    jobs = io.get("jobs") or _auto_jobs(settings, targets)

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        run(targets, settings, report, _emit, quiet=quiet, progress=_progress(quiet), jobs=jobs, journal=journal)
    except UsageError as exc:
        report.abort()
        raise click.UsageError(str(exc)) from None
    except KeyboardInterrupt:
        report.abort(keep=journal is not None)
        hint = "; run the same command with --resume to continue" if journal is not None else ""
        _emit(f"interrupted: no output was left half-written{hint}")
        sys.exit(EXIT_INTERRUPTED)
    finally:
        signal.signal(signal.SIGTERM, previous)
    report.close()
    if journal is not None:
        journal.save(complete=True, current=None)
    if not quiet:
        _emit(report.summary())
    sys.exit(report.exit_code)


#: --no-tokens toolcall/restore cost little CPU per record: below this much input a worker
#: pool costs more than it saves (bench/README.md: slower at 100 MB, 1.5x faster at 500 MB).
LIGHT_PARALLEL_MIN_BYTES = 256 * 2**20


def _auto_jobs(settings: Any, targets: list) -> int:
    """-j 0: all cores, except light work on inputs too small to repay a pool."""
    import os

    from .runner import input_bytes

    light = settings.command in ("toolcall", "restore") and not settings.count_tokens
    if light and input_bytes(targets) < LIGHT_PARALLEL_MIN_BYTES:
        return 1
    return os.cpu_count() or 1


def _read_only_targets(inputs: tuple[str, ...]):
    from .files import Target, expand_inputs

    files = expand_inputs(list(inputs))
    if not files:
        raise UsageError("no input files found (directories are searched for *.json and *.jsonl)")
    return [Target(f, None) for f in files]


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="xcompact")
def cli() -> None:
    """Compact saved LLM conversation transcripts offline, in batch.

    Inputs are dumps() JSON objects, bare lists of messages, or JSONL (one conversation per
    line); "-" reads stdin; directories are searched for *.json and *.jsonl. Exit codes:
    0 all went well, 1 some conversation or file failed, 2 usage error, 130 interrupted.
    """


@cli.command()
@opt.io_options
@opt.keep
@opt.originals
@opt.token_options
def toolcall(keep: int, originals: str, encoding: str, no_tokens: bool, **io: Any) -> None:
    """Tier 1: replace old tool results by a placeholder naming their tool-call ID.

    Tool results older than the most recent --keep are replaced where the placeholder is
    shorter; the originals stay in the dump under compacted_tool_results (see extract, restore).

    \b
    Example:
      xcompact toolcall fixtures/taubench_airline_5.jsonl --keep 4 -o out.jsonl --report report.json
    """
    strict = io["strict"]
    _run_command("toolcall", io,
                 dict(keep=keep, keep_originals=originals == "keep", strict=strict,
                      count_tokens=not no_tokens, encoding=encoding),
                 dict(keep=keep, originals=originals, strict=strict, encoding=encoding, tokens=not no_tokens))


BACKEND_KEYS = ("backend", "summary_model", "base_url", "temperature", "timeout", "retries", "concurrency",
                "prompt_file", "summary_input_tokens", "cache_dir", "no_cache")


def _split_backend(kw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(backend options, the rest: io options) of a command's keyword arguments."""
    return {k: v for k, v in kw.items() if k in BACKEND_KEYS}, {k: v for k, v in kw.items() if k not in BACKEND_KEYS}


def _backend_extra(backend: str, summary_model: str | None, base_url: str | None, temperature: float,
                   timeout: float, retries: int, concurrency: int, prompt_file: str | None,
                   summary_input_tokens: int | None, cache_dir: str | None, no_cache: bool,
                   dry_run: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Settings for the summariser backend, and the parameters the report records."""
    from .backends import choose_backend_name
    from .cache import default_cache_dir

    chosen = choose_backend_name(backend)
    if dry_run:
        chosen = "extractive"  # a dry run makes no model calls
    extra: dict[str, Any] = {"backend": chosen}
    params: dict[str, Any] = {"backend": chosen}
    if chosen == "openai":
        instructions = None
        if prompt_file:
            with open(prompt_file, encoding="utf-8") as fh:
                instructions = fh.read().strip() or None
        extra["openai"] = dict(model=summary_model, base_url=base_url, temperature=temperature, timeout=timeout,
                               retries=retries, concurrency=concurrency, instructions=instructions,
                               summary_input_tokens=summary_input_tokens,
                               cache_dir=None if no_cache else (cache_dir or default_cache_dir()))
        params.update(summary_model=summary_model, base_url=base_url, temperature=temperature, timeout=timeout,
                      retries=retries, concurrency=concurrency, prompt_file=prompt_file,
                      summary_input_tokens=summary_input_tokens, cache=not no_cache)
    return extra, params


@cli.command()
@opt.io_options
@opt.cut_options
@opt.backend_options("--model")
@opt.originals
@opt.encoding
def summarize(keep_recent: int, max_summary_tokens: int, preserve_system: bool, originals: str, encoding: str,
              **kw: Any) -> None:
    """Tier 2: replace older messages by one structured summary; keep recent ones verbatim.

    The summary has eight sections (system_context, overview, key_facts, user_preferences,
    decisions, pending_tasks, open_questions, tone_context) within --max-summary-tokens. On
    any failure the conversation is left exactly as it was (SUMMARIZE_FAILED).

    \b
    Example:
      xcompact summarize fixtures/swe_agent_3.jsonl --backend extractive --keep-recent 8 -o summarized.jsonl
    """
    backend_kw, io = _split_backend(kw)
    strict = io["strict"]
    extra, params = _backend_extra(**backend_kw)
    extra.update(keep_recent=keep_recent, max_summary_tokens=max_summary_tokens, preserve_system=preserve_system,
                 keep_originals=originals == "keep")
    params.update(keep_recent=keep_recent, max_summary_tokens=max_summary_tokens, preserve_system=preserve_system,
                  originals=originals, strict=strict, encoding=encoding)
    _run_command("summarize", io, dict(strict=strict, encoding=encoding, count_tokens=True, extra=extra), params)


@cli.command()
@opt.io_options
@click.option("--token-threshold", type=click.IntRange(min=1), default=None,
              help="Compact conversations over this many tokens [default: 192000, or 70% of --model's window].")
@click.option("--message-threshold", type=click.IntRange(min=1), default=None,
              help="Compact conversations over this many messages (excludes --token-threshold).")
@click.option("--model", "conversation_model", default=None,
              help="The conversation's model: with no threshold, trigger at 70% of its context window.")
@click.option("--context-window", type=click.IntRange(min=1), default=None,
              help="Context window for --model when the built-in table does not know it.")
@opt.keep
@opt.cut_options
@click.option("--escalation-rounds", type=click.IntRange(min=1), default=2, show_default=True,
              help="Consecutive tool-call rounds (counted in the dump) after which a summary is forced.")
@click.option("--max-retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="Extra rounds when still over after a summary; each halves --keep and --keep-recent.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when any conversation is over its threshold.")
@click.option("--dry-run", is_flag=True,
              help="Run the policy in memory and report what would happen; write nothing, call no model.")
@opt.backend_options("--summary-model")
@opt.originals
@opt.encoding
def compact(token_threshold: int | None, message_threshold: int | None, conversation_model: str | None,
            context_window: int | None, keep: int, keep_recent: int, max_summary_tokens: int,
            preserve_system: bool, escalation_rounds: int, max_retries: int, check: bool, dry_run: bool,
            originals: str, encoding: str, **kw: Any) -> None:
    """The tiered policy: reclaim tool results first, summarise only when still over.

    Conversations over --token-threshold (or --message-threshold) get tier 1; if the estimate
    is still above 95% of the threshold (or the dump has had --escalation-rounds tool-call
    rounds) a summary follows in the same round; still over, up to --max-retries more rounds
    halve both keep counts.

    \b
    Example:
      xcompact compact fixtures/taubench_airline_5.jsonl --token-threshold 2000 --backend extractive -o compacted.jsonl
    """
    from .compact import resolve_threshold

    backend_kw, io = _split_backend(kw)
    if backend_kw.get("summary_model") is None:  # as nagents: the conversation's own model unless told
        backend_kw["summary_model"] = conversation_model
    strict = io["strict"]
    if check or dry_run:
        if io.get("in_place") or io.get("output"):
            raise click.UsageError("--check and --dry-run write nothing: drop -o/--in-place")
    try:
        token_threshold, message_threshold, source = resolve_threshold(
            token_threshold, message_threshold, conversation_model, context_window)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    extra, params = _backend_extra(dry_run=dry_run, **backend_kw)
    policy = dict(token_threshold=token_threshold, message_threshold=message_threshold, keep=keep,
                  keep_recent=keep_recent, escalation_rounds=escalation_rounds, max_retries=max_retries,
                  max_summary_tokens=max_summary_tokens, preserve_system=preserve_system,
                  keep_originals=originals == "keep")
    extra.update(policy=policy, check=check)
    params.update(policy, threshold_source=source, model=conversation_model, context_window=context_window,
                  check=check, dry_run=dry_run, originals=originals, strict=strict, encoding=encoding)
    _run_command("compact", io, dict(strict=strict, encoding=encoding, count_tokens=True, extra=extra,
                                     write_output=not (check or dry_run)), params)


@cli.command()
@opt.io_options
@opt.token_options
def restore(encoding: str, no_tokens: bool, **io: Any) -> None:
    """Give back the conversations as they were before compaction.

    Puts every stored original back in place of its placeholder and undoes summaries.

    \b
    Example:
      xcompact restore out.jsonl -o restored.jsonl   (out.jsonl: see the toolcall example)
    """
    strict = io["strict"]
    _run_command("restore", io, dict(strict=strict, count_tokens=not no_tokens, encoding=encoding),
                 dict(strict=strict, encoding=encoding, tokens=not no_tokens))


@cli.command()
@opt.inputs
@opt.report
@opt.quiet
@opt.strict
@opt.config
def validate(**io: Any) -> None:
    """Check conversations against the schema and the tool-pairing rules; write nothing.

    Exit 1 when any conversation is invalid (with --strict, also on broken tool pairing or
    repeated tool-call IDs).

    \b
    Example:
      xcompact validate fixtures/taubench_airline_5.jsonl fixtures/claude_code_session.json
    """
    _run_command("validate", io, dict(strict=io["strict"], count_tokens=False, write_output=False),
                 dict(strict=io["strict"]))


@cli.command()
@click.argument("tool_call_id")
@click.argument("input_path", metavar="INPUT")
@click.option("--occurrence", type=click.IntRange(min=1), default=None,
              help="With a repeated tool-call ID: the K-th result with that ID (default: the first).")
@click.option("--line", "line_no", type=click.IntRange(min=1), default=None,
              help="JSONL: look only in the conversation on this line.")
def extract(tool_call_id: str, input_path: str, occurrence: int | None, line_no: int | None) -> None:
    """Print the original content of a compacted tool result.

    A string is printed as it is; list-of-parts content is printed as JSON. When several
    conversations hold the ID, the first one is used (--line chooses).

    \b
    Example:
      xcompact extract call_oIHazX6yQrB8hUwl4cRilFKj out.jsonl --line 1   (out.jsonl: see toolcall)
    """
    import orjson

    from .files import iter_records, parse_record
    from .toolcall import extract_tool_result

    found = []
    errors = 0
    try:
        for rec in iter_records(input_path):
            if line_no is not None and rec.line not in (line_no, None):
                continue
            try:
                dump, _ = parse_record(rec.raw)
                content, shared = extract_tool_result(dump, tool_call_id, occurrence)
                found.append((rec, content, shared))
            except InvalidInputError as exc:
                if "no compacted tool result" not in str(exc):
                    errors += 1
                    _emit(f"error: {rec.where}: {exc}")
    except (InvalidInputError, OSError) as exc:
        _emit(f"error: {input_path}: {getattr(exc, 'strerror', None) or exc}")
        sys.exit(EXIT_FAILED)
    if not found:
        _emit(f"error: {input_path}: no compacted tool result with ID {tool_call_id!r}"
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


def main() -> None:
    """Console-script entry point: XCompactError never escapes as a traceback."""
    try:
        cli(prog_name="xcompact")
    except XCompactError as exc:
        _emit(f"error: {exc}")
        sys.exit(EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILED)
