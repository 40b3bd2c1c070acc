"""Drive an operation over every record of every input: route outputs, report, checkpoint,
never stop the batch for one bad record or file. No click here: the CLI passes ``emit`` for
stderr lines and a progress factory.

Three ways to map records to outcomes, all yielding in input order so output bytes never
depend on them: in this process; in ``jobs`` worker processes (CPU-bound work, batches of
records, a bounded window in flight, so memory stays flat); as asyncio tasks in a bounded
window (model calls)."""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Protocol

from .errors import InvalidInputError, OutputError
from .files import STDIN, Record, Target, finish_commit, iter_records, open_sink
from .journal import CHECKPOINT_SECONDS, Journal
from .pipeline import OPERATIONS, Outcome, Settings, Transform, process_record, process_record_async
from .report import Report
from .tokens import TokenCounter

Emit = Callable[[str], None]
Outcomes = Callable[[Iterable[Record]], Iterator[tuple[Record, Outcome]]]
#: Warning lines printed per run; the rest are counted in the summary and listed in --report.
MAX_WARNING_LINES = 20
MODEL_COMMANDS = ("summarize", "compact")
#: Inputs smaller than this in total are processed in this process: a pool costs more.
PARALLEL_MIN_BYTES = 4 * 2**20
BATCH_BYTES = 2 * 2**20
BATCH_RECORDS = 512


class Progress(Protocol):
    def update(self, nbytes: int) -> None: ...
    def close(self) -> None: ...


def make_counter(settings: Settings, emit: Emit) -> TokenCounter | None:
    if not settings.count_tokens and settings.command not in MODEL_COMMANDS:
        return None
    counter = TokenCounter(settings.encoding)
    if not counter.exact:
        emit(f"warning: the {settings.encoding} vocabulary is not available offline; token counts use the "
             "bundled cl100k_base and are approximate (put the file in TIKTOKEN_CACHE_DIR for exact counts)")
    return counter


def make_transform(settings: Settings, counter: TokenCounter | None) -> tuple[Transform, Any]:
    """The record transform for the command, and its summary backend (or None)."""
    if settings.command == "compact":
        from .compact import make_compact_transform

        assert counter is not None
        return make_compact_transform(settings.extra, counter)
    if settings.command == "summarize":
        from .tier2 import make_summarize_transform

        assert counter is not None
        return make_summarize_transform(settings.extra, counter)
    return OPERATIONS[settings.command], None


# ---------------------------------------------------------------- worker processes

_worker: dict[str, Any] = {}


def _init_worker(settings: Settings) -> None:
    counter = TokenCounter(settings.encoding) if (settings.count_tokens or settings.command in MODEL_COMMANDS) else None
    transform, backend = make_transform(settings, counter)
    _worker.update(settings=settings, counter=counter, transform=transform, loop=asyncio.new_event_loop())


def _work_batch(batch: list[Record]) -> list[Outcome]:
    s, counter, transform, loop = _worker["settings"], _worker["counter"], _worker["transform"], _worker["loop"]
    if s.command in MODEL_COMMANDS:
        return [loop.run_until_complete(process_record_async(r, transform, s, counter)) for r in batch]
    return [process_record(r, transform, s, counter) for r in batch]


def _batches(records: Iterable[Record]) -> Iterator[list[Record]]:
    batch: list[Record] = []
    size = 0
    for rec in records:
        batch.append(rec)
        size += len(rec.raw)
        if size >= BATCH_BYTES or len(batch) >= BATCH_RECORDS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


class ParallelOutcomes:
    """Batches of records through a process pool, at most ``2 x jobs`` batches in flight."""

    def __init__(self, settings: Settings, jobs: int) -> None:
        import multiprocessing

        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        self.pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method),
                                        initializer=_init_worker, initargs=(settings,))
        self.window = 2 * jobs

    def __call__(self, records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
        pending: deque[tuple[list[Record], Future]] = deque()
        for batch in _batches(records):
            pending.append((batch, self.pool.submit(_work_batch, batch)))
            while len(pending) >= self.window:
                done_batch, fut = pending.popleft()
                yield from zip(done_batch, fut.result())
        while pending:
            done_batch, fut = pending.popleft()
            yield from zip(done_batch, fut.result())

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- model calls

class AsyncOutcomes:
    """``process_record_async`` over records with at most ``window`` in flight, in order.
    One event loop serves the whole run."""

    def __init__(self, transform: Transform, settings: Settings, counter: TokenCounter | None, window: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.transform, self.settings, self.counter = transform, settings, counter
        self.window = max(1, window)

    def __call__(self, records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
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
        if backend is not None and hasattr(backend, "aclose"):
            self.loop.run_until_complete(backend.aclose())
        self.loop.close()


# ---------------------------------------------------------------- the run

def input_bytes(targets: list[Target]) -> int:
    total = 0
    for t in targets:
        try:
            total += os.path.getsize(t.input.path) if t.input.path != STDIN else 0
        except OSError:
            pass
    return total


def run(targets: list[Target], settings: Settings, report: Report, emit: Emit, quiet: bool = False,
        progress: Callable[[int, str], Progress] | None = None, jobs: int = 1, journal: Journal | None = None) -> None:
    """Process every target; results and problems go to ``report`` and ``emit``."""
    counter = make_counter(settings, emit)
    if counter is not None and not counter.exact:
        report.note(f"token counts approximate: {settings.encoding} unavailable, cl100k_base used")
    transform, backend = make_transform(settings, counter)
    if backend is not None:
        report.note(f"backend: {backend.name}" + (f", model {backend.model}" if backend.model else ""))
    is_openai = backend is not None and backend.name == "openai"
    closer: Callable[[], None] = lambda: None  # noqa: E731
    outcomes: Outcomes
    if not is_openai and jobs > 1 and input_bytes(targets) >= PARALLEL_MIN_BYTES:
        parallel = ParallelOutcomes(settings, jobs)
        outcomes, closer = parallel, parallel.close
    elif settings.command in MODEL_COMMANDS:  # model calls: a bounded window of tasks in flight
        window = 2 * int(settings.extra.get("openai", {}).get("concurrency", 1)) if is_openai else 1
        async_map = AsyncOutcomes(transform, settings, counter, window)
        outcomes = async_map
        closer = lambda: async_map.close(backend)  # noqa: E731
    else:
        def outcomes(records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
            return ((rec, process_record(rec, transform, settings, counter)) for rec in records)
    try:
        _Batch(settings, report, emit, quiet, progress, outcomes, journal).run(targets)
    finally:
        closer()


class _Batch:
    """The loop over targets: sinks, checkpoints, errors, warnings."""

    def __init__(self, settings: Settings, report: Report, emit: Emit, quiet: bool,
                 progress: Callable[[int, str], Progress] | None, outcomes: Outcomes, journal: Journal | None) -> None:
        self.settings, self.report, self.emit, self.quiet = settings, report, emit, quiet
        self.progress, self.outcomes, self.journal = progress, outcomes, journal
        self.warned = 0
        self.committed: set[int] = journal.done if journal else set()

    def run(self, targets: list[Target]) -> None:
        if self.journal is not None:
            cur = self.journal.state.get("current")
            if cur and cur.get("committing"):  # cut between the journal entry and the rename
                finish_commit(targets[cur["index"]])
                self.committed.add(cur["index"])
                self.journal.state["current"] = None
        for index, target in enumerate(targets):
            if index not in self.committed:
                self.run_target(index, target)

    def _save(self, current: dict[str, Any] | None) -> None:
        assert self.journal is not None
        self.journal.save(done=sorted(self.committed), current=current, report=self.report.checkpoint())

    def _warn(self, rec: Record, outcome: Outcome) -> None:
        if outcome.error:
            self.emit(f"error: {rec.where}: {outcome.error}")
        elif outcome.warnings and not self.quiet:
            self.warned += 1
            if self.warned <= MAX_WARNING_LINES:
                more = f" (+{len(outcome.warnings) - 1} more)" if len(outcome.warnings) > 1 else ""
                self.emit(f"warning: {rec.where}: {outcome.warnings[0]}{more}")
            elif self.warned == MAX_WARNING_LINES + 1:
                self.emit("warning: more conversations have warnings; the summary counts them, --report lists them")

    def _file_error(self, display: str, message: str) -> None:
        self.report.add_file_error(display, message)
        self.emit(f"error: {display}: {message}")

    def _checkpoint(self, index: int, sink: Any, offset: int, line: int | None) -> None:
        length = sink.checkpoint() if sink is not None else None
        self._save({"index": index, "input_offset": offset, "line": line, "output_length": length})

    def run_target(self, index: int, target: Target) -> None:
        src = target.input.path
        display = "<stdin>" if src == STDIN else src
        cur = self.journal.current(index) if self.journal else None
        if cur is None:  # a resumed target was counted before the interruption
            self.report.files += 1
        if src != STDIN and not os.path.isfile(src):
            self._file_error(display, "no such file")
            return
        start, start_line = (cur["input_offset"], cur["line"] or 1) if cur else (0, 1)
        journaled = self.journal is not None and target.path is not None
        bar = self.progress(os.path.getsize(src) if src != STDIN else 0, os.path.basename(display)) \
            if self.progress else None
        if bar is not None and start:
            bar.update(start)
        sink = None
        try:
            if cur and cur.get("output_length") is not None:
                sink = open_sink(target, resume_length=cur["output_length"])
            records = iter_records(src, display, start, start_line)
            pending_doc: bytes | None = None
            last = time.monotonic()
            for rec, outcome in self.outcomes(records):
                self.report.add(outcome.item)
                self._warn(rec, outcome)
                if bar is not None:
                    bar.update(len(rec.raw))
                if self.settings.write_output and outcome.out is not None:
                    if sink is None:
                        sink = open_sink(target)
                    if rec.form == "json":
                        pending_doc = outcome.out
                    else:
                        sink.write(outcome.out)
                if journaled and rec.form == "jsonl" and time.monotonic() - last >= CHECKPOINT_SECONDS:
                    self._checkpoint(index, sink, rec.end, (rec.line or 0) + 1)
                    last = time.monotonic()
            if sink is not None:
                if pending_doc is not None:
                    sink.write(pending_doc)
                if journaled:
                    sink.checkpoint()
                    self._save({"index": index, "committing": True})
                sink.commit()
            if journaled:
                self.committed.add(index)
        except InvalidInputError as exc:
            if sink is not None:
                sink.abort()
            self._file_error(display, str(exc))
        except OSError as exc:
            if sink is not None:
                sink.abort()
            self._file_error(display, f"cannot read or write: {exc.strerror or exc}")
        except OutputError as exc:
            self._file_error(display, str(exc))
        except BaseException:
            if sink is not None:
                sink.abort(keep=journaled)  # interrupted: the partial output waits for --resume
            raise
        finally:
            if bar is not None:
                bar.close()
