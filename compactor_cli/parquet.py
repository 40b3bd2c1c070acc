"""Parquet in and out (``pip install 'xcompact[ray]'``): the public path of engine/parquet.py
(compact_parquet, compact_table, record_lines; see its docstring)."""

from .engine.parquet import (
    BATCH_ROWS,
    JSON_COLUMN,
    MESSAGES_COLUMN,
    carried,
    compact_parquet,
    compact_table,
    messages_from_arrow,
    record_lines,
)

__all__ = [
    "BATCH_ROWS",
    "JSON_COLUMN",
    "MESSAGES_COLUMN",
    "carried",
    "compact_parquet",
    "compact_table",
    "messages_from_arrow",
    "record_lines",
]
