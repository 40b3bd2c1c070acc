"""``xcompact convert INPUT... --from F --to openai|anthropic|responses``: click only.

Each record is converted by engine/convert.py in the same record loop as every other command
(engine/local.py): the input's form is kept (a JSON document stays a document, JSONL lines stay
lines, a whole-file log becomes one line); what could not be carried over is printed per record
as a warning and listed in the report; with ``--strict`` such a record fails; a record that
cannot be read is written unchanged and the run exits 1."""

from __future__ import annotations

import click

from ..commands import options as opt
from ..commands.settings import RunIO, Settings
from ..model.format_names import FORMATS
from .launch import CONTEXT_SETTINGS, run_io


@click.command("convert", context_settings=CONTEXT_SETTINGS)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--from", "from_format", type=click.Choice(("auto",) + FORMATS), default="auto", show_default=True,
              help="Format of the inputs; auto detects it per record (a Claude Code or Codex file per file).")
@click.option("--to", "to_format", type=click.Choice(("openai", "anthropic", "responses")), required=True,
              help="Format to write.")
@click.option("-o", "--output", metavar="PATH",
              help="Output file for one input, or directory for several (same relative names). Default: stdout.")
@click.option("--report", "report_path", metavar="PATH", help="Write a JSON report to PATH.")
@opt.html
@click.option("-q", "--quiet", is_flag=True, help="No warnings or summary on stderr; errors only.")
@click.option("--strict", is_flag=True, help="Fail a record when anything could not be carried over.")
@click.option("--claude-code-history", "claude_code_history", type=click.Choice(["since-compaction", "full"]),
              default="since-compaction", show_default=True,
              help="Claude Code logs: from the last compact_boundary (the earlier part carried in "
                   "source.before_compaction), or the whole file.")
def convert(inputs: tuple[str, ...], from_format: str, to_format: str, output: str | None,
            report_path: str | None, html: str | None, quiet: bool, strict: bool, claude_code_history: str) -> None:
    """Convert transcripts between formats (lossy conversions are reported).

    Request formats convert both ways (openai, anthropic, responses: the same format in and
    out gives the record back exactly); logs (claude-code, codex, swe-agent, mini-swe-agent,
    sharegpt) convert to any of them. Every tool call keeps its result.

    \b
    Example:
      xcompact convert session.jsonl --from claude-code --to anthropic -o session.anthropic.jsonl
    """
    settings = Settings("convert", strict=strict, count_tokens=False, input_format=from_format,
                        claude_code_history=claude_code_history, to_format=to_format)
    io = RunIO(inputs=tuple(inputs), output=output, report_path=report_path, html=html, quiet=quiet, jobs=1,
               journal=False,
               parameters={"from": from_format, "to": to_format, "strict": strict})
    run_io(settings, io)
