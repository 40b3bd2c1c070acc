"""Checkpoints that let an interrupted run continue where it stopped (``--resume``), and the
proof that what it continues from is what it left.

Outputs grow in temporary files beside their targets and are renamed over them only when
complete, so an interrupted run never leaves a half-written output. Every few seconds the
temporary files are flushed to disk and the journal records how far the run got: targets
finished; for the current one the input's fingerprint (size, mtime, checksum of its head), the
input offset, the next line, the partial output's path, length and checksum, and the report's
state when the target began; and the report's own length and checksum; and a checksum of
the journal itself.

A resumed run trusts none of it blindly: a partial file that is missing, shorter or changed, an
input that changed, or an input offset that is not the start of the line the journal names,
makes that file start afresh (the report rolls back to where the file
began) and the run says so. A journal that cannot be read starts the whole run afresh. The
journal's name hashes the command, its parameters and its targets, so other options start
afresh. Only the run holding the journal's lock reads or writes it: a second run of the same
command on the same paths (refused by the output locks) can neither delete nor finish it. A
finished run deletes its journal and leaves its key in a short list (the last FINISHED_KEPT
runs), so --resume after the end does nothing and the cache does not grow with the runs; every
attempt that runs takes its key off that list first, so "finished" is the last attempt's, never
an earlier one's when this one failed."""

from __future__ import annotations

import os
import stat
import zlib
from typing import Any, TypedDict

import orjson

from ..errors import OutputError
from .checksum import sha1
from .sinks import OutputLock, write_bytes_atomic
from .targets import STDIN, Target

#: Seconds between checkpoints; XCOMPACT_CHECKPOINT_SECONDS overrides (more often costs fsyncs).
CHECKPOINT_SECONDS = float(os.environ.get("XCOMPACT_CHECKPOINT_SECONDS") or 2.0)
VERSION = 3  # 3: the state carries its own checksum (``crc``)
HEAD_BYTES = 1 << 16
#: How many finished runs --resume still recognises (a line of 24 characters each).
FINISHED_KEPT = 512



class Checkpoint(TypedDict, total=False):
    """Where one input stands in a journaled run: how far it was read (``input_offset``, the
    next ``line``), its partial output (``partial``, ``output_length`` and ``output_crc`` of
    what is in it), the report's state when the input began (``report_start``), and whether it
    was being renamed into place (``committing``). ``finished``: the input needs nothing more."""

    index: int
    input: Any  # the input's fingerprint (size, mtime, a hash of its head)
    input_offset: int
    line: int
    partial: str | None
    output_length: int | None
    output_crc: int | None
    report_start: dict[str, Any] | None
    committing: bool
    finished: bool


class JournalState(TypedDict):
    """The journal file: the inputs done, the one in progress, the report's state."""

    version: int
    done: list[int]
    current: Checkpoint | None
    report: dict[str, Any] | None

def offset_problem(path: str, offset: Any, line: Any) -> str | None:
    """Why a checkpoint's input offset cannot be where a run stopped reading a plain JSONL
    input, or None: it must be a line start after exactly ``line - 1`` lines. A journal edited
    by hand (an offset inside a line, or on another line than its line number) would otherwise
    start the resumed run mid-record or skip records. Reads the input up to the offset once,
    at disk speed."""
    if type(offset) is not int or type(line) is not int or offset < 0 or line < 1:
        return "its journal is damaged"
    newlines, remaining, last = 0, offset, b"\n"
    try:
        with open(path, "rb") as fh:
            while remaining:
                chunk = fh.read(min(remaining, 1 << 20))
                if not chunk:
                    return "the journal's input offset is past the input's end"
                newlines += chunk.count(b"\n")
                remaining -= len(chunk)
                last = chunk[-1:]
    except OSError as exc:
        return f"its input cannot be read ({exc.strerror})"
    if last != b"\n":
        return "the journal's input offset is inside a line"
    if newlines != line - 1:
        return f"the journal's input offset is after {newlines} lines, its line number says {line - 1}"
    return None


class JournalBusy(Exception):
    """Another run of the same command on the same paths holds the journal (``busy``), or the
    journal cannot be locked at all (a read-only cache: the message says why)."""

    def __init__(self, message: str, busy: bool) -> None:
        super().__init__(message)
        self.busy = busy


def journal_path(command: str, parameters: dict[str, Any], targets: list[Target], report_path: str | None) -> str:
    """In the cache directory (``$XDG_CACHE_HOME/xcompact/journals``), not beside the outputs,
    so output directories hold nothing but outputs."""
    from ..model.paths import default_cache_dir

    def real(p: str | None) -> str | None:
        """The path as text JSON can hold: a name that is not UTF-8 keeps its bytes, escaped."""
        if not p or p == STDIN:
            return p
        return os.fsencode(os.path.realpath(p)).decode("utf-8", "backslashreplace")

    key = sha1(orjson.dumps([command, parameters, [(real(t.input.path), real(t.path)) for t in targets],
                             real(report_path)], option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()
    return os.path.join(default_cache_dir(), "journals", f"{key[:24]}.json")


def fingerprint(path: str) -> dict[str, int] | None:
    """What identifies an input's content cheaply: size, mtime and a checksum of its head."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None  # a stream is never read here: that would consume what the run must read
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "head_crc": zlib.crc32(head)}


def _finished_keys(path: str) -> list[str]:
    try:
        with open(os.path.join(os.path.dirname(path), "finished"), "rb") as fh:
            data = fh.read(64 * FINISHED_KEPT)
    except OSError:
        return []
    return [k for k in data.decode("ascii", "replace").split("\n") if k]


def _state_crc(state: Any) -> int:
    """The checksum a journal carries of its own state: an edit by hand (an offset moved, a
    target marked done) makes the run start afresh instead of trusting it."""
    return zlib.crc32(orjson.dumps(state, option=orjson.OPT_SORT_KEYS))


def _well_formed(state: Any) -> bool:
    if not isinstance(state, dict) or state.get("version") != VERSION:
        return False
    done, cur, rep = state.get("done"), state.get("current"), state.get("report")
    if not isinstance(done, list) or not all(isinstance(i, int) for i in done):
        return False
    if cur is not None and not (isinstance(cur, dict) and isinstance(cur.get("index"), int)):
        return False
    return rep is None or isinstance(rep, dict)


class Journal:
    """The resume state of one run: read at start with --resume, written at checkpoints.
    ``problem`` says why a journal that was asked for could not be used."""

    def __init__(self, path: str, resume: bool) -> None:
        self.path = path
        self.lock = OutputLock(path)
        try:
            self.lock.acquire()
        except OutputError as exc:
            raise JournalBusy(str(exc), busy=str(exc).startswith("another xcompact run")) from None
        self.state: JournalState = self._fresh()
        self.resumed = False
        self.problem: str | None = None
        #: --resume found no journal: the run finished (``finished``) or never checkpointed.
        self.missing = resume and not os.path.exists(path)
        self.finished = self.missing and self._key in _finished_keys(path)
        if resume and not self.missing:
            try:
                with open(path, "rb") as fh:
                    state = orjson.loads(fh.read())
            except (OSError, orjson.JSONDecodeError) as exc:
                state, self.problem = None, f"its journal cannot be read ({getattr(exc, 'strerror', None) or exc})"
            if state is not None and not _well_formed(state):
                state, self.problem = None, "its journal is damaged"
            elif state is not None and state.pop("crc", None) != _state_crc(state):
                state, self.problem = None, "its journal was changed after the run wrote it"
            if state is not None:
                self.state, self.resumed = state, True
                self.finished = bool(state.get("complete"))  # written by an earlier version
        if not self.resumed:
            self.discard()
        if not self.finished:  # this attempt runs: "finished" was an earlier attempt's, and no longer holds
            self._forget_finished()

    def _forget_finished(self) -> None:
        """Take this run off the finished list, so an attempt that then fails (a dead worker, an
        output over the file-size limit) is never taken for a finished run by --resume."""
        keys = _finished_keys(self.path)
        if self._key not in keys:
            return
        try:
            write_bytes_atomic(os.path.join(os.path.dirname(self.path), "finished"),
                               "".join(k + "\n" for k in keys if k != self._key).encode())
        except OSError:
            pass  # then --resume may still say finished: the earlier behaviour, never a lost byte

    @property
    def _key(self) -> str:
        return os.path.basename(self.path).removesuffix(".json")

    def finish(self) -> None:
        """The run is over: delete the journal, remember the run as finished, unlock."""
        self.discard()
        listing = os.path.join(os.path.dirname(self.path), "finished")
        keys = [k for k in _finished_keys(self.path) if k != self._key][-(FINISHED_KEPT - 1):] + [self._key]
        try:
            write_bytes_atomic(listing, "\n".join(keys).encode() + b"\n")
        except OSError:
            pass  # costs only the "nothing to resume" message
        self.release()

    def release(self) -> None:
        self.lock.release()

    @staticmethod
    def _fresh() -> JournalState:
        return {"version": VERSION, "done": [], "current": None, "report": None}

    def start_afresh(self) -> None:
        self.state, self.resumed = self._fresh(), False
        self.discard()

    @property
    def done(self) -> set[int]:
        return set(self.state["done"])

    def current(self, index: int) -> Checkpoint | None:
        """Where input ``index`` was when the run stopped. Read from a file that may have been
        tampered with: every value is checked where it is used (engine/local.py)."""
        cur = self.state.get("current")
        return cur if cur and cur.get("index") == index else None

    def save(self, *, done: list[int], current: Checkpoint | None, report: dict[str, Any] | None) -> None:
        self.state["done"], self.state["current"], self.state["report"] = done, current, report
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            write_bytes_atomic(self.path, orjson.dumps({**self.state, "crc": _state_crc(self.state)}))
        except OSError:
            pass  # a checkpoint that cannot be written costs --resume, never the run itself

    def discard(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
