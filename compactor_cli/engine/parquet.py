"""Parquet in and out (``pip install 'xcompact[ray]'`` brings pyarrow).

**Reading is lossy, by Parquet's nature.** Hub datasets store ``messages`` as a list of structs:
one schema for every message of the file, so a key present in one message is a null in all the
others, and keys come back in the schema's order. ``messages_from_arrow`` removes the nulls
Arrow added (every ``None`` value except a message's ``content``, where null is meaningful),
which also removes a null a record really had; key order is the schema's. A record that was
written as JSON text (the column ``json_column``, as ``compact_parquet`` writes it) is read from
that text instead, exactly.

**Writing is lossless.** Each compacted record is written as its JSON text, the bytes xcompact
writes for it (without the line end), in the string column ``json_column``; every other column
of the input is carried through unchanged, row for row.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ..commands.settings import Settings
from ..files.records import Record
from .batch import Configured, configure, output_of, processor_for
from .report import ReportItem

MESSAGES_COLUMN = "messages"
JSON_COLUMN = "conversation_json"
BATCH_ROWS = 256


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def messages_from_arrow(messages: list[dict] | None) -> list[Any] | None:
    """A messages list as Arrow gives it back (``to_pylist``), with the nulls Arrow added removed:
    every null key in messages and in what they hold (tool calls, content parts), except
    ``content`` itself."""
    if messages is None:
        return None
    cleaned = []
    for m in messages:
        if isinstance(m, dict):
            content = m.get("content")
            m = {k: (_drop_nulls(v) if k != "content" else (_drop_nulls(content) if content is not None else None))
                 for k, v in m.items() if v is not None or k == "content"}
        cleaned.append(m)
    return cleaned


def record_lines(table: pa.Table | pa.RecordBatch, messages_column: str = MESSAGES_COLUMN,
                 json_column: str = JSON_COLUMN) -> list[bytes | None]:
    """One JSONL line per row: the row's ``json_column`` text when the table has it (lossless),
    else ``{"messages": [...]}`` from ``messages_column`` with Arrow's nulls removed. A row whose
    column is null gives ``None``."""
    names = table.schema.names
    if json_column in names:
        return [None if t is None else t.encode("utf-8") + b"\n" for t in table.column(json_column).to_pylist()]
    if messages_column not in names:
        raise ValueError(f"no column {messages_column!r} (columns: {', '.join(names)}); give messages_column")
    return [None if m is None else orjson.dumps({"messages": messages_from_arrow(m)}) + b"\n"
            for m in table.column(messages_column).to_pylist()]


def carried(table: pa.Table, messages_column: str = MESSAGES_COLUMN, json_column: str = JSON_COLUMN) -> pa.Table:
    """The columns written through unchanged (all but the record's)."""
    return table.drop_columns([c for c in (messages_column, json_column) if c in table.schema.names])


def _output_text(out: bytes | None) -> str | None:
    if out is None:
        return None
    return out[:-1].decode("utf-8") if out.endswith(b"\n") else out.decode("utf-8")


def compact_table(table: pa.Table, settings: Settings, *, source: str = "<parquet>", first_row: int = 1,
                  messages_column: str = MESSAGES_COLUMN,
                  json_column: str = JSON_COLUMN) -> tuple[pa.Table, list[ReportItem]]:
    """(the output table: carried columns + ``json_column``, the report items) for one table or
    batch of rows. Items name each row ``source:row`` (``line`` is the 1-based row number). A row
    with a null record is written with a null ``json_column`` and has no item."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    lines = record_lines(table, messages_column, json_column)
    proc = processor_for(settings)
    records = [Record(source, first_row + i, raw, "jsonl") for i, raw in enumerate(lines) if raw is not None]
    outcomes = iter(proc.outcomes(records))
    texts: list[str | None] = []
    items: list[ReportItem] = []
    for raw in lines:
        if raw is None:
            texts.append(None)
            continue
        outcome = next(outcomes)
        texts.append(_output_text(output_of(settings, outcome)))
        items.append(outcome.item)
    out = carried(table, messages_column, json_column).append_column(json_column, pa.array(texts, pa.large_string()))
    return out, items


def compact_parquet(src: str, dst: str | None, settings: Settings | Configured | str, *,
                    report_path: str | None = None, messages_column: str = MESSAGES_COLUMN,
                    json_column: str = JSON_COLUMN, batch_rows: int = BATCH_ROWS, **options: Any) -> Any:
    """Compact a Parquet file into another, streamed: ``xcompact COMMAND`` on each row's
    conversation, written as JSON text in ``json_column`` beside the other columns (``dst`` None:
    write nothing, e.g. for validate). Returns the report (``totals()``, ``exit_code``; the report
    JSON is written to ``report_path`` if given)."""
    from .report import Report

    configured = configure(settings, **options) if isinstance(settings, str) else settings
    s = configured.settings if isinstance(configured, Configured) else configured
    report = Report(command=s.command, parameters=configured.parameters if isinstance(configured, Configured) else {},
                    report_path=report_path)
    report.files = 1
    for note in processor_for(s).notes():
        report.note(note)
    writer = None
    row = 1
    try:
        pf = pq.ParquetFile(src)
        for batch in pf.iter_batches(batch_size=batch_rows):
            out, items = compact_table(pa.Table.from_batches([batch]), s, source=src, first_row=row,
                                       messages_column=messages_column, json_column=json_column)
            row += batch.num_rows
            for item in items:
                report.add(item)
            if dst is not None and s.write_output:
                if writer is None:
                    writer = pq.ParquetWriter(dst, out.schema)
                writer.write_table(out)
        if dst is not None and s.write_output and writer is None:  # no rows: an empty file, same columns
            empty = pf.schema_arrow.empty_table()
            writer = pq.ParquetWriter(dst, carried(empty, messages_column, json_column).append_column(
                json_column, pa.array([], pa.large_string())).schema)
        report.close()
    except BaseException:
        report.abort()
        raise
    finally:
        if writer is not None:
            writer.close()
    return report
