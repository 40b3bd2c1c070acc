"""``xcompact convert INPUT... --from F --to openai|anthropic|responses``.

Registered by the CLI with ``cli.add_command(convert)``. Reads every record (a Claude Code or
Codex file is one record), converts it (see convert.py) and writes it in the input's form: a
JSON document stays a document, JSONL lines stay lines (a whole-file log becomes one line). What
could not be carried over is printed per record as a warning and listed in the report; with
``--strict`` such a record fails. A record that cannot be read is written unchanged, as every
command does, and the run exits 1.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import click
import orjson

from .base import FORMATS

REPORT_LINES = 20


def _emit(line: str) -> None:
    click.echo(line, err=True)


#: A number of 19 digits or more after a JSON value separator: possibly beyond 64 bits.
_BIG_INT = re.compile(rb"[\[:,]\s*-?\d{19,}")


def convert_record(raw: bytes, from_: str, to: str, source: str | None, line: int | None,
                   form: str, strict: bool = False, history: str = "since-compaction") -> tuple[bytes, dict[str, Any]]:
    """(bytes to write, report item) of one record; a failed record is passed through."""
    from ..errors import InvalidInputError
    from ..files.records import dump_bytes
    from . import parse_record
    from .convert import Notes, check_carried, convert, to_plain_openai

    item: dict[str, Any] = {"source": source, "line": line}
    try:
        exact = _BIG_INT.search(raw) is not None  # an integer orjson would read as a float: read it exactly
        dump, codec = parse_record(raw, from_, exact=exact, source=source, line=line, history=history)
        fatal = [p for p in codec.problems(dump) if p.fatal]
        if fatal:
            raise InvalidInputError(fatal[0].message, fatal[0].pointer)
        native, notes = convert(dump, codec, to, history)
        plain = to_plain_openai(dump, codec.format, Notes())
        missing = check_carried(plain, native if to != "openai" else to_plain_openai(native, "openai", Notes())
                                if isinstance(native, dict) else {"messages": native}, to) \
            if to != codec.format or codec.lossy else []
        if missing:  # a bug if it ever happens: never write a record that lost a call or a result
            raise InvalidInputError(f"conversion would lose {missing[0]} (+{len(missing) - 1} more); not written")
        if strict and notes:
            raise InvalidInputError(f"not everything could be carried over: {notes[0]}"
                                    + (f" (+{len(notes) - 1} more)" if len(notes) > 1 else ""))
        item.update(status="CONVERTED", format=codec.format, to=to, messages_before=len(dump["messages"]),
                    messages_after=_count(native, to))
        if notes:
            item["notes"] = notes
        try:
            return dump_bytes(native, form), item
        except InvalidInputError:
            if not exact:
                raise
            return dump_bytes(native, form, exact=True), item  # integers beyond 64 bits, written exactly
    except InvalidInputError as exc:
        item.update(status="INVALID_INPUT", error=str(exc))
        return raw, item
    except Exception as exc:  # noqa: BLE001  a value no reader expected: this record fails, never the batch
        from ..engine.step import unexpected_error

        item.update(status="INVALID_INPUT", error=str(unexpected_error(exc)))
        return raw, item


def _count(native: Any, to: str) -> int:
    if to == "responses":
        items = native["input"] if isinstance(native, dict) else native
        return len(items) if isinstance(items, list) else 1
    msgs = native["messages"] if isinstance(native, dict) else native
    return len(msgs)


@click.command("convert", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--from", "from_format", type=click.Choice(("auto",) + FORMATS), default="auto", show_default=True,
              help="Format of the inputs; auto detects it per record (a Claude Code or Codex file per file).")
@click.option("--to", "to_format", type=click.Choice(("openai", "anthropic", "responses")), required=True,
              help="Format to write.")
@click.option("-o", "--output", metavar="PATH",
              help="Output file for one input, or directory for several (same relative names). Default: stdout.")
@click.option("--report", "report_path", metavar="PATH", help="Write a JSON report to PATH.")
@click.option("-q", "--quiet", is_flag=True, help="No warnings or summary on stderr; errors only.")
@click.option("--strict", is_flag=True, help="Fail a record when anything could not be carried over.")
@click.option("--claude-code-history", "claude_code_history", type=click.Choice(["since-compaction", "full"]),
              default="since-compaction", show_default=True,
              help="Claude Code logs: from the last compact_boundary (the earlier part carried in "
                   "source.before_compaction), or the whole file.")
def convert(inputs: tuple[str, ...], from_format: str, to_format: str, output: str | None,
            report_path: str | None, quiet: bool, strict: bool, claude_code_history: str) -> None:
    """Convert transcripts between formats (lossy conversions are reported).

    Request formats convert both ways (openai, anthropic, responses: the same format in and
    out gives the record back exactly); logs (claude-code, codex, swe-agent, mini-swe-agent,
    sharegpt) convert to any of them. Every tool call keeps its result.

    \b
    Example:
      xcompact convert session.jsonl --from claude-code --to anthropic -o session.anthropic.jsonl
    """
    from ..errors import InvalidInputError, OutputError, UsageError
    from ..files.sinks import StdoutClosed, open_sink, write_bytes_atomic
    from ..files.targets import plan_run
    from ..version import __version__
    from . import iter_records

    try:
        plan = plan_run(list(inputs), output, False, report_path, True)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    items: list[dict[str, Any]] = []
    failed = file_errors = warned = errored = 0
    statuses: dict[str, int] = {}

    def error_line(where: str, message: str) -> None:
        nonlocal errored
        errored += 1
        if errored <= REPORT_LINES:
            _emit(f"error: {where}: {message}")

    try:
        for target in plan.targets:
            src = target.input.path
            display = "<stdin>" if src == "-" else src
            try:
                sink = open_sink(target.path)
            except OutputError as exc:
                file_errors += 1
                error_line(display, str(exc))
                items.append({"source": display, "line": None, "status": "INVALID_INPUT", "error": str(exc)})
                continue
            pending: bytes | None = None
            try:
                for rec in iter_records(src, display, from_format):
                    out, item = convert_record(rec.raw, from_format, to_format, rec.source, rec.line, rec.form,
                                               strict, claude_code_history)
                    items.append(item)
                    statuses[item["status"]] = statuses.get(item["status"], 0) + 1
                    where = f"{rec.source}:{rec.line}" if rec.line is not None else rec.source
                    if item["status"] == "INVALID_INPUT":
                        failed += 1
                        error_line(where, item["error"])
                    elif item.get("notes") and not quiet:
                        warned += 1
                        if warned <= REPORT_LINES:
                            more = f" (+{len(item['notes']) - 1} more)" if len(item["notes"]) > 1 else ""
                            _emit(f"warning: {where}: not carried over: {item['notes'][0]}{more}")
                    if rec.form == "json":
                        pending = out
                    else:
                        sink.write(out)
                if pending is not None:
                    sink.write(pending)
                sink.commit()
            except (InvalidInputError, OSError) as exc:
                sink.abort()
                file_errors += 1
                message = getattr(exc, "strerror", None) or str(exc)
                error_line(display, message)
                items.append({"source": display, "line": None, "status": "INVALID_INPUT", "error": message})
            except BaseException:
                sink.abort()
                raise
    except StdoutClosed:
        sys.exit(141)
    code = 1 if failed or file_errors else 0
    if report_path:
        doc = {"tool": "xcompact", "version": __version__, "command": "convert",
               "parameters": {"from": from_format, "to": to_format, "strict": strict}, "items": items,
               "totals": {"files": len(plan.targets), "conversations": len(items) - file_errors,
                          "statuses": dict(sorted(statuses.items())), "failed": failed + file_errors,
                          "file_errors": file_errors, "warnings": warned, "reclaimed_count": 0,
                          "mean_reclaimed_fraction": 0.0, "total_reclaimed_fraction": 0.0, "tokens_before": None,
                          "tokens_after": None, "notes": []},
               "exit_code": code}
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
        if report_path == "-":
            sys.stdout.buffer.write(data)
        else:
            write_bytes_atomic(report_path, data)
    if not quiet:
        n = len(items) - file_errors
        _emit(f"{n} conversation{'s' if n != 1 else ''} converted to {to_format}"
              + (f"; {warned} with something not carried over" if warned else "") + f"; {failed + file_errors} failed")
    sys.exit(code)
