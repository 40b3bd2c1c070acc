"""The commands that draw pages: ``report`` (the dataset page of a JSON report) and ``show``
(one conversation as compacted). Rendering lives in compactor_cli.pages."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from ..commands import options as opt
from ..commands.options import MAX_INT
from ..engine.report import EXIT_FAILED, EXIT_OK
from ..errors import InvalidInputError, OutputError
from ..version import __version__
from .launch import emit

if TYPE_CHECKING:
    from ..files.records import Record
    from ..pages.conversation import ShownConversation


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@click.command("report")
@click.argument("report_path", metavar="REPORT")
@click.option("--html", "html", metavar="PATH", required=True,
              help="Write the dataset page of REPORT to PATH (one self-contained HTML file).")
def report_command(report_path: str, html: str) -> None:
    """Draw the dataset page of a JSON report written by --report.

    The same page as --html on the run: totals, statuses, charts, the largest conversations,
    failures and warnings; one file that opens offline.

    \b
    Example:
      xcompact report report.json --html report.html   (report.json: see the toolcall example)
    """
    from ..pages.dataset import read_report, render_dataset_page, write_page

    if _same_file(html, report_path):
        raise click.UsageError(f"--html {html} is the report itself: choose another path")
    try:
        from ..pages.evaluate import read_eval_report, render_eval_page

        doc = read_eval_report(report_path)
        if doc is not None:  # an eval report: the eval page (the worst records named, not linked)
            write_page(html, render_eval_page(doc, source=report_path))
            return
        head, digest = read_report(report_path)
        try:
            page = render_dataset_page(head["command"], head.get("parameters") or {}, head.get("version") or "?",
                                       head["totals"], head["exit_code"], digest, source=report_path)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:  # totals of the wrong types
            raise InvalidInputError(f"{report_path}: the report's totals do not fit together ({exc}); was the "
                                    "report edited?") from None
        write_page(html, page)
    except (InvalidInputError, OutputError) as exc:
        emit(f"error: {exc}")
        sys.exit(EXIT_FAILED)


@click.command()
@click.argument("input_path", metavar="INPUT")
@click.option("--line", "line_no", type=click.IntRange(min=1, max=MAX_INT), default=None,
              help="JSONL: the conversation on this line [default: the first].")
@click.option("-o", "--output", metavar="PAGE", default=None,
              help="Write the conversation view as one self-contained HTML file; without it, text goes to stdout.")
@opt.from_format
@opt.cc_history
@opt.encoding
@opt.sidecar
def show(input_path: str, line_no: int | None, output: str | None, input_format: str, claude_code_history: str,
         encoding: str, sidecar: str | None) -> None:
    """Show one conversation as compacted: placeholders, summaries and what they replaced.

    Each message with its tokens; tool calls paired with their results; each placeholder
    with the original it stands for (from the dump's store), each summary with the messages
    it replaced (from the archive). Any format xcompact reads.

    \b
    Example:
      xcompact show out.jsonl --line 1 -o conversation.html   (out.jsonl: see the toolcall example)
    """
    from ..pages.conversation import render_html, render_text

    if output is not None and _same_file(output, input_path):
        raise click.UsageError(f"-o {output} is the input itself: choose another path")
    try:
        view, more = _view(input_path, line_no, input_format, claude_code_history, encoding, sidecar)
    except InvalidInputError as exc:
        emit(f"error: {exc}")
        sys.exit(EXIT_FAILED)
    if more:
        emit(f"note: {input_path} holds more conversations; showing line {view.where.rsplit(':', 1)[-1]} "
             "(--line N chooses)")
    if output is None:
        sys.stdout.write(render_text(view))
        sys.exit(EXIT_OK)
    from ..pages.templating import write_page

    try:
        write_page(output, render_html(view, __version__))
    except OutputError as exc:
        emit(f"error: {exc}")
        sys.exit(EXIT_FAILED)


def _view(input_path: str, line_no: int | None, input_format: str, history: str, encoding: str,
          sidecar: str | None) -> tuple[ShownConversation, bool]:
    """(the view of the chosen conversation, whether more were passed over to show the first);
    InvalidInputError naming the file (and line) when there is nothing to show."""
    from ..formats import iter_records

    records: Iterator[Record] = iter_records(input_path, from_=input_format)
    if sidecar is not None:
        from ..engine.apiready import SidecarReader, merged

        records = merged(records, SidecarReader(sidecar))
    chosen: Record | None = None
    more = False
    last = 0
    try:
        for rec in records:
            if chosen is not None:  # a second conversation after the first: say that --line chooses
                more = True
                break
            last = rec.line or last
            if line_no is None or rec.line in (line_no, None):
                chosen = rec
                if line_no is not None:
                    break
    except OSError as exc:
        raise InvalidInputError(f"{input_path}: {exc.strerror or exc}") from None
    except InvalidInputError as exc:  # the file as a whole (empty, not JSON, a directory), named as every command does
        raise InvalidInputError(f"{input_path}: {exc}") from None
    if more:
        assert chosen is not None
        return _build(chosen, input_format, history, encoding), True
    if chosen is None:
        if line_no is not None and last:
            raise InvalidInputError(f"{input_path}: there is no line {line_no}: the file's last conversation is on "
                                    f"line {last}")
        raise InvalidInputError(f"{input_path}: no conversation to show")
    return _build(chosen, input_format, history, encoding), False


def _build(rec: Record, input_format: str, history: str, encoding: str) -> ShownConversation:
    from ..pages.conversation import build_view

    return build_view(rec.raw, rec.where, rec.source, rec.line, input_format, history, encoding)
