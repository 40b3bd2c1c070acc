"""``xcompact eval``: what a compaction keeps, measured (the work is engine/evaluate.py)."""

from __future__ import annotations

import os
import sys

import click
import orjson

from ..engine.report import EXIT_FAILED, EXIT_OK
from ..errors import UsageError
from ..files.targets import plan_run
from ..model.format_names import FORMATS
from .launch import emit


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b) or os.path.abspath(a) == os.path.abspath(b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


@click.command("eval")
@click.argument("inputs", nargs=-1, required=True, metavar="BEFORE AFTER | INPUT...")
@click.option("--try", "tries", multiple=True, metavar="'COMMAND OPTIONS'",
              help="A setting to run in memory on every record of INPUT (toolcall, summarize or compact with "
                   "their options); give several to compare them on the same probes.")
@click.option("--from", "from_format", type=click.Choice(["auto", *FORMATS]), default="auto", show_default=True,
              help="Format of BEFORE or of the inputs (AFTER is read as auto).")
@click.option("--report", "report_path", metavar="PATH",
              help="Write the JSON report (totals per setting, each record, failures) to PATH.")
@click.option("--min-retention", "minimums", multiple=True, metavar="KIND=PCT",
              help="Exit 1 when a record keeps less than PCT percent of the probes of KIND (task, user, "
                   "files_modified, errors, commands, decisions, essential, all), naming each such record.")
@click.option("--agent-compaction", is_flag=True,
              help="Measure the compactions agents made in their own logs: each INPUT a Claude Code session, "
                   "read whole against what the model had after its last compact boundary.")
@click.option("--html", "html", metavar="PATH",
              help="Write the eval page to PATH: retention by kind, tokens against retention per setting with the "
                   "Pareto front, the worst records, each with its own page (in PATH's STEM-records/) marking the "
                   "probes it lost.")
@click.option("--price", "prices", multiple=True, metavar="MODEL=IN/OUT",
              help="USD per million prompt and completion tokens of MODEL (as the report names it; "
                   "MODEL=IN/OUT/CACHED prices cached prompt tokens apart): a cost column for model backends.")
@click.option("--encoding", default="cl100k_base", show_default=True, help="Token encoding of the counts.")
@click.option("-q", "--quiet", is_flag=True, help="No table on stderr; errors and gate failures only.")
def evaluate_command(inputs: tuple[str, ...], tries: tuple[str, ...], from_format: str, report_path: str | None,
                     minimums: tuple[str, ...], agent_compaction: bool, html: str | None, prices: tuple[str, ...],
                     encoding: str, quiet: bool) -> None:
    """Measure what a compaction keeps of what a continuing agent needs.

    Probes are taken mechanically from the part a compaction replaced (the task's requirements,
    the user's words, files modified, errors met, commands, decisions) and looked for in what a
    model is sent; tokens before and after, by category. BEFORE AFTER: a compaction already
    made, by xcompact or anything else (files, or directories with the same relative names;
    records matched by order). INPUT... --try: settings run in memory on the same records.
    INPUT... --agent-compaction: what Claude Code's own compactions kept, from the logs alone.

    \b
    Example:
      xcompact eval data.jsonl out.jsonl --min-retention essential=90
      xcompact eval data.jsonl --try 'toolcall --keep 4' --try summarize --report eval.json --html eval.html
    """
    from ..engine.evaluate import below, parse_minimums, parse_prices, report_of, run_agent_eval, run_eval, table
    from ..pages.evaluate import WORST

    if html is not None and report_path is not None and _same_file(html, report_path):
        raise click.UsageError(f"--html {html} and --report name the same file: choose two paths")
    try:
        gates = parse_minimums(minimums)
        price_table = parse_prices(prices)
        for path in inputs:
            if not os.path.exists(path):
                raise UsageError(f"{path}: no such file or directory")
        # the report and the page never replace an input (nor each other)
        plan_run(list(inputs), None, False, report_path, writes_data=False, html_path=html)
        if agent_compaction and tries:
            raise UsageError("--agent-compaction measures what is in the logs; it takes no --try")
        keep = WORST if html is not None else 0
        run = (run_agent_eval(list(inputs), encoding, keep) if agent_compaction
               else run_eval(list(inputs), list(tries), from_format, encoding, keep))
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    for failure in run.failures:
        emit(f"error: {failure.where}: {failure.error}")
    if not quiet:
        for skip in run.skipped:
            emit(f"note: {skip.where}: {skip.error}")
    if not quiet:
        for line in table(run, price_table).splitlines():  # emit() escapes a newline: one line each
            emit(line)
    failed_gates = below(run, gates)
    for line in failed_gates:
        emit(f"below the minimum: {line}")
    params = {"inputs": list(inputs), "tries": list(tries), "from": from_format, "encoding": encoding,
              "min_retention": gates, "agent_compaction": agent_compaction,
              "price": {m: list(p) for m, p in price_table.items()}}
    doc = report_of(run, params, price_table)
    if report_path:
        from ..files.sinks import write_bytes_atomic

        write_bytes_atomic(report_path, orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    if html is not None:
        from ..errors import OutputError
        from ..pages.evaluate import write_eval_pages

        try:
            write_eval_pages(html, doc, {n: run.worst(n) for n in run.settings}, encoding)
        except OutputError as exc:
            emit(f"error: {exc}")
            sys.exit(EXIT_FAILED)
    sys.exit(EXIT_FAILED if failed_gates or run.failures else EXIT_OK)
