"""Resuming a run: its journal opened (or why it cannot be), a resumed report checked against
the journal, and the verified point each input continues from (an input changed, a partial
output tampered with or a checkpoint that does not name a line start: that input starts
afresh, said on stderr)."""

from __future__ import annotations

import os

from ..commands.settings import RunIO, Settings
from ..errors import UsageError
from ..files.compression import codec_of
from ..files.journal import Checkpoint, Journal, JournalBusy, fingerprint, journal_path, offset_problem
from ..files.sinks import file_crc, is_special, remove_partial, verify_partial
from ..files.targets import JSONL_SUFFIXES, STDIN, Target, is_regular_input
from .report import Report
from .run import Emit


def open_journal(settings: Settings, io: RunIO, targets: list[Target], emit: Emit) -> Journal | None:
    streams = [t.input.path for t in targets if t.input.path == STDIN or is_special(t.input.path)]
    if streams and io.resume:  # a FIFO, <(...) or /dev/stdin cannot be read again from a checkpoint
        raise UsageError(f"--resume cannot continue {streams[0]}: it is a stream (stdin, a FIFO, <(...) or a "
                         "device), which cannot be read a second time; save it to a file first, or run without "
                         "--resume")
    if io.resume and (io.api_ready or io.sidecar):
        raise UsageError("--resume cannot continue an --api-ready or --sidecar run: run it again without --resume")
    journaled = io.journal and settings.write_output and all(t.path is not None for t in targets) and not streams \
        and io.report_path != STDIN and not io.api_ready and not io.sidecar
    if not journaled:
        if io.resume:
            raise UsageError("--resume needs outputs in files (-o or --in-place), inputs in files and the report "
                             "in a file, not stdin or stdout")
        return None
    path = journal_path(settings.command, io.parameters, targets, io.report_path)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError as exc:
        if io.resume:
            raise UsageError(f"cannot read the journal in {os.path.dirname(path)}: {exc.strerror}") from None
        emit(f"warning: cannot keep checkpoints in {os.path.dirname(path)} ({exc.strerror}); "
             "this run cannot be resumed (set XDG_CACHE_HOME)")
        return None
    try:
        journal = Journal(path, resume=io.resume)
    except JournalBusy as exc:
        if io.resume:
            raise UsageError("another xcompact run of this command on these paths is running (it holds the "
                             "journal); wait for it to finish before --resume" if exc.busy else
                             f"cannot lock the journal: {exc}") from None
        if not exc.busy:
            emit(f"warning: cannot keep checkpoints ({exc}); this run cannot be resumed (set XDG_CACHE_HOME)")
        return None  # busy: its outputs are refused one by one by their locks; the journal stays the other run's
    if journal.problem:
        emit(f"warning: cannot resume: {journal.problem}; starting the run afresh")
    return journal


def check_report_partial(journal: Journal, io: RunIO, targets: list[Target], emit: Emit) -> None:
    """A resumed report must be the one this run wrote; else the run starts afresh (refused when
    inputs were already rewritten in place, since running them again would compact them twice)."""
    state = journal.state.get("report")
    if not journal.resumed or not io.report_path or not state:
        return
    problem = verify_partial(state.get("partial"), state.get("length"), state.get("crc"), io.report_path)
    if problem is None:
        return
    problem = problem.replace("its partial output", "the partial report")
    if io.in_place and journal.state["done"]:
        raise UsageError(f"cannot resume: {problem}, and {len(journal.state['done'])} inputs were already "
                         "rewritten in place; run without --resume on the inputs not yet done")
    emit(f"warning: cannot resume: {problem}; starting the run afresh")
    remove_partial(state.get("partial"), io.report_path or "")
    cur = journal.state.get("current") or {}
    index = cur.get("index")
    path = targets[index].path if isinstance(index, int) and 0 <= index < len(targets) else None
    if path:
        remove_partial(cur.get("partial"), path)
    journal.start_afresh()


def resume_point(journal: Journal | None, report: Report, emit: Emit, index: int, target: Target,
                 display: str) -> Checkpoint | None:
    """The verified checkpoint to continue ``target`` from, or None to start it afresh (the
    report goes back to where the target began)."""
    cur = journal.current(index) if journal and journal.resumed else None
    if cur is None:
        return None
    if cur.get("committing"):  # cut between the journal entry and the rename
        partial, length, crc = cur.get("partial"), cur.get("output_length"), cur.get("output_crc")
        if target.path and verify_partial(partial, length, crc, target.path) is None:
            assert isinstance(partial, str)  # verify_partial found it our own partial file
            if os.path.exists(target.input.path) and \
                    os.path.realpath(target.input.path) == os.path.realpath(target.path):
                os.chmod(partial, os.stat(target.input.path).st_mode & 0o7777)  # --in-place keeps the mode
            os.replace(partial, os.path.realpath(target.path))
            return {"finished": True}
        if target.path and file_crc(target.path) == (length, crc):
            return {"finished": True}  # the rename had happened
        problem = "its output was not finished when the run stopped"
    elif cur.get("input") != fingerprint(target.input.path):
        problem = "the input changed since the checkpoint"
    elif (moved := offset_of_line_problem(target.input.path, cur)) is not None:
        problem = moved
    else:
        unverified = verify_partial(cur.get("partial"), cur.get("output_length"), cur.get("output_crc"),
                                    target.path or "")
        if unverified is None:
            return cur
        problem = unverified
    report_start = cur.get("report_start")
    if not isinstance(report_start, dict):
        raise UsageError("cannot resume: the journal is damaged; run again without --resume")
    emit(f"warning: {display}: cannot resume it ({problem}); starting it afresh")
    remove_partial(cur.get("partial"), target.path or "")
    report.rollback(report_start)
    return {"report_start": report_start}


def offset_of_line_problem(path: str, cur: Checkpoint) -> str | None:
    """A plain JSONL input's checkpoint must name a line start after as many lines as its line
    number says (an edited journal must not start mid-record or skip records); other inputs
    are read from their start or checked by their fingerprint alone."""
    if not path.lower().endswith(JSONL_SUFFIXES) or codec_of(path) is not None or not is_regular_input(path):
        return None
    return offset_problem(path, cur.get("input_offset", 0), cur.get("line") or 1)
