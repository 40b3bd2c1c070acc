"""What every driver of records shares (the local runner, the Ray driver, the batch function):
the run's notes and the stderr lines, capped, said the same way whoever runs the records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..status import Status
from .report import ReportItem

Emit = Callable[[str], None]
#: Warning and error lines printed per run; the rest are counted in the summary and listed in --report.
MAX_WARNING_LINES = 20
MAX_ERROR_LINES = 20


def run_notes(backend: Any) -> list[str]:
    """The report's notes for a run: the summariser that answered. (Counts are exact in every
    encoding; a Claude conversation's approximation is noted by the report as its item comes.)"""
    if backend is None:
        return []
    return [f"backend: {backend.name}" + (f", model {backend.model}" if backend.model else "")]


def start_report(report: Any, backend: Any) -> None:
    """Put the run's notes in the report."""
    for note in run_notes(backend):
        report.note(note)


class Console:
    """The run's stderr lines: every error (the first MAX_ERROR_LINES, then one line saying
    there are more), the first warning of a record unless quiet or ``--warnings summary|none``
    (as many records), and each ``--check`` offender."""

    def __init__(self, emit: Emit, quiet: bool, warnings: str = "all") -> None:
        self.emit, self.quiet, self.warnings = emit, quiet, warnings
        self.errored = self.warned = 0

    def error(self, where: str, message: str) -> None:
        self.errored += 1
        if self.errored <= MAX_ERROR_LINES:
            self.emit(f"error: {where}: {message}")
        elif self.errored == MAX_ERROR_LINES + 1:
            self.emit("error: more records failed; the summary counts them, --report lists them")

    def warning(self, where: str, first: str, count: int) -> None:
        if self.quiet or self.warnings != "all":  # --warnings summary/none: counted in the summary only
            return
        self.warned += 1
        if self.warned <= MAX_WARNING_LINES:
            more = f" (+{count - 1} more)" if count > 1 else ""
            self.emit(f"warning: {where}: {first}{more}")
        elif self.warned == MAX_WARNING_LINES + 1:
            self.emit("warning: more conversations have warnings; the summary counts them, --report lists them")

    def record(self, where: str, error: str | None, warnings: list[str], count: int) -> None:
        """The line a record calls for: its error if it failed, else its first warning."""
        if error:
            self.error(where, error)
        elif warnings:
            self.warning(where, warnings[0], count)

    def item(self, item: ReportItem) -> None:
        """``record`` for a report item (what a Ray worker sends back)."""
        where = f"{item['source']}:{item['line']}" if item.get("line") is not None else item["source"]
        error = item.get("error") if item.get("error") is not None and Status(item["status"]).failed else None
        warnings = item.get("warnings") or []
        self.record(where, error, warnings, item.get("warning_count", len(warnings)))
        self.over_threshold(where, item)

    def over_threshold(self, where: str, item: Any) -> None:
        """``compact --check``: name each conversation over its threshold, with its size and the
        threshold, also under -q (the gate's offenders are its result, not a warning)."""
        if item.get("status") == Status.OVER_THRESHOLD.value:
            unit = item.get("threshold_unit") or "tokens"
            self.emit(f"over threshold: {where}: {item.get('size_before')} {unit} > {item.get('threshold')}")
