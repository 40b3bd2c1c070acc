"""Numbers a double does not hold exactly, carried through a run as they were read.

orjson reads every decimal into a double, which keeps about 16 significant digits and tops out
near 1.8e308: ``0.30000000000000001`` would be written back as ``0.3``, and ``1e309`` cannot be
read at all. Records holding such numbers are read by the exact reader (files/records.py), which
makes each an ExactFloat: the nearest double to compute with, and the text, which every writer
puts back (``orjson_default`` for orjson, the exact writer for the record itself)."""

from __future__ import annotations

from typing import Any

import orjson


class ExactFloat(float):
    """A JSON number with more digits than a double keeps, or beyond its range."""

    text: str

    def __new__(cls, text: str) -> ExactFloat:
        obj = super().__new__(cls, text)
        obj.text = text
        return obj


def orjson_default(obj: Any) -> Any:
    """``default=`` for orjson.dumps of values read from a record: an ExactFloat as its text."""
    if type(obj) is ExactFloat:
        return orjson.Fragment(obj.text)
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")
