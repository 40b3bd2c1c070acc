"""Drive an operation over every record of every input: route outputs, report, never stop the
batch for one bad record or file. No click here: the CLI passes ``emit`` for stderr lines.

Commands that wait on a model run their records as asyncio tasks, a bounded window of them
in flight, and write the outcomes in input order, so output bytes do not depend on timing."""

from __future__ import annotations

import asyncio
import os
from collections import deque
from typing import Any, Callable, Iterable, Iterator

from .errors import InvalidInputError, OutputError
from .files import STDIN, Record, Target, iter_records, open_sink
from .pipeline import OPERATIONS, Outcome, Settings, Transform, process_record, process_record_async
from .report import Report
from .tokens import TokenCounter

Emit = Callable[[str], None]
#: Warning lines printed per run; the rest are counted in the summary and listed in --report.
MAX_WARNING_LINES = 20
MODEL_COMMANDS = ("summarize", "compact")


def make_counter(settings: Settings, emit: Emit) -> TokenCounter | None:
    if not settings.count_tokens and settings.command not in MODEL_COMMANDS:
        return None
    counter = TokenCounter(settings.encoding)
    if not counter.exact:
        emit(f"warning: the {settings.encoding} vocabulary is not available offline; token counts use the "
             "bundled cl100k_base and are approximate (put the file in TIKTOKEN_CACHE_DIR for exact counts)")
    return counter


class OrderedAsync:
    """Run ``process_record_async`` over records with at most ``window`` in flight, yielding
    outcomes in input order. One event loop serves the whole run."""

    def __init__(self, transform: Transform, settings: Settings, counter: TokenCounter | None, window: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.transform, self.settings, self.counter = transform, settings, counter
        self.window = max(1, window)

    def map(self, records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
        pending: deque = deque()
        try:
            for rec in records:
                pending.append((rec, self.loop.create_task(
                    process_record_async(rec, self.transform, self.settings, self.counter))))
                while len(pending) >= self.window:
                    r, task = pending.popleft()
                    yield r, self.loop.run_until_complete(task)
            while pending:
                r, task = pending.popleft()
                yield r, self.loop.run_until_complete(task)
        finally:
            for _, task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*(t for _, t in pending), return_exceptions=True))

    def close(self, backend: Any) -> None:
        if hasattr(backend, "aclose"):
            self.loop.run_until_complete(backend.aclose())
        self.loop.close()


def run(targets: list[Target], settings: Settings, report: Report, emit: Emit, quiet: bool = False,
        progress: Callable[[Iterable], Iterable] | None = None) -> None:
    """Process every target; results and problems go to ``report`` and ``emit``."""
    counter = make_counter(settings, emit)
    if counter is not None and not counter.exact:
        report.notes.append(f"token counts approximate: {settings.encoding} unavailable, cl100k_base used")
    backend = runner_async = None
    if settings.command in MODEL_COMMANDS:
        assert counter is not None
        if settings.command == "compact":
            from .compact import make_compact_transform

            transform, backend = make_compact_transform(settings.extra, counter)
        else:
            from .tier2 import make_summarize_transform

            transform, backend = make_summarize_transform(settings.extra, counter)
        if backend is not None:
            report.notes.append(f"backend: {backend.name}" + (f", model {backend.model}" if backend.model else ""))
        is_openai = backend is not None and backend.name == "openai"
        window = 2 * int(settings.extra.get("openai", {}).get("concurrency", 1)) if is_openai else 1
        runner_async = OrderedAsync(transform, settings, counter, window)

        def outcomes(records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
            return runner_async.map(records)
    else:
        transform = OPERATIONS[settings.command]

        def outcomes(records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
            return ((rec, process_record(rec, transform, settings, counter)) for rec in records)
    try:
        _run_targets(targets, settings, report, emit, quiet, progress, outcomes)
    finally:
        if runner_async is not None:
            runner_async.close(backend)


def _run_targets(targets: list[Target], settings: Settings, report: Report, emit: Emit, quiet: bool,
                 progress: Callable[[Iterable], Iterable] | None,
                 outcomes: Callable[[Iterable[Record]], Iterator[tuple[Record, Outcome]]]) -> None:
    writes = settings.write_output
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
            records: Iterable[Record] = iter_records(src, display)
            if progress is not None:
                records = progress(records)
            pending_doc: bytes | None = None
            for rec, outcome in outcomes(records):
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
