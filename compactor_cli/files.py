"""All reading and writing: input discovery, form detection, streaming records, atomic output.

Forms: ``jsonl`` (one conversation per line, streamed line by line) and ``json`` (one document:
a dumps() object or a bare list). ``.jsonl``/``.ndjson`` files are JSONL; ``.json`` files are
documents (falling back to JSONL when the whole file is not one JSON value but its first line
is); stdin and other names are sniffed the same way.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Iterator

import orjson

from .conversation import normalize_record
from .errors import InvalidInputError, OutputError, UsageError

STDIN = "-"
JSONL_SUFFIXES = (".jsonl", ".ndjson")
INPUT_SUFFIXES = (".json",) + JSONL_SUFFIXES
_BOM = b"\xef\xbb\xbf"


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
    dump: dict | None
    shape: str | None
    error: str | None = None


def parse_json(raw: bytes) -> Any:
    """orjson.loads with messages that say what is wrong, including invalid UTF-8."""
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    if not raw.strip():
        raise InvalidInputError("empty input: expected a JSON conversation")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as uexc:
            raise InvalidInputError(f"invalid UTF-8 at byte {uexc.start}: re-encode the file as UTF-8") from None
        raise InvalidInputError(f"broken JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def parse_record(raw: bytes) -> tuple[dict, str]:
    """Bytes of one record -> (normalised dump, shape)."""
    return normalize_record(parse_json(raw))


def dump_bytes(obj: Any, form: str) -> bytes:
    """Deterministic UTF-8 bytes: compact line for JSONL, 2-space indented document for JSON."""
    if form == "jsonl":
        return orjson.dumps(obj) + b"\n"
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"


def _first_line_is_value(data: bytes) -> bool:
    first = data.lstrip().split(b"\n", 1)[0]
    try:
        return isinstance(orjson.loads(first), (dict, list))
    except orjson.JSONDecodeError:
        return False


def iter_records(path: str, display: str | None = None, start: int = 0, start_line: int = 1) -> Iterator[Record]:
    """Yield the records of one input, streaming JSONL line by line. Raises InvalidInputError
    for a file-level problem (empty file) and OSError when it cannot be read. ``start`` and
    ``start_line`` resume a JSONL file after the records a previous run finished."""
    display = display or ("<stdin>" if path == STDIN else path)
    lower = path.lower()
    with (open(path, "rb") if path != STDIN else contextlib.nullcontext(sys.stdin.buffer)) as fh:
        if lower.endswith(JSONL_SUFFIXES):
            if start:
                fh.seek(start)
            yield from _iter_jsonl(fh, display, start, start_line)
            return
        data = fh.read()
    if not data.strip():
        raise InvalidInputError("empty file: expected a conversation (JSON) or conversations (JSONL)")
    # A document cannot hold a complete JSON value on its first line followed by more data,
    # so that shape means JSONL (also for a .json file). A single line is JSONL except in .json.
    several_lines = data.strip().count(b"\n") > 0
    if (several_lines or not lower.endswith(".json")) and _first_line_is_value(data):
        yield from _iter_jsonl_bytes(data, display, start)
        return
    if start < len(data):
        yield Record(display, None, data, "json", len(data))


def _iter_jsonl(fh: BinaryIO, display: str, offset: int = 0, start_line: int = 1) -> Iterator[Record]:
    any_record = offset > 0
    for lineno, line in enumerate(fh, start_line):
        offset += len(line)
        if line.strip():
            any_record = True
            yield Record(display, lineno, line, "jsonl", offset)
    if not any_record:
        raise InvalidInputError("empty file: expected one conversation per line (JSONL)")


def _iter_jsonl_bytes(data: bytes, display: str, start: int = 0) -> Iterator[Record]:
    offset = 0
    for lineno, line in enumerate(data.splitlines(keepends=True), 1):
        offset += len(line)
        if offset > start and line.strip():
            yield Record(display, lineno, line, "jsonl", offset)


def load_conversations(path: str) -> Iterator[LoadedConversation]:
    """Library entry point: parse every conversation of a file (or ``-``), never raising for a
    bad record; its ``error`` says what is wrong."""
    try:
        for rec in iter_records(path):
            try:
                dump, shape = parse_record(rec.raw)
                yield LoadedConversation(rec.source, rec.line, dump, shape)
            except InvalidInputError as exc:
                yield LoadedConversation(rec.source, rec.line, None, None, str(exc))
    except InvalidInputError as exc:
        yield LoadedConversation(path, None, None, None, str(exc))


# ---------------------------------------------------------------- inputs and outputs

@dataclass(frozen=True)
class InputFile:
    path: str  # as opened ("-" for stdin)
    relative: str  # name below -o DIR


def expand_inputs(paths: list[str]) -> list[InputFile]:
    """Files as given; directories become their ``*.json``/``*.jsonl`` files, sorted."""
    found: list[InputFile] = []
    for p in paths:
        if p == STDIN:
            found.append(InputFile(STDIN, "stdin.json"))
        elif os.path.isdir(p):
            base = Path(p)
            files = sorted(f for f in base.rglob("*") if f.is_file() and f.name.lower().endswith(INPUT_SUFFIXES)
                           and not f.name.startswith("."))
            found.extend(InputFile(str(f), str(f.relative_to(base))) for f in files)
        else:
            found.append(InputFile(p, os.path.basename(p)))
    return found


@dataclass(frozen=True)
class Target:
    """Where one input's output goes: ``None`` path means stdout."""

    input: InputFile
    path: str | None


def plan_outputs(inputs: list[str], output: str | None, in_place: bool) -> list[Target]:
    """Decide each input's destination, refusing anything that would overwrite an input."""
    files = expand_inputs(inputs)
    if not files:
        raise UsageError("no input files found (directories are searched for *.json and *.jsonl)")
    if in_place:
        if output:
            raise UsageError("--in-place and -o/--output cannot be used together")
        if any(f.path == STDIN for f in files):
            raise UsageError("--in-place cannot rewrite stdin; use -o FILE")
        return [Target(f, f.path) for f in files]
    dir_mode = output is not None and (
        len(files) > 1 or any(os.path.isdir(p) for p in inputs) or os.path.isdir(output)
        or output.endswith(os.sep))
    if output is None:
        if len(files) > 1 or any(os.path.isdir(p) for p in inputs):
            raise UsageError("several inputs: give -o DIR for the outputs, or --in-place")
        return [Target(files[0], None)]
    if output == STDIN and not dir_mode:
        return [Target(files[0], None)]
    input_paths = {os.path.realpath(f.path) for f in files if f.path != STDIN}
    targets: list[Target] = []
    seen: dict[str, str] = {}
    for f in files:
        dest = os.path.join(output, f.relative) if dir_mode else output
        real = os.path.realpath(dest)
        if real in input_paths:
            raise OutputError(f"refusing to overwrite input {f.path}: use --in-place to rewrite inputs")
        if real in seen:
            raise UsageError(f"{seen[real]} and {f.path} would both be written to {dest}")
        seen[real] = f.path
        targets.append(Target(f, dest))
    return targets


def _apply_mode(path: str, mode_from: str | None) -> None:
    if mode_from and os.path.exists(mode_from):
        os.chmod(path, os.stat(mode_from).st_mode & 0o7777)
    else:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(path, 0o666 & ~umask)


def partial_path(path: str) -> str:
    """Where the output for ``path`` grows until it is complete."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.xcompact-partial")


class PartialWriter:
    """Atomic output: written to ``.NAME.xcompact-partial`` beside ``path`` and renamed over it
    by ``commit``. The partial file survives an interruption: ``checkpoint`` makes what was
    written durable and returns its length, and a resumed run reopens it truncated to that
    length (see journal.py)."""

    def __init__(self, path: str, mode_from: str | None = None, resume_length: int | None = None) -> None:
        self.path = path
        self.mode_from = mode_from
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self.tmp = partial_path(path)
        if resume_length is not None and os.path.exists(self.tmp):
            self.fh: IO[bytes] = open(self.tmp, "r+b")
            self.fh.truncate(resume_length)
            self.fh.seek(resume_length)
        else:
            self.fh = open(self.tmp, "wb")

    def write(self, data: bytes) -> None:
        self.fh.write(data)

    def checkpoint(self) -> int:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        return self.fh.tell()

    def commit(self) -> None:
        self.checkpoint()
        self.fh.close()
        _apply_mode(self.tmp, self.mode_from)
        os.replace(self.tmp, self.path)

    def abort(self, keep: bool = False) -> None:
        """Close; remove the partial file unless it is ``keep``-t for a resumed run."""
        if not self.fh.closed:
            self.fh.close()
        if not keep:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass


class StdoutWriter:
    """stdout as a sink; not atomic, so documents are written in one piece at the end."""

    def __init__(self) -> None:
        self.fh = sys.stdout.buffer

    def write(self, data: bytes) -> None:
        self.fh.write(data)

    def checkpoint(self) -> int:
        self.fh.flush()
        return 0

    def commit(self) -> None:
        self.fh.flush()

    def abort(self, keep: bool = False) -> None:
        self.fh.flush()


def _mode_from(target: Target) -> str | None:
    """--in-place keeps the input's file mode."""
    assert target.path is not None
    same = target.input.path != STDIN and os.path.realpath(target.input.path) == os.path.realpath(target.path)
    return target.input.path if same else None


def open_sink(target: Target, resume_length: int | None = None) -> PartialWriter | StdoutWriter:
    if target.path is None:
        return StdoutWriter()
    try:
        return PartialWriter(target.path, mode_from=_mode_from(target), resume_length=resume_length)
    except OSError as exc:
        raise OutputError(f"cannot write {target.path}: {exc.strerror}") from None


def finish_commit(target: Target) -> None:
    """Complete a commit that an interruption cut between its journal entry and its rename."""
    assert target.path is not None
    partial = partial_path(target.path)
    if os.path.exists(partial):
        _apply_mode(partial, _mode_from(target))
        os.replace(partial, target.path)


def write_bytes_atomic(path: str, data: bytes) -> None:
    writer = PartialWriter(path)
    writer.write(data)
    writer.commit()
