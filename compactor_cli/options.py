"""Click options shared by the commands, defined once (as pip-tools does)."""

from __future__ import annotations

from typing import Any, Callable

import click

from .tokens import DEFAULT_ENCODING
from .toolcall import DEFAULT_KEEP

F = Callable[..., Any]

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
keep = click.option("--keep", type=click.IntRange(min=0), default=DEFAULT_KEEP, show_default=True,
                    help="How many of the most recent tool results to leave untouched (toolcall_keep_max).")


def io_options(f: F) -> F:
    """Inputs, where outputs go, and the report: every command that writes conversations."""
    for opt in reversed([inputs, output, in_place, report, quiet, strict]):
        f = opt(f)
    return f


def token_options(f: F) -> F:
    for opt in reversed([encoding, no_tokens]):
        f = opt(f)
    return f
