"""A run, from plan to exit code: check the paths, build the transform (every option problem
is found here, before any work), open the journal and the report, drive every record of every
input, checkpoint, handle signals and a closed stdout, and never stop the batch for one bad
record or file. No click here: the CLI passes ``emit`` for stderr lines and a progress factory.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..commands.registry import command_of
from ..commands.settings import RunIO, Settings
from ..errors import InvalidInputError, OutputError
from ..files.compression import codec_of
from ..files.journal import (
    CHECKPOINT_SECONDS,
    Checkpoint,
    Journal,
    fingerprint,
)
from ..files.records import CHANGED_INPUT, input_identity
from ..files.sinks import (
    AtomicFile,
    StdoutClosed,
    is_special,
    lock_output,
    open_sink,
    remove_stale_partials,
)
from ..files.targets import JSONL_SUFFIXES, STDIN, Target, is_regular_input, plan_run
from ..formats import file_format, iter_records
from ..formats.base import dropped_names
from .executors import WORKER_DIED, Outcomes, ParallelOutcomes, Processor, WorkerDiedError
from .guards import abort_quietly, plan_sidecars, refuse_log_in_place
from .report import EXIT_INTERRUPTED, EXIT_OK, EXIT_STDOUT_CLOSED, Report, ReportError
from .resume import check_report_partial, open_journal, resume_point
from .run import Console, Emit, start_report
from .step import Outcome

#: The clause of a wrong ``--from`` error (formats.detect.wrong_format), said once per file.
WRONG_FROM = re.compile(r"this looks like [^;]+?, not [^;]+?: use --from \S+ or --from auto")
#: Inputs smaller than this in total are processed in this process: a pool costs more.
PARALLEL_MIN_BYTES = int(os.environ.get("XCOMPACT_TEST_PARALLEL_MIN_BYTES") or 4 * 2**20)
#: --no-tokens toolcall/restore cost little CPU per record: below this much input a worker
#: pool costs more than it saves (bench/README.md: slower at 100 MB, 1.5x faster at 500 MB).
LIGHT_PARALLEL_MIN_BYTES = 256 * 2**20


class Progress(Protocol):
    def update(self, nbytes: int) -> None: ...
    def close(self) -> None: ...


def input_bytes(targets: list[Target]) -> int:
    total = 0
    for t in targets:
        if t.input.path != STDIN and is_regular_input(t.input.path):
            total += os.path.getsize(t.input.path)
    return total


def auto_jobs(settings: Settings, targets: list[Target]) -> int:
    """-j 0: all cores, except light work on inputs too small to repay a pool."""
    light = command_of(settings).light and not settings.count_tokens
    if light and input_bytes(targets) < LIGHT_PARALLEL_MIN_BYTES:
        return 1
    return os.cpu_count() or 1


def run_command(settings: Settings, io: RunIO, emit: Emit,
                progress: Callable[[int, str], Progress] | None = None) -> int:
    """Run a command over its inputs; return the exit code. Raises UsageError before any work
    for options that do not fit, ReportError when the report cannot be written."""
    plan = plan_run(list(io.inputs), io.output, io.in_place, io.report_path, settings.write_output,
                    settings.input_format, html_path=io.html)
    processor = Processor(settings)  # option problems surface here, before any work
    try:
        side = plan_sidecars(io, plan.targets)
        journal = open_journal(settings, io, plan.targets, emit)
    except BaseException:
        processor.close()
        raise
    try:
        return _run_journaled(settings, io, plan, processor, journal, emit, progress, side)
    finally:
        if journal is not None:
            journal.release()


def _run_journaled(settings: Settings, io: RunIO, plan: Any, processor: Processor, journal: Journal | None,
                   emit: Emit, progress: Callable[[int, str], Progress] | None, side: dict[str, Any]) -> int:
    backend = processor.backend
    if journal is not None and journal.finished:
        processor.close()
        if not io.quiet:  # resuming a finished run must not run it again: --in-place it would compact its output
            emit("nothing to resume: this run already finished (run without --resume to start again)")
        return EXIT_OK
    if journal is not None and journal.missing and not io.quiet:
        emit("warning: no interrupted run of this command on these paths to resume; starting afresh")
    if journal is not None:
        check_report_partial(journal, io, plan.targets, emit)
    resumed = journal is not None and journal.resumed
    report = Report(command=settings.command, parameters=io.parameters, report_path=io.report_path,
                    html_path=io.html, resume_state=journal.state.get("report") if resumed and journal else None)
    start_report(report, backend)
    outcomes, closer = _outcomes(settings, io, plan.targets, processor)

    def _terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        batch = _Batch(settings, report, emit, io.quiet, progress, outcomes, journal, io.warnings)
        batch.side = side
        batch.run(plan.targets)
        closer()
        report.close()
    except KeyboardInterrupt:
        _quiet_close(closer)
        report.abort(keep=journal is not None)
        hint = "; run the same command with --resume to continue" if journal is not None else ""
        emit(f"interrupted: no output was left half-written{hint}")
        return EXIT_INTERRUPTED
    except StdoutClosed:
        _quiet_close(closer)
        report.abort()
        if journal is not None:
            journal.discard()
        silence_stdout()
        return EXIT_STDOUT_CLOSED
    except BaseException as exc:  # not an interruption (a report that cannot be written...): nothing to resume
        _quiet_close(closer)
        report.abort()
        if journal is not None:
            journal.discard()
        if type(exc).__name__ == "BrokenProcessPool":  # a -j worker died: one line, not a traceback
            raise WorkerDiedError(WORKER_DIED) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if journal is not None:
        if report.file_errors:  # an output that could not be written: this attempt did not finish
            journal.discard()
        else:
            journal.finish()
    if not io.quiet:
        for text in getattr(backend, "warnings", ()) if io.warnings != "none" else ():  # e.g. an unusable cache
            emit(f"warning: {text}")
        emit(report.summary())
    return report.exit_code


def _quiet_close(closer: Callable[[], None]) -> None:
    try:
        closer()
    except BaseException:  # noqa: BLE001  closing after a failure must not hide the failure
        pass


def silence_stdout() -> None:
    """After a reader closed stdout, the interpreter's final flush must not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _outcomes(settings: Settings, io: RunIO, targets: list[Target],
              processor: Processor) -> tuple[Outcomes, Callable[[], None]]:
    """Worker processes for CPU-bound work on large enough inputs; else this process (model
    calls: a bounded window of records in flight)."""
    is_openai = processor.backend is not None and processor.backend.name == "openai"
    jobs = io.jobs or auto_jobs(settings, targets)
    if not is_openai and jobs > 1 and input_bytes(targets) >= PARALLEL_MIN_BYTES:
        parallel = ParallelOutcomes(settings, jobs)

        def close() -> None:
            try:
                parallel.close()
            finally:
                processor.close()

        return parallel, close
    return processor, processor.close


class _Batch:
    """The loop over targets: locks, sinks, checkpoints, errors, warnings."""

    def __init__(self, settings: Settings, report: Report, emit: Emit, quiet: bool,
                 progress: Callable[[int, str], Progress] | None, outcomes: Outcomes, journal: Journal | None,
                 warnings: str = "all") -> None:
        self.settings, self.report, self.emit = settings, report, emit
        self.console = Console(emit, quiet, warnings)
        self.progress, self.outcomes, self.journal = progress, outcomes, journal
        self.committed: set[int] = journal.done if journal else set()
        self.side: dict[str, Any] = {}  # --api-ready: {"path"}; --sidecar: {"reader"}
        self.wrong_from: dict[str, list[Any]] = {}  # source -> [the wrong --from clause said, records not said]
        self.dropped_said: dict[str, set[str]] = {}  # source -> the dropped input fields named on stderr

    def run(self, targets: list[Target]) -> None:
        for index, target in enumerate(targets):
            if index not in self.committed:
                self.run_target(index, target)

    # ---------------------------------------------------------------- messages

    def _take(self, outcome: Outcome, where: str) -> None:
        """One record's outcome into the report and onto stderr. A wrong ``--from`` is said once
        per file: the records after the first that fail with the same clause are counted, and
        ``_wrong_from_count`` says how many."""
        self.report.add(outcome.item)
        found = WRONG_FROM.search(outcome.error) if outcome.error else None
        if found is not None:
            source = str(outcome.item.get("source"))
            seen = self.wrong_from.get(source)
            if seen is not None and seen[0] == found.group(0):
                seen[1] += 1
                return
            self.wrong_from[source] = [found.group(0), 0]
        self.console.record(where, outcome.error, outcome.warnings, len(outcome.warnings))
        self._dropped_fields(where, outcome.item)
        self.console.over_threshold(where, outcome.item)

    def _dropped_fields(self, where: str, item: Any) -> None:
        """Input fields a log reader had no place for, named on stderr once per file by the first
        record that drops each (as ``convert`` does); every record's count is in the report."""
        for note in item.get("conversion_notes") or ():
            names = dropped_names(note)
            if not names:
                continue
            said = self.dropped_said.setdefault(str(item.get("source")), set())
            if not set(names) <= said:
                said.update(names)
                self.console.warning(where, f"{note} (named once per file; --report counts them per record)", 1)

    def _wrong_from_count(self, display: str) -> None:
        seen = self.wrong_from.pop(display, None)
        if seen is not None and seen[1]:
            self.emit(f"error: {display}: {seen[1]} more record{'s' if seen[1] > 1 else ''} failed the same way "
                      f"({seen[0]})")

    def _file_error(self, display: str, message: str) -> None:
        self.report.add_file_error(display, message)
        self.console.error(display, message)

    # ---------------------------------------------------------------- checkpoints

    def _save(self, current: Checkpoint | None) -> None:
        assert self.journal is not None
        self.journal.save(done=sorted(self.committed), current=current, report=self.report.checkpoint())

    # ---------------------------------------------------------------- one input

    def run_target(self, index: int, target: Target) -> None:
        src = target.input.path
        display = "<stdin>" if src == STDIN else src
        cur = resume_point(self.journal, self.report, self.emit, index, target, display)
        if cur and cur.get("finished"):
            self.committed.add(index)
            return
        if cur is None:
            self.report.files += 1
        report_start = cur["report_start"] if cur else (self.report.checkpoint() if self.journal else None)
        resume = cur if cur and "input_offset" in cur else None
        if src != STDIN and not os.path.exists(src):
            self._file_error(display, "no such file")
            return
        if os.path.isdir(src):
            self._file_error(display, "is a directory")
            return
        try:
            lock = lock_output(target.path) if self.settings.write_output else None
        except OutputError as exc:
            self._file_error(display, str(exc))
            return
        try:
            self._run_locked(index, target, display, resume, report_start)
        finally:
            if lock is not None:
                lock.release()
            self._wrong_from_count(display)

    def _run_locked(self, index: int, target: Target, display: str, resume: Checkpoint | None,
                    report_start: dict[str, Any] | None) -> None:
        src = target.input.path
        journaled = self.journal is not None
        start, start_line = (resume["input_offset"], resume["line"] or 1) if resume else (0, 1)
        bar = None
        if self.progress:
            size = os.path.getsize(src) if is_regular_input(src) and codec_of(src) is None else 0  # 0: unknown
            bar = self.progress(size, os.path.basename(display))
            if start:
                bar.update(start)
        sink = None
        api_sink: Any = None
        in_place = target.path is not None and src != STDIN and os.path.exists(src) and \
            os.path.realpath(src) == os.path.realpath(target.path)
        fp = fingerprint(src) if journaled else None
        ident = input_identity(src)  # a regular input must stay this file until its output is committed
        try:
            if self.settings.write_output:
                if resume is None and target.path is not None and not is_special(target.path):
                    remove_stale_partials(target.path)  # we hold its lock: no other run writes them
                sink = open_sink(target.path, mode_from=src if in_place else None,
                                 partial=resume["partial"] if resume else None,
                                 resume_length=(resume["output_length"] or 0) if resume else 0,
                                 resume_crc=(resume["output_crc"] or 0) if resume else 0, compress=True)
                if journaled and resume is None and isinstance(sink, AtomicFile):  # name the partial at once
                    self._save({"index": index, "input": fp, "input_offset": 0, "line": 1, "partial": sink.tmp,
                                "output_length": 0, "output_crc": 0, "report_start": report_start})
            pending_doc: bytes | None = None
            last = time.monotonic()

            def checkpoint(offset: int, next_line: int) -> None:
                nonlocal last
                if journaled and time.monotonic() - last >= CHECKPOINT_SECONDS:
                    length, crc = sink.checkpoint() if sink is not None else (None, None)
                    self._save({"index": index, "input": fp, "input_offset": offset, "line": next_line,
                                "partial": getattr(sink, "tmp", None), "output_length": length, "output_crc": crc,
                                "report_start": report_start})
                    last = time.monotonic()

            api_sink = open_sink(self.side["path"]) if "path" in self.side else None
            reader = self.side.get("reader")
            ranges = getattr(self.outcomes, "ranges", None) if not self.side else None
            # byte ranges of the file itself: plain JSONL only (a compressed input is read here, in order)
            if ranges is not None and src.lower().endswith(JSONL_SUFFIXES) and is_regular_input(src) \
                    and file_format(src, self.settings.input_format) is None:  # a whole-file log is one record
                base, seen = start_line - 1, start > 0
                for lo, hi, chunk in ranges(src, display, start, ident):
                    for rel, _end, outcome in chunk.records:
                        if in_place:
                            refuse_log_in_place(outcome)
                        outcome.item["line"] = base + rel
                        self._take(outcome, f"{display}:{base + rel}")
                        seen = True
                    if sink is not None:
                        sink.write(chunk.out)
                    if bar is not None:
                        bar.update(hi - lo)
                    base += chunk.lines
                    checkpoint(hi, base + 1)
                if not seen:
                    raise InvalidInputError("empty file: expected one conversation per line (JSONL)")
            else:
                records = iter_records(src, display, self.settings.input_format, start, start_line)
                if reader is not None:
                    from .apiready import merged

                    records = merged(records, reader)
                for rec, outcome in self.outcomes(records):
                    if in_place and sink is not None:
                        refuse_log_in_place(outcome)
                    self._take(outcome, rec.where)
                    if bar is not None:
                        bar.update(len(rec.raw))
                    if sink is not None and outcome.out is not None:
                        out = outcome.out
                        if api_sink is not None:  # the record as its API takes it; the bookkeeping aside
                            from .apiready import sidecar_line, split_record

                            out, keys = split_record(out, rec.form)
                            api_sink.write(sidecar_line(rec, keys, out))
                        if rec.form == "json":
                            pending_doc = out
                        else:
                            sink.write(out)
                    if rec.form == "jsonl":
                        checkpoint(rec.end, (rec.line or 0) + 1)
            if ident is not None and input_identity(src) != ident:
                raise InvalidInputError(CHANGED_INPUT)  # never commit (--in-place: rename over) a mix
            if sink is not None:
                if pending_doc is not None:
                    sink.write(pending_doc)
                if journaled and isinstance(sink, AtomicFile):
                    length, crc = sink.checkpoint()
                    self._save({"index": index, "committing": True, "partial": sink.tmp, "output_length": length,
                                "output_crc": crc, "report_start": report_start})
                sink.commit()
            if api_sink is not None:
                api_sink.commit()
                api_sink = None
            if journaled:
                self.committed.add(index)
        except StdoutClosed:
            abort_quietly(api_sink)
            if sink is not None:
                sink.abort()
            raise
        except ReportError:  # a full disk or a file size limit: not resumable, nothing is kept
            abort_quietly(api_sink)
            if sink is not None:
                sink.abort()
            raise
        except (InvalidInputError, OutputError) as exc:
            abort_quietly(api_sink)
            if sink is not None:
                sink.abort()
            self._file_error(display, str(exc))
        except OSError as exc:
            abort_quietly(api_sink)
            if sink is not None:
                sink.abort()
            self._file_error(display, f"cannot read or write: {exc.strerror or exc}")
        except KeyboardInterrupt:
            abort_quietly(api_sink)
            if sink is not None:
                sink.abort(keep=journaled)  # interrupted: the partial output waits for --resume
            raise
        except BaseException:
            abort_quietly(api_sink)
            if sink is not None:
                sink.abort()
            raise
        finally:
            if bar is not None:
                bar.close()
