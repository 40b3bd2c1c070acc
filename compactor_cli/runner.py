"""Drive an operation over every record of every input: route outputs, report, never stop the
batch for one bad record or file. No click here: the CLI passes ``emit`` for stderr lines."""

from __future__ import annotations

import os
from typing import Callable, Iterable

from .errors import InvalidInputError, OutputError
from .files import STDIN, Target, iter_records, open_sink
from .pipeline import OPERATIONS, Settings, process_record
from .report import Report
from .tokens import TokenCounter

Emit = Callable[[str], None]
#: Warning lines printed per run; the rest are counted in the summary and listed in --report.
MAX_WARNING_LINES = 20


def make_counter(settings: Settings, emit: Emit) -> TokenCounter | None:
    if not settings.count_tokens:
        return None
    counter = TokenCounter(settings.encoding)
    if not counter.exact:
        emit(f"warning: the {settings.encoding} vocabulary is not available offline; token counts use the "
             "bundled cl100k_base and are approximate (put the file in TIKTOKEN_CACHE_DIR for exact counts)")
    return counter


def run(targets: list[Target], settings: Settings, report: Report, emit: Emit, quiet: bool = False,
        progress: Callable[[Iterable], Iterable] | None = None) -> None:
    """Process every target; results and problems go to ``report`` and ``emit``."""
    transform = OPERATIONS[settings.command]
    counter = make_counter(settings, emit)
    if counter is not None and not counter.exact:
        report.notes.append(f"token counts approximate: {settings.encoding} unavailable, cl100k_base used")
    writes = settings.command != "validate"
    warned = 0
    for target in targets:
        report.files += 1
        src = target.input.path
        display = "<stdin>" if src == STDIN else src
        if src != STDIN and not os.path.isfile(src):
            report.add_file_error(display, "no such file")
            emit(f"error: {display}: no such file")
            continue
        sink = None
        try:
            records = iter_records(src, display)
            if progress is not None:
                records = progress(records)
            pending_doc: bytes | None = None
            for rec in records:
                outcome = process_record(rec, transform, settings, counter)
                report.add(outcome.item)
                if outcome.error:
                    emit(f"error: {rec.where}: {outcome.error}")
                elif outcome.warnings and not quiet:
                    warned += 1
                    if warned <= MAX_WARNING_LINES:
                        more = f" (+{len(outcome.warnings) - 1} more)" if len(outcome.warnings) > 1 else ""
                        emit(f"warning: {rec.where}: {outcome.warnings[0]}{more}")
                    elif warned == MAX_WARNING_LINES + 1:
                        emit("warning: more conversations have warnings; the summary counts them, --report lists them")
                if not writes or outcome.out is None:
                    continue
                if sink is None:
                    sink = open_sink(target)
                if rec.form == "json":
                    pending_doc = outcome.out
                else:
                    sink.write(outcome.out)
            if sink is not None:
                if pending_doc is not None:
                    sink.write(pending_doc)
                sink.commit()
        except InvalidInputError as exc:
            if sink is not None:
                sink.abort()
            report.add_file_error(display, str(exc))
            emit(f"error: {display}: {exc}")
        except OSError as exc:
            if sink is not None:
                sink.abort()
            report.add_file_error(display, f"cannot read or write: {exc.strerror or exc}")
            emit(f"error: {display}: cannot read or write: {exc.strerror or exc}")
        except OutputError as exc:
            report.add_file_error(display, str(exc))
            emit(f"error: {display}: {exc}")
        except BaseException:
            if sink is not None:
                sink.abort()
            raise
