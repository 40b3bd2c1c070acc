"""Transcript formats: read a record in any supported format as the internal (OpenAI) dump the
tiers work on, and write a compacted dump back in the record's own format.

Request formats, compacted natively and restored exactly: ``openai`` (with the legacy
``function`` role), ``anthropic`` (Messages API), ``responses`` (Responses API input). Log
formats, read as OpenAI dumps (lossy, documented in each module): ``claude-code``, ``codex``
(one conversation per file), ``swe-agent``, ``mini-swe-agent``, ``sharegpt``.

The pipeline's per-record step::

    dump, codec = formats.parse_record(raw, from_, exact, source, line)   # record -> (dump, codec)
    problems = codec.problems(dump)                                        # as check_conversation
    ... the tiers ...
    obj = codec.to_native(new_dump)                                        # -> the record to write

and the runner's reading (a Claude Code or Codex file is one record)::

    for rec in formats.iter_records(path, display, from_, start, start_line): ...
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from ..errors import InvalidInputError
from ..files.records import NeedsExactParse, parse_exact, parse_json
from .base import DUMP_KEY, FILE_LEVEL, FORMATS, LOG_FORMATS, MSG_KEY, REQUEST_FORMATS, SOURCE_KEY, Codec, LogCodec
from .detect import NAMES, Ambiguous, closest, detect, is_line_of, likely, wrong_format
from .openai_fmt import read_openai

__all__ = ["DUMP_KEY", "FILE_LEVEL", "FORMATS", "FROM_CHOICES", "LOG_FORMATS", "MSG_KEY", "REQUEST_FORMATS",
           "SOURCE_KEY", "Codec", "adjust_cut", "detect_format", "file_format", "forced_user", "iter_records",
           "parse_record", "read", "read_file", "wrong_format_hint"]

FROM_CHOICES = ("auto",) + FORMATS


def adjust_cut(messages: list[dict], cut: int, start: int = 0) -> int:
    from .rules import adjust_cut as _adjust

    return _adjust(messages, cut, start)


def forced_user(messages: list[dict], head: list[int], kept: list[int]) -> int | None:
    from .rules import forced_user as _forced

    return _forced(messages, head, kept)


def detect_format(obj: Any) -> str:
    """The format of a parsed record (``--from auto``). InvalidInputError for an ambiguous or
    unknown shape, with a hint naming the closest format."""
    try:
        found = detect(obj)
    except Ambiguous as exc:
        names = " or ".join(f"--from {c}" for c in exc.candidates)
        raise InvalidInputError(f"ambiguous record: {exc}; name its format with {names}") from None
    if found:
        return found
    from ..model.conversation import normalize_record

    try:
        normalize_record(obj)
        message = "not a conversation xcompact reads"
    except InvalidInputError as exc:
        message = str(exc)
    near = closest(obj)
    if near and near != "openai":
        hint = (f"it looks most like {NAMES[near]} but lacks what that format needs; if it is one, "
                f"read it with --from {near}")
    else:
        hint = ("formats read: " + ", ".join(FORMATS))
    raise InvalidInputError(f"{message}; {hint}")


def read(obj: Any, from_: str = "auto", source: str | None = None, line: int | None = None,
         events: list[tuple[int, Any]] | None = None, history: str = "since-compaction") -> tuple[dict, Codec]:
    """(internal dump, codec) of a parsed record in format ``from_`` ("auto": detected).
    ``events``: the (line, object) pairs of a whole Claude Code or Codex file."""
    fmt = from_
    if fmt == "auto":
        fmt = detect_format(obj if events is None else (events[0][1] if events else None))
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown format {fmt!r}; expected one of {', '.join(FROM_CHOICES)}")
    if fmt in REQUEST_FORMATS:
        try:
            return _read_request(obj, fmt)
        except InvalidInputError as exc:
            if from_ == "auto":
                raise
            raise _with_hint(exc, likely(obj), fmt) from None
    if fmt in FILE_LEVEL:
        if events is None:
            raise InvalidInputError(f"this is one line of {NAMES[fmt]}, whose whole file is one conversation: "
                                    f"read the file with --from {fmt}")
        try:
            if fmt == "claude-code":
                from .claude_code import read_claude_code

                dump, notes = read_claude_code(events, source, history)
            else:
                from .codex import read_codex

                dump, notes = read_codex(events, source)
        except InvalidInputError as exc:
            raise _with_hint(exc, _events_format(events), fmt) from None
        if not dump["messages"]:
            _refuse_foreign_lines(fmt, events)
        return dump, LogCodec(fmt, events, notes)
    if fmt == "swe-agent":
        from .swe_agent import read_swe_agent as reader
    elif fmt == "mini-swe-agent":
        from .mini_swe_agent import read_mini_swe_agent as reader
    else:
        from .sharegpt import read_sharegpt as reader
    try:
        dump, notes = reader(obj, source, line)
    except InvalidInputError as exc:
        raise _with_hint(exc, likely(obj), fmt) from None
    return dump, LogCodec(fmt, obj, notes)


def _read_request(obj: Any, fmt: str) -> tuple[dict, Codec]:
    if fmt == "openai":
        return read_openai(obj)
    if fmt == "anthropic":
        from .anthropic import read_anthropic

        return read_anthropic(obj)
    from .responses import read_responses

    return read_responses(obj)


def _with_hint(exc: InvalidInputError, found: str | None, named: str) -> InvalidInputError:
    """``exc``, led by the wrong-format clause when the record looks like another format."""
    if not found or found == named:
        return exc
    return InvalidInputError(f"{wrong_format(found, named)} (read as {named}: {exc})")


def wrong_format_hint(obj: Any, named: str) -> str | None:
    """The wrong-format clause for a parsed record read with ``--from named``, or None."""
    if named == "auto":
        return None
    found = likely(obj)
    return wrong_format(found, named) if found and found != named else None


def _events_format(events: list[tuple[int, Any]]) -> str | None:
    """The format the first line of a file read line by line looks like."""
    for _, e in events[:1]:
        return likely(e)
    return None


def _refuse_foreign_lines(fmt: str, events: list[tuple[int, Any]]) -> None:
    """A file-level log none of whose lines its reader knows (every one skipped) is another
    format read with the wrong ``--from``: an error, never an empty conversation."""
    if any(is_line_of(fmt, e) for _, e in events):
        return
    found = _events_format(events)
    what = f"none of its {len(events)} lines is a line of {NAMES[fmt]} (every one would be skipped)"
    if found and found != fmt:
        raise InvalidInputError(f"{wrong_format(found, fmt)}: {what}")
    raise InvalidInputError(f"{what}; read it with --from auto, or name its format (formats read: "
                            f"{', '.join(FORMATS)})")


def _split_lines(raw: bytes, exact: bool) -> list[tuple[int, Any]]:
    events = []
    for n, line in enumerate(raw.split(b"\n"), 1):
        if line.strip():
            try:
                events.append((n, parse_exact(line) if exact else parse_json(line)))
            except NeedsExactParse:
                raise  # the record is read again exactly
            except InvalidInputError as exc:
                raise InvalidInputError(f"line {n}: {exc}") from None
    return events


def parse_record(raw: bytes, from_: str = "auto", exact: bool = False, source: str | None = None,
                 line: int | None = None, history: str = "since-compaction") -> tuple[dict, Codec]:
    """Bytes of one record -> (internal dump, codec); InvalidInputError when it is not a
    conversation in that format. A Claude Code or Codex record is the bytes of a whole file."""
    if from_ in FILE_LEVEL:
        try:
            events = _split_lines(raw, exact)
        except NeedsExactParse:
            raise
        except InvalidInputError as exc:
            raise _document_hint(raw, exc, from_) from None
        return read(None, from_, source, line, events=events, history=history)
    try:
        obj = parse_exact(raw) if exact else parse_json(raw)
    except InvalidInputError as exc:
        if from_ == "auto" and str(exc).startswith("broken JSON") and b"\n" in raw.strip():
            fmt = _lines_format(raw)
            if fmt:
                return read(None, fmt, source, line, events=_split_lines(raw, exact), history=history)
        raise
    return read(obj, from_, source, line)


def _document_hint(raw: bytes, exc: InvalidInputError, named: str) -> InvalidInputError:
    """A file read line by line (``--from claude-code``/``codex``) that is one JSON document
    over several lines (a pretty-printed trajectory): name what it looks like, not "broken JSON"."""
    if not str(exc).startswith("line ") or "broken JSON" not in str(exc):
        return exc
    try:
        obj = parse_json(raw)
    except InvalidInputError:
        return exc
    found = likely(obj)
    if found and found != named:
        return InvalidInputError(f"{wrong_format(found, named)}: it is one JSON document, not one event per line")
    return InvalidInputError(f"it is one JSON document, not {NAMES[named]} (one event per line); read it with "
                             "--from auto, or name its format")


def _lines_format(head: bytes) -> str | None:
    """The file-level format whose first line ``head`` starts with, or None."""
    from .claude_code import looks_like_line as cc
    from .codex import looks_like_line as cx

    first = next((ln for ln in head.split(b"\n") if ln.strip()), b"")
    try:
        obj = parse_json(first)
    except InvalidInputError:
        return None
    if cc(obj):
        return "claude-code"
    if cx(obj):
        return "codex"
    if isinstance(obj, dict) and {"id", "timestamp"} <= set(obj) and len(obj) <= 6 and "messages" not in obj:
        second = head.split(b"\n")
        rest = [ln for ln in second[1:] if ln.strip()]
        if rest:
            try:
                nxt = parse_json(rest[0])
            except InvalidInputError:
                return None
            from .responses import ITEM_TYPES

            if isinstance(nxt, dict) and (nxt.get("type") in ITEM_TYPES or nxt.get("record_type") == "state"):
                return "codex"  # an older rollout: a session header, then bare items
    return None


SNIFF_BYTES = 1 << 20  # what engines that cannot share a stream read (ray.py); sniff_format reads lines


def sniff_format(stream: Any, from_: str = "auto") -> str | None:
    """The file-level format of an open input (``files.Stream``), from its first two non-blank
    lines however long (a Claude Code line may pass 1 MiB), consuming nothing; None when its
    records are read one by one."""
    if from_ in FILE_LEVEL:
        return from_
    if from_ != "auto":
        return None
    if stream.first_byte() != ord("{"):  # every log line is an object; /dev/zero is not read ahead
        return None
    head = stream.peek_lines(2)
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if b"\n" not in head.strip():
        return None
    return _lines_format(head)


def _refuse_whole_file_log(stream: Any, named: str) -> None:
    """A Claude Code session or Codex rollout read with a per-record ``--from``: one error for
    the file (its lines are one conversation), not one per line."""
    found = sniff_format(stream, "auto")
    if found is not None:
        raise InvalidInputError(f"{wrong_format(found, named)} (its whole file is one conversation)")


def file_format(path: str, from_: str = "auto") -> str | None:
    """sniff_format of a regular file by name (a stream must be sniffed where it is read:
    ``iter_records`` does; for one, this says None)."""
    if from_ in FILE_LEVEL or from_ != "auto":
        return sniff_format(None, from_)
    from ..files.records import open_stream

    if not os.path.isfile(path):
        return None
    try:
        with open_stream(path) as stream:
            return sniff_format(stream, from_)
    except (OSError, InvalidInputError):
        return None


def read_file(path: str | os.PathLike[str], from_: str = "auto", history: str = "since-compaction"
              ) -> Iterator[tuple[str | int | None, dict, Codec]]:
    """Library entry point: every conversation of one file as (where, internal dump, codec);
    raises InvalidInputError for the first record that cannot be read, naming its line.
    ``history``: where a Claude Code log is read from ("since-compaction" or "full")."""
    from ..files.records import path_arg

    for rec in iter_records(path_arg(path), from_=from_):
        try:
            dump, codec = parse_record(rec.raw, from_, source=rec.source, line=rec.line, history=history)
        except InvalidInputError as exc:
            if rec.line is None:
                raise
            raise InvalidInputError(f"line {rec.line}: {exc.args[0]}", exc.pointer) from None
        yield rec.line, dump, codec


def iter_records(path: str, display: str | None = None, from_: str = "auto", start: int = 0,
                 start_line: int = 1) -> Iterator[Any]:
    """files.iter_records, except that a Claude Code or Codex file is one record (its whole
    bytes, form "jsonl", line None)."""
    from ..files.records import Record, open_stream
    from ..files.records import iter_records as per_record

    display = display or ("<stdin>" if path == "-" else path)
    with open_stream(path) as stream:  # the one open: sniffed and read from the same bytes
        fmt = sniff_format(stream, from_)
        if fmt is None and from_ != "auto":
            _refuse_whole_file_log(stream, from_)
        if fmt is None:
            yield from per_record(path, display, start, start_line, stream=stream)
            return
        data = stream.read(4 * stream.limit, f"the file (one {fmt} conversation, read whole)",
                           "four times the record-size limit")
    if not data.strip():
        raise InvalidInputError("empty file: expected a conversation")
    if start < len(data):
        yield Record(display, None, data, "jsonl", len(data))
