"""Records to outcomes, always yielding in input order so output bytes never depend on how:
``Processor`` in this process (one per ``Settings``: the vocabulary, the transform and its
summariser made once; model calls as asyncio tasks in a bounded window), or ``ParallelOutcomes``
in ``jobs`` worker processes (CPU-bound work, a bounded window in flight, so memory stays flat).
Workers take a JSONL file by byte ranges that they read themselves and, when the run writes
output, write the range's output to a part file of their own (``Part``): the main process splices
it into the output in the kernel (``copy_file_range``) instead of receiving every byte through a
pipe, and combines the part's crc32 into the output's for --resume. Other inputs go as batches
of records.

Worker processes die with their parent: a SIGKILL of the main process must not leave workers
holding the caller's pipes open."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from ..commands.base import Transform
from ..commands.registry import command_of
from ..commands.settings import Settings
from ..errors import InvalidInputError, OutputError
from ..files.checksum import crc32
from ..files.compression import LIMIT_VARIABLE, RecordTooLarge, max_record_bytes, size_text
from ..files.parts import PARTS_PREFIX, Part, remove_stale_parts, unlink_part
from ..files.records import CHANGED_INPUT, READ_BUFFER, Record, input_identity, is_blank
from ..files.sinks import WRITE_BUFFER
from ..model.tokens import Counters
from .step import Outcome, process_record, process_record_async

if TYPE_CHECKING:  # asyncio and the process pool are imported where used: a run without a model or
    import asyncio  # workers does not pay for them at start-up
    from concurrent.futures import Future

class WorkerDiedError(OutputError):
    """A worker process of -j N died: the run cannot go on (exit 1, one line, no partial left)."""


Outcomes = Callable[[Iterable[Record]], Iterator[tuple[Record, Outcome]]]
BATCH_BYTES = 2 * 2**20
BATCH_RECORDS = 512
#: A worker's byte range of a JSONL file (see ParallelOutcomes.ranges); tests make it small.
CHUNK_BYTES = int(os.environ.get("XCOMPACT_TEST_CHUNK_BYTES") or 4 * 2**20)
#: The shortest range the tail of a file is cut into (chunk_bounds' ``spread``).
TAIL_BYTES = 256 * 2**10


def make_counter(settings: Settings) -> Counters | None:
    if not settings.count_tokens and not command_of(settings).models:
        return None
    return Counters(settings.encoding, settings.conversation_model)  # vocabularies load on first use


def make_transform(settings: Settings, counter: Counters | None) -> tuple[Transform, Any]:
    """The record transform for the command, and its summary backend (or None)."""
    return command_of(settings).transform(settings, counter)


# ---------------------------------------------------------------- worker processes

#: What a run says when a worker process died under it (the out-of-memory killer, a signal): the
#: pool is broken, so the run stops there (engine/local.py turns concurrent.futures' error into this).
WORKER_DIED = ("a worker process died (killed by the system: out of memory, or a signal); nothing of the "
               "unfinished file was written; run it again with fewer jobs (-j 1) or more memory")


_worker: dict[str, Any] = {}
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to kill this worker when its parent dies (Linux), and watch for it
    elsewhere: a worker whose parent is gone exits."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="xcompact-parent-watch").start()


def _init_worker(settings: Settings, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles ^C and tells the pool
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent)
    counter = make_counter(settings)
    transform, _ = make_transform(settings, counter)
    _worker.update(settings=settings, counter=counter, transform=transform, loop=None)


def _process(rec: Record) -> Outcome:
    s, counter, transform = _worker["settings"], _worker["counter"], _worker["transform"]
    if command_of(s).models:
        loop = _worker["loop"]
        if loop is None:  # made on first use: a run without a model does not import asyncio in each worker
            import asyncio

            loop = _worker["loop"] = asyncio.new_event_loop()
        return loop.run_until_complete(process_record_async(rec, transform, s, counter))
    return process_record(rec, transform, s, counter)


def _work_batch(batch: list[Record]) -> list[Outcome]:
    return [_process(r) for r in batch]


@dataclass
class ChunkResult:
    """What a worker made of one byte range of a JSONL file: the output (bytes, or the Part file
    holding them), and per record its line within the range (1-based), the byte offset just
    after it and its outcome (without the output). ``lines`` counts every line of the range."""

    out: bytes | Part
    records: list[tuple[int, int, Outcome]]
    lines: int


def _work_range(path: str, display: str, start: int, end: int, ident: tuple | None = None,
                part: str | None = None) -> ChunkResult:
    """A worker reads its own byte range, so the main process never carries the input; the file
    it opens must still be the one the run started on (``ident``), else the file fails. With
    ``part`` the output goes to that file (removed again if the range fails). The range is read
    line by line through the file's buffer and each output written as it is made: reading it
    whole and joining its output cost two fresh buffers of the range's size (page faults, a
    tenth of the run on short records)."""
    outs: list[bytes] = []
    records: list[tuple[int, int, Outcome]] = []
    writer = _PartWriter(part) if part is not None else None
    try:
        with open(path, "rb", buffering=READ_BUFFER) as fh:
            if ident is not None and input_identity(path, fh.fileno()) != ident:
                raise InvalidInputError(CHANGED_INPUT)
            fh.seek(start)
            pos, lines = start, 0
            while pos < end:
                line = fh.readline(end - pos)  # lines end at \n only: a raw U+2028 inside a string is not an end
                if not line:  # the file is shorter than the range now
                    raise InvalidInputError(CHANGED_INPUT)
                pos += len(line)
                lines += 1
                if not is_blank(line):
                    outcome = _process(Record(display, lines, line, "jsonl", pos))
                    if outcome.out is not None:
                        if writer is not None:
                            writer.write(outcome.out)
                        else:
                            outs.append(outcome.out)
                        outcome.out = None
                    records.append((lines, pos, outcome))
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return ChunkResult(writer.close() if writer is not None else b"".join(outs), records, lines)


class _PartWriter:
    """A range's output written to its part file as it is made (Part.write's file: created only
    when there is output, removed if the range fails), with its length and crc32."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fh: BinaryIO | None = None
        self.length = self.crc = 0

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self.fh is None:
            self.fh = open(self.path, "xb", buffering=WRITE_BUFFER)  # closed by close() or abort()
        self.fh.write(data)
        self.length += len(data)
        self.crc = crc32(data, self.crc)

    def close(self) -> bytes | Part:
        if self.fh is None:
            return b""
        self.fh.close()
        return Part(self.path, self.length, self.crc)

    def abort(self) -> None:
        if self.fh is not None:
            self.fh.close()
            unlink_part(self.path)


def _discard(fut: Future) -> None:
    """A range finished after its run stopped wanting it: remove its part file."""
    if not fut.cancelled() and fut.exception() is None and isinstance(fut.result().out, Part):
        unlink_part(fut.result().out.path)


def chunk_bounds(path: str, start: int, size: int, ident: tuple | None = None,
                 spread: int = 1) -> Iterator[tuple[int, int]]:
    """Byte ranges of about ``size`` bytes covering ``path`` from ``start``, each ending at a
    line end (a record longer than ``size`` makes its range longer). With ``spread`` (the
    workers' window), the last range is cut in up to ``spread`` pieces of at least TAIL_BYTES,
    so the workers finish together instead of one waiting for the other's last range (only
    the last: the ranges before, and so which records a too-long line stops the file after,
    are as they always were)."""
    limit = max_record_bytes()
    with open(path, "rb") as fh:
        if ident is not None and input_identity(path, fh.fileno()) != ident:
            raise InvalidInputError(CHANGED_INPUT)
        total = ident[2] if ident is not None else os.fstat(fh.fileno()).st_size
        pos = start
        while pos < total:
            if pos + size >= total:
                if spread > 1:
                    yield from _pieces(fh, pos, total, max(TAIL_BYTES, (total - pos) // spread))
                    return
                end = total
            else:
                fh.seek(pos + size)
                while True:  # to the line's end, a MiB at a time: an endless line is not read into memory
                    piece = fh.readline(1 << 20)
                    if not piece or piece.endswith(b"\n") or fh.tell() - pos > size + limit:
                        break
                end = min(fh.tell(), total)
            if end - pos > size + limit:
                raise RecordTooLarge(f"a line at byte {pos + size} or later is longer than {size_text(limit)}, the "
                                     f"record-size limit (set {LIMIT_VARIABLE} to raise it); the rest of the file "
                                     "is not read")
            yield pos, end
            pos = end


def _pieces(fh: BinaryIO, pos: int, total: int, size: int) -> Iterator[tuple[int, int]]:
    """[pos, total) in ranges of about ``size`` bytes, each ending at a line end or at ``total``."""
    while pos < total:
        end = total
        if pos + size < total:
            fh.seek(pos + size)
            while True:
                piece = fh.readline(1 << 20)
                if not piece or piece.endswith(b"\n") or fh.tell() >= total:
                    break
            end = min(fh.tell(), total)
        yield pos, end
        pos = end


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
    """Batches of records through a process pool, at most ``2 x jobs`` batches in flight. A run
    that writes output gets a private directory for the workers' part files, removed by close()."""

    def __init__(self, settings: Settings, jobs: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.parts: str | None = None
        if settings.write_output:
            import tempfile  # only here: a run of one process never needs it

            remove_stale_parts()
            self.parts = tempfile.mkdtemp(prefix=f"{PARTS_PREFIX}{os.getpid()}-")
        self._seq = 0
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        try:
            self.pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method),
                                            initializer=_init_worker, initargs=(settings, os.getpid()))
        except BaseException:
            self._remove_parts()
            raise
        self.window = 2 * jobs

    def __call__(self, records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
        pending: deque[tuple[list[Record], Future]] = deque()
        for batch in _batches(records):
            pending.append((batch, self.pool.submit(_work_batch, batch)))
            while len(pending) >= self.window:
                done_batch, fut = pending.popleft()
                yield from zip(done_batch, fut.result(), strict=True)
        while pending:
            done_batch, fut = pending.popleft()
            yield from zip(done_batch, fut.result(), strict=True)

    def ranges(self, path: str, display: str, start: int, ident: tuple | None = None
               ) -> Iterator[tuple[int, int, ChunkResult]]:
        """A JSONL file by byte ranges read and written by the workers, in order; each range
        checks that the file is still ``ident`` (device, inode, size, mtime)."""
        pending: deque[tuple[int, int, Future]] = deque()
        try:
            for lo, hi in chunk_bounds(path, start, CHUNK_BYTES, ident, spread=self.window):
                pending.append((lo, hi, self.pool.submit(_work_range, path, display, lo, hi, ident, self._part())))
                while len(pending) >= self.window:
                    lo_, hi_, fut = pending.popleft()
                    yield lo_, hi_, fut.result()
            while pending:
                lo_, hi_, fut = pending.popleft()
                yield lo_, hi_, fut.result()
        finally:  # the file failed or the run stopped: ranges still in flight leave no part behind
            for _, _, fut in pending:
                if not fut.cancel():
                    fut.add_done_callback(_discard)

    def _part(self) -> str | None:
        if self.parts is None:
            return None
        self._seq += 1
        return os.path.join(self.parts, f"{self._seq}.part")

    def _remove_parts(self) -> None:
        if self.parts is not None:
            import shutil

            shutil.rmtree(self.parts, ignore_errors=True)
            self.parts = None

    def close(self) -> None:
        try:
            self.pool.shutdown(wait=True, cancel_futures=True)
        finally:
            self._remove_parts()


# ---------------------------------------------------------------- this process

def model_window(settings: Settings, backend: Any) -> int:
    """Records in flight at once: twice the openai backend's concurrency (so a slot never waits
    for a record to be read), one otherwise."""
    if backend is None or getattr(backend, "name", None) != "openai":
        return 1
    openai = settings.backend.openai if settings.backend else None
    return 2 * ((openai.concurrency if openai else None) or (4 if openai else 1))


class Processor:
    """The per-record step for one ``Settings``, in this process: the vocabulary, the transform
    and its summariser (and, for the tiers that may call a model, one event loop with a bounded
    window of records in flight) are made once and serve every record, in input order. Option
    problems (an input budget too small for the prompt...) raise UsageError when it is made."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.counter = make_counter(settings)
        self.transform: Transform | None = None
        self.backend: Any = None
        command = command_of(settings)
        self.own_step = command.own_step  # convert: its own per-record step (engine/convert.py)
        if not self.own_step:
            self.transform, self.backend = make_transform(settings, self.counter)
        self.is_async = command.models
        self.window = model_window(settings, self.backend)
        self._loop: asyncio.AbstractEventLoop | None = None

    def notes(self) -> list[str]:
        """What the run adds to the report's notes (engine/run.py)."""
        from .run import run_notes

        return run_notes(self.backend)

    def __call__(self, records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
        """(record, outcome) for each record, in order."""
        if self.own_step:
            from .convert import convert_outcomes

            yield from convert_outcomes(self.settings)(records)
        elif not self.is_async:
            for rec in records:
                yield rec, process_record(rec, self.transform, self.settings, self.counter)  # type: ignore[arg-type]
        else:
            yield from self._windowed(records)

    def _windowed(self, records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
        import asyncio

        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        loop = self._loop
        pending: deque[tuple[Record, asyncio.Task[Outcome]]] = deque()
        try:
            for rec in records:
                pending.append((rec, loop.create_task(
                    process_record_async(rec, self.transform, self.settings, self.counter))))  # type: ignore[arg-type]
                while len(pending) >= self.window:
                    r, task = pending.popleft()
                    yield r, loop.run_until_complete(task)
            while pending:
                r, task = pending.popleft()
                yield r, loop.run_until_complete(task)
        finally:
            for _, task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*(t for _, t in pending), return_exceptions=True))

    def outcomes(self, records: Iterable[Record]) -> list[Outcome]:
        """One Outcome per record, in order (the same bytes as the CLI for any batching)."""
        return [outcome for _, outcome in self(records)]

    def close(self) -> None:
        """Close the summariser's client (its connections, its cache) and the event loop."""
        if self.backend is not None:
            if self._loop is None:
                import asyncio

                self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.backend.aclose())
        if self._loop is not None:
            self._loop.close()
            self._loop = None
