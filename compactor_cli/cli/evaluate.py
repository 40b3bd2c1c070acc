"""``xcompact eval``: what a compaction keeps, measured (the work is engine/evaluate.py)."""

from __future__ import annotations

import os
import sys

import click
import orjson

from ..engine.report import EXIT_FAILED, EXIT_OK
from ..errors import UsageError
from ..model.format_names import FORMATS
from .launch import emit


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
@click.option("--encoding", default="cl100k_base", show_default=True, help="Token encoding of the counts.")
@click.option("-q", "--quiet", is_flag=True, help="No table on stderr; errors and gate failures only.")
def evaluate_command(inputs: tuple[str, ...], tries: tuple[str, ...], from_format: str, report_path: str | None,
                     minimums: tuple[str, ...], agent_compaction: bool, encoding: str, quiet: bool) -> None:
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
      xcompact eval data.jsonl --try 'toolcall --keep 4' --try summarize --report eval.json
    """
    from ..engine.evaluate import below, parse_minimums, report_of, run_agent_eval, run_eval, table

    try:
        gates = parse_minimums(minimums)
        for path in inputs:
            if not os.path.exists(path):
                raise UsageError(f"{path}: no such file or directory")
        if agent_compaction and tries:
            raise UsageError("--agent-compaction measures what is in the logs; it takes no --try")
        run = (run_agent_eval(list(inputs), encoding) if agent_compaction
               else run_eval(list(inputs), list(tries), from_format, encoding))
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    for failure in run.failures:
        emit(f"error: {failure.where}: {failure.error}")
    if not quiet:
        for skip in run.skipped:
            emit(f"note: {skip.where}: {skip.error}")
    if not quiet:
        emit(table(run))
    failed_gates = below(run, gates)
    for line in failed_gates:
        emit(f"below the minimum: {line}")
    if report_path:
        from ..files.sinks import write_bytes_atomic

        params = {"inputs": list(inputs), "tries": list(tries), "from": from_format, "encoding": encoding,
                  "min_retention": gates, "agent_compaction": agent_compaction}
        write_bytes_atomic(report_path, orjson.dumps(report_of(run, params), option=orjson.OPT_INDENT_2) + b"\n")
    sys.exit(EXIT_FAILED if failed_gates or run.failures else EXIT_OK)
