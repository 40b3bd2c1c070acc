"""The lossless reader and writer: for the records the fast path (orjson) would change.

orjson reads integers beyond 64 bits as doubles, decimals into doubles (about 16 significant
digits), and keeps the last of a repeated key. The record loop sends a record that is being
rewritten here when a cheap comparison says it may have lost something (records.lossless_problems):
integers of any size stay ints, a decimal a double does not hold becomes an ExactFloat, and
repeated keys are noticed; the writer puts each number back as it was read."""

from __future__ import annotations

import os
import re
from typing import Any

from ..model.exact_numbers import ExactFloat

#: orjson reads integers outside this range as floats (which it then writes with "e+").
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
#: A decimal of 15 significant digits or fewer, with an exponent of two digits, is read into a
#: double and written back as the same value; a longer one may not be (0.30000000000000001 is
#: written 0.3, 1e-400 is 0.0, 1e309 cannot be read). A number like that (after a colon, comma
#: or bracket, as a value is) sends a record that is being rewritten to the exact reader, which
#: decides.
RISKY_NUMBER = re.compile(rb"[:,\[]\s*-?(?:[0-9.]{16,}|[0-9.]+[eE][-+]?[0-9]{3})")
#: Every byte to one of five: digits and "." to "0", "e"/"E" to "e", "+"/"-" to "s", the rest to " ".
_NUMBERISH = bytes(b"0"[0] if chr(c) in "0123456789." else b"e"[0] if chr(c) in "eE"
                   else b"s"[0] if chr(c) in "+-" else b" "[0] for c in range(256))


def risky_number(raw: bytes) -> bool:
    """``RISKY_NUMBER.search(raw)``, sooner: a match needs 16 digits or dots in a row, or a digit
    or dot, an "e" and a sign or not, then 3 digits; where the bytes mapped to their kind hold
    neither (one pass in C), there is none, and the regex (much slower on long records) runs
    only where there may be one."""
    kinds = raw.translate(_NUMBERISH)
    if b"0000000000000000" not in kinds and b"0e000" not in kinds and b"0es000" not in kinds:
        return False
    return RISKY_NUMBER.search(raw) is not None


class ExactReader:
    """Python's json with hooks: integers of any size stay exact, a decimal a double does not
    hold becomes an ExactFloat, repeated keys are noticed."""

    def __init__(self) -> None:
        self.big_ints = 0
        self.inexact_floats = 0
        self.duplicates: list[str] = []

    def parse_float(self, text: str) -> float:
        value = float(text)
        # beyond a double's range, or digits lost: the text says what the double cannot
        if value - value != 0 or ((len(text) > 15 or "e" in text or "E" in text) and _digits_lost(value, text)):
            self.inexact_floats += 1
            return ExactFloat(text)
        return value

    def parse_int(self, text: str) -> int:
        value = int(text)
        if not _INT_MIN <= value <= _INT_MAX:
            self.big_ints += 1
        return value

    def pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen and key not in self.duplicates:
                    self.duplicates.append(key)
                seen.add(key)
        return obj

    @staticmethod
    def parse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value")  # Python's json takes NaN and Infinity; JSON does not

    def loads(self, raw: bytes) -> Any:
        """The value of ``raw``; ValueError when it is not JSON (NaN, Infinity included)."""
        import json  # here: the exact reader is for the rare record, start-up for every run

        text = raw.decode("utf-8")
        return json.loads(text[1:] if text.startswith("\ufeff") else text, parse_int=self.parse_int,
                          parse_float=self.parse_float, parse_constant=self.parse_constant,
                          object_pairs_hook=self.pairs)


def duplicated_keys(raw: bytes) -> list[str]:
    """The keys that appear twice in one object of ``raw`` (read exactly)."""
    reader = ExactReader()
    try:
        reader.loads(raw)
    except (ValueError, RecursionError):
        return []
    return reader.duplicates


def _digits_lost(value: float, text: str) -> bool:
    """The double does not hold the number the text says (decimal is imported only here: the
    long and exponent numbers that need this test are rare, start-up is every run)."""
    from decimal import Decimal

    return Decimal(repr(value)) != Decimal(text)


def json_exact(obj: Any, **options: Any) -> str:
    """``json.dumps(obj, **options)`` with integers of any size and every ExactFloat as read."""
    # json writes a float subclass as a double: each ExactFloat goes in as a marker string no
    # input can hold (a fresh random nonce), which is then replaced by the number's text
    nonce = os.urandom(8).hex()  # secrets.token_hex(8), without importing secrets (hmac, random) at start-up
    texts: list[str] = []

    def marked(v: Any) -> Any:
        t = type(v)
        if t is dict:
            return {k: marked(x) for k, x in v.items()}
        if t is list:
            return [marked(x) for x in v]
        if t is ExactFloat:
            texts.append(v.text)
            return f"xcompact-{nonce}-{len(texts) - 1}"
        return v

    import json

    out: str = json.dumps(marked(obj), **options)
    if texts:
        out = re.sub(f'"xcompact-{nonce}-([0-9]+)"', lambda m: texts[int(m.group(1))], out)
    return out


def dumps_exact(obj: Any, form: str) -> bytes:
    """The bytes records.dump_bytes writes for ``form``, with integers of any size and every
    ExactFloat as read."""
    if form == "jsonl":
        return json_exact(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    return json_exact(obj, ensure_ascii=False, indent=2).encode() + b"\n"
