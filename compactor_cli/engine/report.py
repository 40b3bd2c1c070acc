"""The run report: per-conversation items, totals, the summary line and the exit code.

Items are streamed to the ``--report`` file as they come, so a run over millions of
conversations keeps only the totals in memory. The document is written atomically and is
valid against ``schemas/report.schema.json``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

import orjson

from ..commands.base import Command
from ..commands.registry import COMMANDS
from ..errors import OutputError
from ..files.sinks import AtomicFile, StreamFile, lock_output, open_sink, remove_stale_partials
from ..status import Status
from ..version import __version__

EXIT_OK = 0
EXIT_FAILED = 1  # some conversation or file failed (or --check / validate found a problem)
EXIT_USAGE = 2  # bad options or arguments; nothing was processed
EXIT_INTERRUPTED = 130
EXIT_STDOUT_CLOSED = 141  # a reader closed our stdout (| head): stop quietly, as SIGPIPE would

#: Statuses Report.add tests on every item (an enum member's ``.value`` is a Python-level lookup).
_OVER_THRESHOLD = Status.OVER_THRESHOLD.value
_INVALID_INPUT = Status.INVALID_INPUT.value


class ReportItem(TypedDict, total=False):
    """One conversation's entry in the report (schemas/report.schema.json ``$defs/item``): the
    keys every driver reads; a tier's details add their own report keys beside them."""

    source: str
    line: int | None
    status: str
    format: str
    to: str
    error: str
    warnings: list[str]
    warning_count: int
    notes: list[str]
    conversion_notes: list[str]
    messages_before: int
    messages_after: int
    length_before: int
    length_after: int
    tokens_before: int | None
    tokens_after: int | None
    encoding: str  # the encoding that counted the tokens (when tokens were counted)
    encoding_source: str  # and how it was chosen (--encoding, model NAME (record|--model), default)
    encoding_approximate: bool  # True: a model with no public tokenizer (Claude), counted with the nearest
    reclaimed_count: int
    reclaimed_fraction: float
    input_bytes: int  # the record as read
    output_bytes: int  # the record as written (--dry-run: as it would have been)


#: The run's note when some conversation was counted with a vocabulary not its model's own.
APPROXIMATE_NOTE = ("token counts approximate for models without a public tokenizer (Claude): counted with "
                    "cl100k_base (items with encoding_approximate)")


class ReportError(OutputError):
    """The report file cannot be written (full disk, I/O error): the run stops, saying so."""


@dataclass
class Report:
    """Owns the totals, the summary line and the exit code of one run (like black's Report)."""

    command: str
    parameters: dict[str, Any]
    report_path: str | None = None
    statuses: Counter = field(default_factory=Counter)
    conversations: int = 0
    files: int = 0
    file_errors: int = 0
    warnings: int = 0
    fallbacks: int = 0  # summaries written with the offline sections: the model's answer could not be used
    reclaimed_count: int = 0
    fraction_sum: float = 0.0
    fraction_n: int = 0
    length_before: int = 0
    length_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    tokens_counted: bool = False
    input_bytes: int = 0
    output_bytes: int = 0
    bytes_measured: bool = False  # some record was (or, with --dry-run, would have been) written
    check_failed: bool = False
    notes: list[str] = field(default_factory=list)
    warned_records: int = 0  # records with a warning (convert's summary; not checkpointed: convert is not journaled)
    resume_state: dict[str, Any] | None = None
    html_path: str | None = None  # --html PATH: the dataset page, written when the run ends
    digest: Any = None  # pages.digest.DatasetDigest of the items, with --html
    _writer: AtomicFile | StreamFile | None = None
    _lock: Any = None
    _first_item: bool = True

    @property
    def _command(self) -> type[Command]:
        """The command's class (registry.py): what its summary line says depends on it."""
        return COMMANDS.get(self.command, Command)

    #: Counts a checkpoint of an earlier version did not keep, and what they were then.
    _ADDED: ClassVar[dict[str, int]] = {"fallbacks": 0}
    #: What a checkpoint saves, so a resumed run ends with the same totals.
    _STATE = ("statuses", "conversations", "files", "file_errors", "warnings", "fallbacks", "reclaimed_count",
              "fraction_sum",
              "fraction_n", "length_before", "length_after", "tokens_before", "tokens_after", "tokens_counted",
              "input_bytes", "output_bytes", "bytes_measured", "check_failed", "notes", "_first_item")

    def __post_init__(self) -> None:
        state, self.resume_state = self.resume_state, None
        if self.html_path:
            from ..pages.digest import DatasetDigest

            self.digest = DatasetDigest.from_state(state.get("digest") if state else None)
        if state:
            for name in self._STATE:
                value = state.get(name, getattr(self, name))
                setattr(self, name, Counter(value) if name == "statuses" else value)
        elif self.parameters.get("dry_run"):
            self.note("dry run: nothing was written; output_bytes are the sizes the records would have had"
                      + ("; the offline extractive summariser stood in for any model"
                         if self._command.models else ""))
        if not self.report_path:
            return
        try:
            self._lock = lock_output(None if self.report_path == "-" else self.report_path)
            if self._lock is not None and not state:
                remove_stale_partials(self.report_path)
            self._writer = open_sink(None if self.report_path == "-" else self.report_path,
                                     partial=state.get("partial") if state else None,
                                     resume_length=state["length"] if state else 0,
                                     resume_crc=state.get("crc", 0) if state else 0)
        except OutputError:
            self._release()
            raise
        if not state:
            head = {"tool": "xcompact", "version": __version__, "command": self.command,
                    "parameters": self.parameters}
            self._write(orjson.dumps(head)[:-1] + b',"items":[\n')

    def _write(self, data: bytes) -> None:
        assert self._writer is not None
        try:
            self._writer.write(data)
        except OSError as exc:
            raise ReportError(f"cannot write the report {self.report_path}: {exc.strerror or exc}") from None

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def rollback(self, state: dict[str, Any]) -> None:
        """Back to an earlier checkpoint of this run (a file that starts afresh on --resume)."""
        for name in self._STATE:
            value: Any = state[name] if name in state else self._ADDED[name]
            setattr(self, name, Counter(value) if name == "statuses" else value)
        if isinstance(self._writer, AtomicFile):
            self._writer.rewind(state["length"], state["crc"])

    @property
    def resumable(self) -> bool:
        """Only a report in a regular file can be continued by --resume."""
        return self._writer is None or isinstance(self._writer, AtomicFile)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def checkpoint(self) -> dict[str, Any]:
        """Flush the report file; return the state a resumed run starts from."""
        state = {name: (dict(getattr(self, name)) if name == "statuses" else getattr(self, name))
                 for name in self._STATE}
        state["notes"] = list(self.notes)
        if self.digest is not None:
            state["digest"] = self.digest.state()
        state["length"], state["crc"], state["partial"] = 0, 0, None
        if self._writer is not None:
            try:
                state["length"], state["crc"] = self._writer.checkpoint()
            except OSError as exc:
                raise ReportError(f"cannot write the report {self.report_path}: {exc.strerror or exc}") from None
            state["partial"] = getattr(self._writer, "tmp", None)
        return state

    @property
    def failed(self) -> int:
        return self.file_errors + sum(n for s, n in self.statuses.items() if Status(s).failed)

    def add(self, item: ReportItem) -> None:
        """Account for one conversation's item (see the schema for its fields)."""
        self.conversations += 1
        status = item["status"]
        self.statuses[status] += 1
        if status == _OVER_THRESHOLD:
            self.check_failed = True
        warnings = item.get("warning_count") or len(item.get("warnings") or ())
        self.warnings += warnings
        if item.get("encoding_approximate"):
            self.note(APPROXIMATE_NOTE)
        self.warned_records += 1 if warnings else 0
        rounds = item.get("rounds")
        if item.get("fallback") == "extractive" or (isinstance(rounds, list) and any(
                isinstance(r, dict) and r.get("fallback") == "extractive" for r in rounds)):
            self.fallbacks += 1
        if status != _INVALID_INPUT:
            self.reclaimed_count += item.get("reclaimed_count") or 0
            if item.get("reclaimed_fraction") is not None:
                self.fraction_sum += item["reclaimed_fraction"]
                self.fraction_n += 1
            self.length_before += item.get("length_before") or 0
            self.length_after += item.get("length_after") or 0
            tokens_before = item.get("tokens_before")
            if tokens_before is not None:
                self.tokens_counted = True
                self.tokens_before += tokens_before
                self.tokens_after += item.get("tokens_after") or 0
        if item.get("output_bytes") is not None:
            self.bytes_measured = True
            self.input_bytes += item.get("input_bytes", 0)
            self.output_bytes += item["output_bytes"]
        self._write_item(item)

    def add_file_error(self, source: str, error: str) -> None:
        """A file that could not be read at all (missing, unreadable, empty)."""
        self.file_errors += 1
        self._write_item(ReportItem(source=source, line=None, status=Status.INVALID_INPUT.value, error=error))

    def _write_item(self, item: ReportItem) -> None:
        if self.digest is not None:
            self.digest.add(item)
        if self._writer is None:
            return
        self._write((b"" if self._first_item else b",\n") + _item_bytes(item))
        self._first_item = False

    @property
    def mean_fraction(self) -> float:
        return self.fraction_sum / self.fraction_n if self.fraction_n else 0.0

    @property
    def total_fraction(self) -> float:
        if not self.length_before:
            return 0.0
        return (self.length_before - self.length_after) / self.length_before

    def totals(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "conversations": self.conversations,
            "statuses": dict(sorted(self.statuses.items())),
            "failed": self.failed,
            "file_errors": self.file_errors,
            "warnings": self.warnings,
            **({"fallbacks": self.fallbacks} if self._command.models else {}),
            "reclaimed_count": self.reclaimed_count,
            "mean_reclaimed_fraction": self.mean_fraction,
            "total_reclaimed_fraction": self.total_fraction,
            "length_before": self.length_before,
            "length_after": self.length_after,
            "tokens_before": self.tokens_before if self.tokens_counted else None,
            "tokens_after": self.tokens_after if self.tokens_counted else None,
            "input_bytes": self.input_bytes if self.bytes_measured else None,
            "output_bytes": self.output_bytes if self.bytes_measured else None,
            "notes": self.notes,
        }

    def close(self) -> None:
        """Finish the report file (atomic rename) and write the page; safe to call once the run is over."""
        if self._writer is not None:
            tail = b"\n]," + orjson.dumps({"totals": self.totals(), "exit_code": self.exit_code})[1:] + b"\n"
            self._write(tail)
            try:
                self._writer.commit()
            except OSError as exc:
                self.abort()
                raise ReportError(f"cannot write the report {self.report_path}: {exc.strerror or exc}") from None
            self._writer = None
        self._release()
        if self.html_path and self.digest is not None:  # after the report: a page that fails loses no report
            self._write_page(self.html_path)

    def _write_page(self, path: str) -> None:
        from ..pages.dataset import render_dataset_page, write_page

        html = render_dataset_page(self.command, self.parameters, __version__, self.totals(), self.exit_code,
                                   self.digest, source=self.report_path)
        try:
            write_page(path, html)
        except OutputError as exc:
            raise ReportError(str(exc)) from None
        self.digest = None  # written once

    def abort(self, keep: bool = False) -> None:
        if self._writer is not None:
            try:
                self._writer.abort(keep=keep)
            except OSError:
                pass
            self._writer = None
        self._release()

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failed or self.check_failed else EXIT_OK

    def summary(self) -> str:
        """One human line for stderr."""
        if self._command.own_step:  # convert
            n, to = self.conversations, self.parameters.get("to")
            return (f"{n} conversation{'s' if n != 1 else ''} converted to {to}"
                    + (f"; {self.warned_records} with something not carried over" if self.warned_records else "")
                    + f"; {self.failed} failed")
        parts = [f"{self.conversations} conversation{'s' if self.conversations != 1 else ''}"]
        if self.statuses:
            parts.append(", ".join(f"{n} {s.lower().replace('_', ' ')}" for s, n in sorted(self.statuses.items())))
        if self._command.tier1:
            n = self.reclaimed_count
            parts.append(f"{n:,} tool result{'s' if n != 1 else ''} reclaimed, "
                         f"{self.total_fraction:.1%} of estimated length (mean {self.mean_fraction:.1%})")
        if self.tokens_counted and self.tokens_before != self.tokens_after:
            parts.append(f"tokens {self.tokens_before:,} -> {self.tokens_after:,}")
        if self.fallbacks:
            parts.append(f"{self.fallbacks} with the offline sections (the model's answer could not be used)")
        if self.warnings:
            parts.append(f"{self.warnings} warning{'s' if self.warnings != 1 else ''}")
        parts.append(f"{self.failed} failed")
        if self.parameters.get("dry_run") and self.bytes_measured:
            parts.append(f"dry run, nothing written: the output would be {human_bytes(self.output_bytes)} "
                         f"(input {human_bytes(self.input_bytes)})")
        return "; ".join(parts)


def _item_bytes(item: ReportItem) -> bytes:
    """The item as JSON; a file name whose bytes are not UTF-8 (a lone surrogate in Python) is
    written with U+FFFD for those bytes, since JSON text cannot hold them."""
    try:
        return orjson.dumps(item)
    except TypeError:
        def clean(v: Any) -> Any:
            if isinstance(v, str):
                return v.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            if isinstance(v, list):
                return [clean(x) for x in v]
            if isinstance(v, dict):
                return {clean(k): clean(x) for k, x in v.items()}
            return v

        return orjson.dumps(clean(item))


def human_bytes(n: int) -> str:
    """1,234,567 -> '1.2 MB' (decimal units, as ls -h --si)."""
    size = float(n)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")
