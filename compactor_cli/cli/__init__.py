"""The ``xcompact`` command: click only. It parses options, hands them to the engine
(cli/launch.py), prints, and maps errors to exit codes; nothing in the package imports it.

stdout carries data only; progress, warnings, errors and the summary go to stderr."""

from __future__ import annotations

import gc
import sys
from typing import Any

import click

from ..commands import options as opt
from ..commands.base import Command
from ..commands.compile import options_of
from ..commands.options import MAX_INT
from ..commands.registry import COMMANDS
from ..engine.report import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ..errors import InvalidInputError, UsageError, XCompactError
from ..version import __version__
from . import launch
from .convert import convert
from .evaluate import evaluate_command
from .launch import CONTEXT_SETTINGS, config_option, emit
from .pages import report_command, show


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="xcompact")
def cli() -> None:
    """Compact saved LLM conversation transcripts offline, in batch.

    Inputs are dumps() JSON objects, bare lists of messages, or JSONL (one conversation per
    line), and agents' logs; "-" reads stdin; directories are searched for *.json, *.jsonl,
    *.ndjson and *.traj, also compressed (.gz, .zst, .bz2, .xz). Exit codes:
    0 all went well, 1 some conversation or file failed, 2 usage error, 130 interrupted.
    """


def _record_command(command: type[Command]) -> None:
    """Add a record command to the group, built from its class (commands/registry.py): its
    options, its help text, and a callback handing the values to the engine."""
    def run(**kw: Any) -> None:
        launch.command(command.name, kw)

    run.__doc__ = command.help
    cli.command(name=command.name)(options_of(command.name, config_option)(run))


for _command in COMMANDS.values():
    if _command.batch:  # the record commands; convert, eval, extract, show and report are their own
        _record_command(_command)


@cli.command()
@click.argument("tool_call_id")
@click.argument("input_path", metavar="INPUT")
@click.option("--occurrence", type=click.IntRange(min=1, max=MAX_INT), default=None,
              help="With a repeated tool-call ID: the K-th result with that ID (default: the oldest compacted one).")
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
    from ..files.exact import risky_number
    from ..formats import iter_records, parse_record
    from ..formats.base import jdump
    from ..tiers.toolcall import extract_tool_result

    found = []
    errors = 0
    last_line = 0
    try:
        records = iter_records(input_path, from_=input_format)
        if sidecar is not None:  # an --api-ready output: its bookkeeping comes back record by record
            from ..engine.apiready import SidecarReader, merged

            records = merged(records, SidecarReader(sidecar))
        for rec in records:
            last_line = rec.line or last_line
            if line_no is not None and rec.line not in (line_no, None):
                continue
            try:
                dump, codec = parse_record(rec.raw, input_format, exact=risky_number(rec.raw),
                                           source=rec.source, line=rec.line)
                fatal = [p for p in codec.problems(dump) if p.fatal]  # shapes checked before any lookup
                if fatal:
                    raise InvalidInputError(fatal[0].message, fatal[0].pointer)
                content, shared = extract_tool_result(dump, tool_call_id, occurrence)
                found.append((rec, content, shared))
            except InvalidInputError as exc:
                if "no compacted tool result" not in str(exc):
                    errors += 1
                    emit(f"error: {rec.where}: {exc}")
            except Exception as exc:  # noqa: BLE001  one odd record never ends the search
                from ..engine.step import unexpected_error

                errors += 1
                emit(f"error: {rec.where}: {unexpected_error(exc)}")
    except (InvalidInputError, OSError) as exc:
        emit(f"error: {input_path}: {getattr(exc, 'strerror', None) or exc}")
        sys.exit(EXIT_FAILED)
    if line_no is not None and line_no > last_line and last_line:
        emit(f"error: {input_path}: there is no line {line_no}: the file's last conversation is on line {last_line}")
        sys.exit(EXIT_FAILED)
    if not found:
        where = f"{input_path}:{line_no}" if line_no is not None else input_path
        emit(f"error: {where}: no compacted tool result with ID {tool_call_id!r}"
              + (f" (occurrence {occurrence})" if occurrence else "")
              + (" in the records that could be read" if errors else ""))
        sys.exit(EXIT_FAILED)
    rec, content, shared = found[0]
    if shared > 1 and occurrence is None:
        emit(f"warning: {rec.where}: {shared} compacted results share ID {tool_call_id!r}; "
              "printing the first (use --occurrence K)")
    if len(found) > 1:
        emit(f"warning: {len(found)} conversations hold ID {tool_call_id!r}; printing {rec.where} (use --line)")
    if isinstance(content, str):
        sys.stdout.flush()  # the original exactly: no newline added, no text-mode translation
        sys.stdout.buffer.write(content.encode("utf-8", "surrogatepass"))
    else:
        sys.stdout.write(jdump(content) + "\n")  # every number as stored (beyond 64 bits, long decimals)
    sys.exit(EXIT_FAILED if errors else EXIT_OK)



cli.add_command(convert)
cli.add_command(evaluate_command)
cli.add_command(report_command)
cli.add_command(show)


def main() -> None:
    """Console-script entry point: XCompactError never escapes as a traceback."""
    # The records are trees of dicts and lists that reference counting frees as each record ends;
    # the cyclic collector's full passes only walked, again and again, the ~100,000 objects the
    # imports made (modules, functions, classes): 16% of tier 1's work per record on tau-bench
    # (callgrind, bench/README.md). They live for the whole run, so they are frozen out of its
    # sight; forked -j workers inherit that and leave those objects' pages unwritten. Cycles the
    # run makes are still collected.
    gc.freeze()
    try:
        cli(prog_name="xcompact")
    except XCompactError as exc:
        emit(f"error: {exc}")
        sys.exit(EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILED)
