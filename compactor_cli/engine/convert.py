"""``convert``'s per-record step: one record to another format, as bytes and a report item,
in the same record loop as every other command (engine/local.py). What could not be carried
over is the record's warnings (``not carried over: ...``), except the input fields a log reader
dropped, named once per file (each record's count is in the report); with ``strict`` such a
record fails; a record that cannot be read is passed through unchanged."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, cast

from ..commands.settings import Settings
from ..errors import InvalidInputError
from ..files.exact import risky_number
from ..files.records import Record, dump_bytes
from ..formats import parse_record
from ..formats.base import dropped_note
from ..formats.convert import Notes, check_carried, convert, to_plain_openai
from .report import ReportItem
from .step import Outcome, unexpected_error, with_model


def convert_record(raw: bytes, from_: str, to: str, source: str | None, line: int | None,
                   form: str, strict: bool = False, history: str = "since-compaction",
                   dropped: dict[str, int] | None = None) -> tuple[bytes, ReportItem]:
    """(bytes to write, report item) of one record; a failed record is passed through.
    ``dropped`` receives the input fields the reader had no place for (source.dropped_fields)."""

    item = cast(ReportItem, {"source": source, "line": line})
    try:
        exact = risky_number(raw)  # a number orjson would change: read it exactly
        dump, codec = parse_record(raw, from_, exact=exact, source=source, line=line, history=history)
        fatal = [p for p in codec.problems(dump) if p.fatal]
        if fatal:
            raise InvalidInputError(fatal[0].message, fatal[0].pointer)
        native, notes = convert(dump, codec, to, history)
        if codec.lossy:  # a log's model, as the compacting commands write it (docs/formats.md)
            native = with_model(native, dump, codec)
        src = native.get("source") if codec.lossy and isinstance(native, dict) else None
        counts = src.get("dropped_fields") if isinstance(src, dict) else None  # of the reading written
        if dropped is not None and isinstance(counts, dict):
            dropped.update(counts)
        plain = to_plain_openai(dump, codec.format, Notes())
        missing = check_carried(plain, native if to != "openai" else to_plain_openai(native, "openai", Notes())
                                if isinstance(native, dict) else {"messages": native}, to) \
            if to != codec.format or codec.lossy else []
        if missing:  # a bug if it ever happens: never write a record that lost a call or a result
            raise InvalidInputError(f"conversion would lose {missing[0]} (+{len(missing) - 1} more); not written")
        if strict and notes:
            raise InvalidInputError(f"not everything could be carried over: {notes[0]}"
                                    + (f" (+{len(notes) - 1} more)" if len(notes) > 1 else ""))
        item.update({"status": "CONVERTED", "format": codec.format, "to": to,
                     "messages_before": len(dump["messages"]), "messages_after": _count(native, to)})
        if notes:
            item["notes"] = notes
        try:
            return dump_bytes(native, form), item
        except InvalidInputError:
            if not exact:
                raise
            return dump_bytes(native, form, exact=True), item  # integers beyond 64 bits, decimals, written exactly
    except InvalidInputError as exc:
        item.update({"status": "INVALID_INPUT", "error": str(exc)})
        return raw, item
    except Exception as exc:  # noqa: BLE001  a value no reader expected: this record fails, never the batch
        item.update({"status": "INVALID_INPUT", "error": str(unexpected_error(exc))})
        return raw, item


def _count(native: Any, to: str) -> int:
    if to == "responses":
        items = native["input"] if isinstance(native, dict) else native
        return len(items) if isinstance(items, list) else 1
    msgs = native["messages"] if isinstance(native, dict) else native
    return len(msgs)


def convert_outcomes(settings: Settings) -> Any:
    """The record loop's ``Outcomes`` for convert (in this process: converting is cheap)."""
    to = settings.to_format or "openai"

    def outcomes(records: Iterable[Record]) -> Iterator[tuple[Record, Outcome]]:
        named: set[str] = set()  # input fields already named on stderr for this file (called per file)
        for rec in records:
            dropped: dict[str, int] = {}
            out, item = convert_record(rec.raw, settings.input_format, to, rec.source, rec.line, rec.form,
                                       settings.strict, settings.claude_code_history, dropped)
            notes = item.get("notes") or []
            if notes:
                item["warning_count"] = len(notes)  # the report's warnings total counts them
            error = item.get("error") if item["status"] == "INVALID_INPUT" else None
            yield rec, Outcome(out, item, _warnings(notes, dropped, named), error)

    return outcomes


def _warnings(notes: list[str], dropped: dict[str, int], named: set[str]) -> list[str]:
    """A record's stderr warnings: its notes, except that the input fields a reader dropped are
    named once per file, by the first record that drops each (every record's count stays in
    the report): a dataset whose every record has the same extra field gives one line, not one
    per record."""
    if not dropped:
        return [f"not carried over: {n}" for n in notes]
    note = dropped_note(dropped)
    rest = [f"not carried over: {n}" for n in notes if n != note]
    new = set(dropped) - named
    if not new:
        return rest
    named.update(new)
    return [f"{note} (named once per file; --report counts them per record)"] + rest
