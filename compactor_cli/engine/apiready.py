"""API-ready output (``--api-ready SIDECAR``): each compacted record is written as its API
takes it, without xcompact's bookkeeping at the top level (``compacted_tool_results``,
``summarized_messages``, ``tokens_used``, ``compaction_counter``, ``xcompact``, a log's
``source``), and those keys go, record by record and in order, to a JSONL sidecar::

    {"source": "in.jsonl", "line": 3, "record": "<hash of the API-ready record>", "keys": {...}}

``restore --sidecar SIDECAR`` and ``extract --sidecar SIDECAR`` put the keys back into the
i-th record before reading it, so nothing is lost: the output can be sent as it is, and the
originals still come back. A sidecar that does not match its output (fewer or more lines, a
line written for another record: a reordered, edited or foreign output; a key also in the
record with another value) fails that file, never silently."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

import orjson

from ..errors import InvalidInputError
from ..files.records import Record, dump_bytes, lossless_problems, parse_exact, parse_json
from ..formats.base import OWNED_KEYS, SOURCE_KEY

API_KEYS = OWNED_KEYS + (SOURCE_KEY,)


def _parse(raw: bytes) -> tuple[Any, bool]:
    obj = parse_json(raw)
    needs_exact, duplicates = lossless_problems(raw, obj)
    if duplicates:
        raise InvalidInputError(f"the key {duplicates[0]!r} appears twice in one object: it cannot be split exactly")
    return (parse_exact(raw), True) if needs_exact else (obj, False)


def split_record(out: bytes, form: str) -> tuple[bytes, dict[str, Any]]:
    """(the record without bookkeeping, the bookkeeping keys). A record that is not an object,
    or holds none, is written as it is."""
    try:
        obj, exact = _parse(out)
    except InvalidInputError:
        return out, {}  # a record that failed is passed through as it was read
    if not isinstance(obj, dict):
        return out, {}
    keys = {k: obj[k] for k in API_KEYS if k in obj}
    if not keys:
        return out, {}
    return dump_bytes({k: v for k, v in obj.items() if k not in keys}, form, exact), keys


def record_fingerprint(raw: bytes) -> str:
    """What ties a sidecar line to its record: a hash of the API-ready record's bytes (its line
    end and surrounding whitespace aside)."""
    import hashlib

    return hashlib.blake2b(raw.strip(b" \t\r\n"), digest_size=16).hexdigest()


def sidecar_line(rec: Record, keys: dict[str, Any], out: bytes) -> bytes:
    """The sidecar line of a record: where it came from, the fingerprint of ``out`` (the record
    as written, without its bookkeeping) and the bookkeeping ``keys``."""
    entry = {"source": rec.source, "line": rec.line, "record": record_fingerprint(out), "keys": keys}
    try:
        return orjson.dumps(entry) + b"\n"
    except orjson.JSONEncodeError:  # integers beyond 64 bits in the bookkeeping
        import json

        return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class SidecarReader:
    """The sidecar of an API-ready output, read line by line in step with its records."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.fh: IO[bytes] = open(path, "rb")
        except OSError as exc:
            raise InvalidInputError(f"cannot read the sidecar {path}: {exc.strerror}") from None
        self.n = 0

    def next_keys(self) -> tuple[dict[str, Any], str | None]:
        """The next line's bookkeeping keys and the fingerprint of its record (None in a sidecar
        written before fingerprints were)."""
        line = self.fh.readline()
        while line and not line.strip():
            line = self.fh.readline()
        self.n += 1
        if not line:
            raise InvalidInputError(f"the sidecar {self.path} has fewer records than this output ({self.n - 1}): "
                                    "is it this output's sidecar?")
        try:
            entry = parse_exact(line)
        except InvalidInputError as exc:
            raise InvalidInputError(f"sidecar {self.path} line {self.n}: {exc}") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("keys"), dict):
            raise InvalidInputError(f"sidecar {self.path} line {self.n}: expected {{\"keys\": {{...}}}}")
        fingerprint = entry.get("record")
        if fingerprint is not None and not isinstance(fingerprint, str):
            raise InvalidInputError(f"sidecar {self.path} line {self.n}: 'record' must be the record's fingerprint")
        return entry["keys"], fingerprint

    def check_end(self) -> None:
        rest = self.fh.read().strip()
        self.fh.close()
        if rest:
            raise InvalidInputError(f"the sidecar {self.path} has more records than this output ({self.n}): "
                                    "is it this output's sidecar?")


def merge_record(rec: Record, keys: dict[str, Any]) -> Record:
    """The record with its bookkeeping put back (unchanged bytes when there is none)."""
    if not keys:
        return rec
    obj, exact = _parse(rec.raw)
    if not isinstance(obj, dict):
        raise InvalidInputError("the sidecar holds bookkeeping for a record that is not an object")
    clash = [k for k in keys if k in obj and obj[k] != keys[k]]
    if clash:
        raise InvalidInputError(f"the record and its sidecar both hold {clash[0]!r}, with different values")
    big = exact or any(isinstance(v, int) and not -(2**63) <= v < 2**64 for v in _ints(keys))
    raw = dump_bytes({**obj, **keys}, rec.form, big)
    return Record(rec.source, rec.line, raw, rec.form, rec.end)


def _ints(value: Any) -> Iterator[int]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _ints(v)
    elif isinstance(value, list):
        for v in value:
            yield from _ints(v)


def merged(records: Iterator[Record], reader: SidecarReader) -> Iterator[Record]:
    """Records with their sidecar keys, in step; the sidecar must end with them."""
    for rec in records:
        keys, fingerprint = reader.next_keys()
        if fingerprint is not None and fingerprint != record_fingerprint(rec.raw):
            raise InvalidInputError(f"sidecar {reader.path} line {reader.n} was written for another record than "
                                    f"{rec.where}: is the output reordered, edited, or not this sidecar's?")
        yield merge_record(rec, keys)
    reader.check_end()
