"""The CLI's per-record step as a batch function: JSONL lines in, output lines and report items out.

This is what the command line runs for every record (``executors.Processor``: the per-record
step of engine/step.py with the command's transform), exposed for engines that hold records
themselves: Ray Data, Hugging Face ``datasets``, Dask, a plain loop. For the same input line
and the same options, the output bytes are the CLI's, byte for byte; a record that fails is
passed through unchanged with an ``INVALID_INPUT`` item, as the CLI does::

    from compactor_cli.batch import process_lines, report_for, settings_for

    settings = settings_for("toolcall", keep=4)            # the CLI's option names and defaults
    result = process_lines(open("data.jsonl", "rb"), settings, source="data.jsonl")
    result.outputs   # one per record: the bytes xcompact writes for it (None: the command writes nothing)
    result.items     # one per record: the report item ({"source", "line", "status", ...})
    report_for(settings, result.items).totals()              # the report's totals and exit_code

Compressed files (``.gz``, ``.zst``, ``.bz2``, ``.xz``, chosen by suffix) are read and written
streamed, as the CLI does: ``process_lines(read_lines("data.jsonl.zst"), settings)`` and
``write_lines("out.jsonl.zst", result.lines)`` (atomic) give the CLI's output for them.

Options are declared once (commands/options.py), for the command line and here: ``settings_for``
takes the long flag names (``--keep-recent`` is ``keep_recent``, ``--no-tokens`` is
``no_tokens``, ``compact --model`` is ``model``), fills in the same defaults and checks values
the same way (a bad value is a ``UsageError`` with the CLI's message). A ``pyproject.toml`` or
``--config`` file is read by the command line only.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..commands.compile import build, configure, option_defaults, settings_for
from ..commands.configure import Configured
from ..commands.options import RUN_OPTIONS
from ..commands.registry import BATCH_COMMANDS as COMMANDS
from ..commands.settings import Settings
from ..errors import UsageError
from ..files.records import Record
from .executors import Processor
from .report import ReportItem
from .step import Outcome

__all__ = ["COMMANDS", "RUN_OPTIONS", "BatchResult", "Configured", "Processor", "build", "configure", "option_defaults",
           "output_of", "process_lines", "processor_for", "read_lines", "report_for", "settings_for", "write_lines"]

# ---------------------------------------------------------------- records -> outcomes


_PROCESSORS: OrderedDict[str, Processor] = OrderedDict()


def processor_for(settings: Settings) -> Processor:
    """A Processor for these settings, kept for reuse in this process (a worker of Ray, Dask or
    ``datasets.map(num_proc=...)`` loads the vocabulary once, not once per batch)."""
    key = repr(settings)  # the option objects of the tiers are not all hashable; their repr is their value
    proc = _PROCESSORS.get(key)
    if proc is None or proc.settings != settings:
        proc = _PROCESSORS[key] = Processor(settings)
        while len(_PROCESSORS) > 4:
            _PROCESSORS.popitem(last=False)[1].close()
    else:
        _PROCESSORS.move_to_end(key)
    return proc


# ---------------------------------------------------------------- the batch function


@dataclass
class BatchResult:
    """One entry per record (blank lines are not records: the CLI skips them too)."""

    outputs: list[bytes | None] = field(default_factory=list)  # the CLI's bytes, "\n" included; None: nothing written
    items: list[ReportItem] = field(default_factory=list)  # report items, in order

    @property
    def lines(self) -> list[bytes]:
        """The output lines to write, in order (what the CLI writes for these lines)."""
        return [o for o in self.outputs if o is not None]

    def texts(self, keep_linebreaks: bool = False) -> list[str | None]:
        """The outputs as ``str`` (a ``datasets`` text column): without their line end, or with it
        (``keep_linebreaks=True``, as ``load_dataset("text", keep_linebreaks=True)`` gives lines).
        A line passed through unchanged comes back as it was given: a ``str`` line's lone
        surrogate as that surrogate; bytes that are not UTF-8 as surrogate escapes (U+DC80-U+DCFF,
        as Python's ``os`` functions give undecodable bytes), which encode back to the same bytes."""
        texts: list[str | None] = []
        for o in self.outputs:
            if o is None:
                texts.append(None)
            else:
                try:
                    text = o.decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:
                    text = o.decode("utf-8", "surrogateescape")
                texts.append(text if keep_linebreaks or not text.endswith("\n") else text[:-1])
        return texts


def process_lines(lines: Iterable[bytes | str], settings: Settings | str, *, source: str = "<lines>",
                  first_line: int = 1, **options: Any) -> BatchResult:
    """Run JSONL lines through the CLI's per-record step.

    ``lines``: one conversation per line, ``bytes`` or ``str``; blank lines are skipped (and
    counted for line numbers). Each line is the record's bytes, as the CLI reads it from a JSONL
    file: give lines with their ``\\n`` and ``b"".join(result.lines)`` is the CLI's output file
    (a record the command leaves unchanged is passed through as given, so a last line without
    ``\\n`` stays without one; a rewritten record always ends with ``\\n``). Lines given without
    their ends (``datasets``' default): use ``result.texts()``, which drops the line ends.
    ``settings``: from ``settings_for``, or a command name with its options as keywords.
    ``source`` and ``first_line`` (the line number of ``lines[0]``) name the records in the
    report items, as the CLI names them ``file:line``."""
    if not isinstance(lines, Iterable):
        raise UsageError("process_lines takes an iterable of lines (a list of str or bytes), got "
                         f"{type(lines).__name__}")
    if isinstance(lines, (str, bytes, bytearray, memoryview)):
        raise UsageError("process_lines takes an iterable of lines (a list of str or bytes), not one "
                         f"{type(lines).__name__}: wrap a single line as [line]")
    if isinstance(settings, str):
        settings = settings_for(settings, **options)
    elif options:
        raise UsageError("give options either through settings_for or here, with a command name")
    elif not isinstance(settings, Settings):
        raise UsageError(f"settings: expected a Settings from settings_for or a command name, got "
                         f"{type(settings).__name__}")
    if type(first_line) is not int or first_line < 1:
        raise UsageError(f"first_line: expected the line number of lines[0], an int of 1 or more, got {first_line!r}")
    if not isinstance(source, str):
        raise UsageError(f"source: expected the file name (a str) the report items give, got {type(source).__name__}")
    records: list[Record] = []
    line_no = first_line - 1
    for line in lines:
        line_no += 1
        if not isinstance(line, (str, bytes, bytearray, memoryview)):
            raise UsageError(f"line {line_no}: expected str or bytes, got {type(line).__name__}")
        raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
        if not raw.strip():
            continue
        records.append(Record(source, line_no, raw, "jsonl"))
    outcomes = processor_for(settings).outcomes(records)
    return BatchResult([output_of(settings, o) for o in outcomes], [o.item for o in outcomes])


def output_of(settings: Settings, outcome: Outcome) -> bytes | None:
    """What the CLI writes for an outcome: nothing at all for a command that writes nothing
    (validate, compact --check / --dry-run), even for a record that failed."""
    return outcome.out if settings.write_output else None


def report_for(settings: Settings | Configured | str, items: Iterable[ReportItem], *,
               parameters: dict[str, Any] | None = None, files: int = 1, report_path: str | None = None) -> Any:
    """A ``report.Report`` over items (from one or many batches, in input order): ``totals()``,
    ``exit_code``, ``summary()``; with ``report_path`` the report JSON is written there, the
    same document as ``xcompact ... --report`` (give the Configured or ``parameters`` for its
    ``parameters``)."""
    from .report import Report

    if isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
        raise UsageError(f"items: expected the report items of process_lines (a list of dicts), got "
                         f"{type(items).__name__}")
    if not isinstance(settings, (Settings, Configured, str)):
        raise UsageError("settings: expected a Settings, a Configured or a command name, got "
                         f"{type(settings).__name__}")
    if isinstance(settings, Configured):
        # as the CLI's report says of a run that read no config file: "config": null
        command = settings.command
        parameters = {**settings.parameters, "config": None} if parameters is None else parameters
    else:
        command = settings if isinstance(settings, str) else settings.command
    report = Report(command=command, parameters=parameters or {}, report_path=report_path)
    report.files = files
    if not isinstance(settings, str):
        for note in processor_for(settings if isinstance(settings, Settings) else settings.settings).notes():
            report.note(note)
    try:
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("status"), str):
                raise UsageError(f"items: each item must be a report item (a dict with a 'status'), got "
                                 f"{type(item).__name__}")
            report.add(item)
    except BaseException:
        report.abort()
        raise
    report.close()
    return report


# ---------------------------------------------------------------- files


def read_lines(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """The lines of a JSONL file ("-": stdin), line ends kept, decompressed as they are read when
    the name ends in ``.gz``/``.zst``/``.bz2``/``.xz``: what ``process_lines`` takes. Never holds
    the file. Raises InvalidInputError (a truncated or damaged compressed file) or OSError."""
    from ..files.records import open_stream, path_arg

    with open_stream(path_arg(path)) as stream:
        yield from stream


def write_lines(path: str | os.PathLike[str], lines: Iterable[bytes | None]) -> int:
    """Write output lines (``result.lines``, or ``outputs`` with their Nones) to ``path`` as the
    CLI writes an output: in a temporary file created exclusively beside it, renamed into place
    when complete and removed on any failure, compressed by the name's suffix. Returns the
    number of (uncompressed) bytes written."""
    from ..files.records import path_arg
    from ..files.sinks import open_sink

    if isinstance(lines, (str, bytes, bytearray, memoryview)) or not isinstance(lines, Iterable):
        raise UsageError(f"lines: expected an iterable of bytes lines (result.lines), got {type(lines).__name__}")
    sink = open_sink(path_arg(path), compress=True)
    written = 0
    try:
        for n, line in enumerate(lines, 1):
            if line is not None and not isinstance(line, bytes):
                raise UsageError(f"lines: line {n} is {type(line).__name__}, not bytes (give result.lines, "
                                 "or encode str lines as UTF-8)")
            if line is not None:
                sink.write(line)
                written += len(line)
        sink.commit()
    except BaseException:
        sink.abort()
        raise
    return written
