"""All reading: form detection, streaming records, parsing (fast, and lossless when needed).

Forms: ``jsonl`` (one conversation per line, streamed line by line) and ``json`` (one document:
a dumps() object or a bare list). ``.jsonl``/``.ndjson`` files are JSONL; ``.json`` files are
documents (falling back to JSONL when the whole file is not one JSON value but its first line
is); stdin, FIFOs and other names are sniffed the same way, from a stream: nothing but a JSON
document is ever read whole. Writing lives in sinks.py, the choice of paths in targets.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from ..errors import InvalidInputError, UsageError
from ..model.compiled import extension
from ..model.conversation import normalize_record
from ..model.exact_numbers import orjson_default
from .compression import CorruptInput, RecordTooLarge, codec_of, max_record_bytes, open_decoded, plain_name, too_large
from .exact import ExactReader, dumps_exact, risky_number
from .targets import JSONL_SUFFIXES, STDIN

_BOM = b"\xef\xbb\xbf"
#: The read buffer of an input: records of tens of KB are read in a few system calls per MiB, not
#: one or more each (the default is 8 KiB).
READ_BUFFER = 1 << 20


@dataclass(frozen=True)
class Record:
    """One conversation's raw bytes and where it came from."""

    source: str
    line: int | None  # 1-based line for JSONL, None for a document
    raw: bytes
    form: str  # "jsonl" or "json"
    end: int = 0  # byte offset just after this record in its file (where a resumed run starts)

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line is not None else self.source


@dataclass(frozen=True)
class LoadedConversation:
    """A parsed record: ``dump`` and its ``shape`` ("object"/"list"), or the ``error``."""

    source: str
    line: int | None
    dump: dict[str, Any] | None
    shape: str | None
    error: str | None = None


class NeedsExactParse(InvalidInputError):
    """Valid JSON the fast parser cannot hold (a number beyond a double's range): the lossless
    parser reads it (the record loop does so at once; elsewhere this is the one-line reason)."""


def is_blank(line: bytes) -> bool:
    """``not line.strip()`` without copying the line: empty, or ASCII white space only (the bytes
    ``strip`` removes are those ``isspace`` knows, and it stops at the first other byte)."""
    return not line or line.isspace()


def parse_json(raw: bytes) -> Any:
    """orjson.loads with messages that say what is wrong, including invalid UTF-8."""
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    if is_blank(raw):
        raise InvalidInputError("empty input: expected a JSON conversation")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as uexc:
            raise InvalidInputError(f"invalid UTF-8 at byte {uexc.start}: re-encode the file as UTF-8") from None
        if "number is infinity" in exc.msg:
            raise NeedsExactParse(f"a number at line {exc.lineno} column {exc.colno} is beyond the range of a "
                                  "double; only the exact reader keeps it") from None
        raise InvalidInputError(f"broken JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def parse_record(raw: bytes, exact: bool = False) -> tuple[dict[str, Any], str]:
    """Bytes of one record -> (normalised dump, shape). ``exact`` uses the lossless parser."""
    return normalize_record(parse_exact(raw) if exact else parse_json(raw))


def parse_exact(raw: bytes) -> Any:
    """The lossless parse (the slow path): integers of any size and every decimal kept exactly."""
    try:
        parse_json(raw)  # the same messages for broken input
    except NeedsExactParse:
        pass
    try:
        return ExactReader().loads(raw)
    except RecursionError:
        raise InvalidInputError("nests too deeply to be read exactly") from None
    except ValueError as exc:  # NaN or Infinity beside a number only the exact reader holds; a 4300+ digit integer
        raise InvalidInputError(f"broken JSON: {str(exc).splitlines()[0]}") from None


def lossless_problems(raw: bytes, parsed: Any) -> tuple[bool, list[str]]:
    """(needs the exact parser, repeated keys) of a record about to be rewritten.

    The fast parse loses three things silently: integers beyond 64 bits (read as floats), digits
    of a decimal beyond what a double holds, and all but the last value of a repeated key. They
    show cheaply when the record is compared with its re-serialised form (a float written with
    "e+"; a long number or exponent; fewer colons than the input) and are then confirmed by the lossless
    parser. Raises InvalidInputError when the record cannot be written
    at all (nested deeper than orjson writes)."""
    if _surely_lossless(raw, parsed):
        return False, []
    try:
        canon = orjson.dumps(parsed)
    except orjson.JSONEncodeError as exc:
        raise InvalidInputError(f"cannot be written back: {_encode_reason(exc)}") from None
    body = raw[:-1] if raw.endswith(b"\n") else raw
    if canon == body:  # written by orjson (or in its exact form): nothing can have been lost
        return False, []
    # a repeated key loses at least its colon; colons inside strings are the same on both sides
    if b"e+" not in canon and raw.count(b":") == canon.count(b":") and not risky_number(raw):
        return False, []
    exact = ExactReader()
    try:
        exact.loads(raw)
    except (ValueError, RecursionError):
        return False, []
    return exact.big_ints > 0 or exact.inexact_floats > 0, exact.duplicates


#: The compiled quick answer (files/_exact.c), or None (model/compiled.py).
_EXACT = extension("_exact", __package__)


def _surely_lossless(raw: bytes, parsed: Any) -> bool:
    """Whether the fast parse of ``raw`` certainly lost nothing, without writing it again: as
    many object members as colons outside strings (no repeated key dropped) and no number of 16
    digits or more or with a 3-digit exponent (every number held exactly). False: not sure, and
    lossless_problems decides as it always did (also where the extension is not built)."""
    if _EXACT is None:
        return False
    found = _EXACT.scan(raw)
    if found is None or found[1]:
        return False
    return bool(_EXACT.members(parsed) == found[0])


def _encode_reason(exc: Exception) -> str:
    if "ecursion" in str(exc):
        return "it nests deeper than 255 levels; flatten or remove the deep value"
    return str(exc)


def dump_bytes(obj: Any, form: str, exact: bool = False) -> bytes:
    """Deterministic UTF-8 bytes: a compact line for JSONL, a 2-space indented document for JSON.
    ``exact`` writes with Python's json, which writes integers of any size, and every ExactFloat
    as it was read."""
    try:
        if exact:
            return dumps_exact(obj, form)
        if form == "jsonl":
            return orjson.dumps(obj, default=orjson_default) + b"\n"
        return orjson.dumps(obj, default=orjson_default, option=orjson.OPT_INDENT_2) + b"\n"
    except (orjson.JSONEncodeError, RecursionError, ValueError) as exc:
        raise InvalidInputError(f"cannot be written back: {_encode_reason(exc)}") from None


def _is_value(line: bytes) -> bool:
    try:
        return isinstance(orjson.loads(line[len(_BOM):] if line.startswith(_BOM) else line), (dict, list))
    except orjson.JSONDecodeError:
        return False


def _open_input(path: str) -> BinaryIO:
    """A file, FIFO, device or ``/dev/fd/N`` (``<(...)``) is opened as a stream; "-" is stdin;
    a ``.gz``/``.zst``/``.bz2``/``.xz`` name is decompressed as it is read."""
    if path == STDIN:
        return sys.stdin.buffer
    if os.path.isdir(path):
        raise InvalidInputError("is a directory")
    fh = open(path, "rb", buffering=READ_BUFFER)
    codec = codec_of(path)
    return fh if codec is None else open_decoded(fh, codec)


def input_identity(path: str, fd: int | None = None) -> tuple[int, int, int, int] | None:
    """(device, inode, size, mtime) of a regular input (of ``fd`` when given), None for a
    stream: what must not change while a run reads the file by byte ranges or rewrites it."""
    try:
        st = os.fstat(fd) if fd is not None else os.stat(path)
    except OSError:
        return None
    import stat as _stat

    if not _stat.S_ISREG(st.st_mode):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


CHANGED_INPUT = ("the input changed while it was being read (replaced, appended to or truncated); its output "
                 "was not written: run again once the file is complete")


class Stream:
    """One open input with read-ahead pushed back: sniffing (the format, JSON or JSONL) looks
    at bytes that the records are then read from, so an input is opened once and a FIFO,
    ``<(...)`` or ``/dev/stdin`` loses nothing to the sniffing."""

    def __init__(self, fh: BinaryIO, own: bool = True) -> None:
        self.fh, self.own, self.buf = fh, own, b""
        self.limit = max_record_bytes()  # no line, document or read-ahead grows past it

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.own:
            self.fh.close()

    def _more(self, n: int = 0) -> bool:
        n = n or max(1 << 16, len(self.buf))  # doubling: a long line costs linear time
        read1 = getattr(self.fh, "read1", None)
        chunk = read1(n) if read1 is not None else self.fh.read(n)
        self.buf += chunk
        return bool(chunk)

    def first_byte(self) -> int | None:
        """The first non-blank byte after an optional BOM (None: the input is blank), consuming
        nothing and reading no further than it."""
        while True:
            head = self.buf[len(_BOM):] if self.buf.startswith(_BOM) else self.buf
            stripped = head.lstrip()
            if stripped:
                return stripped[0]
            if len(self.buf) > self.limit:
                raise too_large("the blank space the input starts with", self.limit)
            if not self._more(1 << 16):
                return None

    def peek_lines(self, n: int) -> bytes:
        """The bytes through the first ``n`` non-blank lines (or to the end), consuming nothing."""
        pos = found = 0
        while True:
            nl = self.buf.find(b"\n", pos)
            if nl < 0:  # read more (doubling, so a long line costs linear time), up to the limit
                if len(self.buf) > self.limit or not self._more():
                    return self.buf
                continue
            if self.buf[pos:nl].strip(b" \t\r" + _BOM):
                found += 1
                if found == n:
                    return self.buf[:nl + 1]
            pos = nl + 1

    def unread(self, data: bytes) -> None:
        self.buf = data + self.buf

    def readline(self) -> bytes:
        """The next line; RecordTooLarge (its reader names the line) past the limit."""
        nl = self.buf.find(b"\n")
        if nl >= 0:
            line, self.buf = self.buf[:nl + 1], self.buf[nl + 1:]
        else:
            more = self.fh.readline(self.limit + 1 - len(self.buf)) if len(self.buf) <= self.limit else b""
            line, self.buf = self.buf + more, b""
        if len(line) > self.limit:
            raise too_large("a line", self.limit)
        return line

    def read(self, limit: int | None = None, what: str = "the JSON document",
             kind: str = "the record-size limit") -> bytes:
        """The rest of the input, at most ``limit`` bytes (the record-size limit), else
        RecordTooLarge saying ``what`` is too long."""
        limit = self.limit if limit is None else limit
        if len(self.buf) > limit:
            raise too_large(what, limit, kind)
        data, self.buf = self.buf + self.fh.read(limit + 1 - len(self.buf)), b""
        if len(data) > limit:
            raise too_large(what, limit, kind)
        return data

    def __iter__(self) -> Iterator[bytes]:
        while self.buf:
            yield self.readline()
        readline, limit = self.fh.readline, self.limit
        while True:  # the file object's own lines, each read no further than the limit
            line = readline(limit + 1)
            if not line:
                return
            if len(line) > limit:
                raise too_large("a line", limit)
            yield line

    def seekable(self) -> bool:
        return bool(getattr(self.fh, "seekable", lambda: False)())

    def seek(self, pos: int) -> None:
        self.buf = b""
        self.fh.seek(pos)


def open_stream(path: str) -> Stream:
    """The one open of an input (stdin is not closed afterwards)."""
    if path == STDIN:
        return Stream(sys.stdin.buffer, own=False)
    return Stream(_open_input(path))


def _first_byte(fh: Stream) -> int | None:
    """A stream that is not JSON, such as /dev/zero, is refused before a line of it is read."""
    return fh.first_byte()


def iter_records(path: str, display: str | None = None, start: int = 0, start_line: int = 1,
                 stream: Stream | None = None) -> Iterator[Record]:
    """Yield the records of one input, streaming JSONL line by line (files, stdin, FIFOs alike;
    only a JSON document is read whole). Raises InvalidInputError for a file-level problem (empty
    file, not JSON) and OSError when it cannot be read. ``start`` and ``start_line`` resume a
    JSONL input after the records a previous run finished. ``stream``: the input already open
    (and sniffed) by the caller."""
    display = display or ("<stdin>" if path == STDIN else path)
    if stream is None:
        with open_stream(path) as fh:
            yield from _records(fh, path, display, start, start_line)
    else:
        yield from _records(stream, path, display, start, start_line)


def _records(fh: Stream, path: str, display: str, start: int, start_line: int) -> Iterator[Record]:
    lower = plain_name(path).lower()  # x.jsonl.gz is JSONL
    if lower.endswith(JSONL_SUFFIXES):
        yield from _iter_jsonl(fh, display, start, start_line)
        return
    first = _first_byte(fh)
    if first is not None and first not in b"{[":
        raise InvalidInputError(f"not JSON: the input starts with {bytes([first])!r}; expected a conversation "
                                "(a JSON object or list) or JSONL")
    blank = b""  # leading blank lines stay part of the byte stream (offsets, pass-through)
    try:
        line1 = fh.readline()
        while line1 and not line1.strip(b" \t\r\n" + _BOM):
            blank += line1
            if len(blank) > fh.limit:
                raise too_large("the blank space the input starts with", fh.limit)
            line1 = fh.readline()
    except RecordTooLarge:
        first = blank.count(b"\n") + 1
        raise too_large(f"line {first}", fh.limit) from None
    if _is_value(line1.strip()):
        # A document cannot hold a complete JSON value on its first line followed by more data,
        # so that shape means JSONL (also for a .json file); a lone line is a document in .json.
        gap = b""
        nxt = fh.readline()
        while nxt and not nxt.strip():
            gap += nxt
            if len(gap) > fh.limit:
                raise too_large("the blank space after line 1", fh.limit)
            nxt = fh.readline()
        if nxt or not lower.endswith(".json"):
            fh.unread(blank + line1 + gap + nxt)
            yield from _iter_jsonl(fh, display, start, start_line)
            return
        data = blank + line1 + gap
    else:
        try:
            data = blank + line1 + fh.read(max(fh.limit - len(blank) - len(line1), 0))
        except RecordTooLarge:
            raise too_large("the JSON document", fh.limit) from None
    if not data.strip():
        raise InvalidInputError("empty file: expected a conversation (JSON) or conversations (JSONL)")
    if start < len(data):
        yield Record(display, None, data, "json", len(data))


def _iter_jsonl(fh: Any, display: str, start: int = 0, start_line: int = 1) -> Iterator[Record]:
    """Lines split on b"\\n" only (a raw U+2028 inside a string is not a line end)."""
    offset = 0
    any_record = start > 0
    seekable = start and fh.seekable()
    if seekable:
        fh.seek(start)
        offset = start
    lineno = start_line if seekable else 1
    try:
        for line in fh:
            offset += len(line)
            if offset <= start:
                lineno += 1
                continue
            if not is_blank(line):
                any_record = True
                yield Record(display, lineno, line, "jsonl", offset)
            lineno += 1
    except CorruptInput as exc:  # the records before it were read; say where it broke
        raise CorruptInput(f"{exc} (while reading line {lineno})") from None
    except RecordTooLarge:
        raise too_large(f"line {lineno}", fh.limit if isinstance(fh, Stream) else max_record_bytes()) from None
    if not any_record:
        raise InvalidInputError("empty file: expected one conversation per line (JSONL)")


def path_arg(path: Any, name: str = "path") -> str:
    """A library function's file argument as the str the readers take: a str or an os.PathLike
    (a ``pathlib.Path``); anything else is a UsageError, not a TypeError from deep inside."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise UsageError(f"{name}: expected a file name (str or pathlib.Path), got {type(path).__name__}")
    return path


def load_conversations(path: str | os.PathLike[str]) -> Iterator[LoadedConversation]:
    """Library entry point: parse every conversation of a file (or ``-``), never raising for a
    bad record; its ``error`` says what is wrong."""
    path = path_arg(path)
    try:
        for rec in iter_records(path):
            try:
                dump, shape = parse_record(rec.raw)
                yield LoadedConversation(rec.source, rec.line, dump, shape)
            except InvalidInputError as exc:
                yield LoadedConversation(rec.source, rec.line, None, None, str(exc))
    except InvalidInputError as exc:
        yield LoadedConversation(path, None, None, None, str(exc))
