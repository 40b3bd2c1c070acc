"""xcompact on Ray Data (``pip install 'xcompact[ray]'``): every record travels as its JSON bytes.

Ray's own ``read_json`` infers an Arrow schema (nulls for missing keys, reordered keys, one struct
field per tool-call ID, mixed ``content`` types abort the job) and ``read_text`` splits lines on
U+2028/U+2029/U+0085 and reads each file whole, so neither is used. Here:

- ``read_jsonl``: a streaming reader that splits on ``\\n`` only and never holds a whole file:
  one read task per file reads it in 1 MiB chunks (16 MiB ranged GETs from an object store) and
  yields blocks of about ``block_bytes``
  (a record larger than that is a block of its own). Rows: ``file``, ``source``, ``relative``,
  ``line``, ``offset``, ``raw`` (the record's bytes, line end included), ``error`` (a file that
  cannot be read).
- ``compact``: the CLI's per-record step (``executors.Processor``) over each block, as plain Ray tasks
  (no actors: an actor pool that reserves CPUs starves the read tasks and hangs a small cluster).
  Adds ``out`` (the bytes the CLI writes) and ``item`` (the report item as JSON).
- ``write_jsonl``: each block's output lines, per input, as one part
  ``OUT/<relative name>/part-<byte offset of its first record>.jsonl``; the parts of an input,
  concatenated in name order, are the CLI's output file for it, byte for byte. A compressed input
  (``.jsonl.gz``, ``.zst``, ``.bz2``, ``.xz``) is read with the CLI's decoder, and its parts are
  written in its codec (``part-*.jsonl.zst``, one frame each): concatenated, they are one valid
  stream that decompresses to the CLI's output.
- ``run``: all three plus the report (same items, totals and exit code as a CLI run), built on
  the driver in input order (``preserve_order``) and streamed to its file.
- Parquet inputs (``.parquet``): one record per row (see ``compactor_cli.parquet``: read from the
  ``messages`` list-of-structs column with Arrow's added nulls removed, which is lossy, or exactly
  from a ``conversation_json`` column), written as ``part-<first row>.parquet`` holding the
  other columns unchanged and the compacted record as JSON text (lossless).

Paths are local or object-store URLs (``s3://``, ``gs://``, anything ``pyarrow.fs`` resolves);
credentials and endpoints come from the environment of every Ray node (``AWS_ENDPOINT_URL``...).
"""

from __future__ import annotations

import functools
import logging
import os
import posixpath
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.fs as pafs
import ray
import ray.data
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from ..commands.settings import Settings
from ..errors import InvalidInputError, UsageError
from ..files.compression import codec_of, compress_bytes, decompress_bytes, open_decoded, plain_name
from ..files.records import Record
from ..files.targets import is_input_name, is_jsonl_name
from .batch import COMMANDS, configure, output_of, processor_for
from .run import Console, start_report

#: Target size of a block of records (the unit of work of one task). 16 MiB rather than 4: each task
#: also pays scheduling and a block transfer, which 4 MiB tasks (~0.3 s of work) paid 12% more of
#: on the two-node bench (bench/README.md).
BLOCK_BYTES = 16 * 2**20
#: Bytes read from a file at a time; from an object store each read is one ranged GET, so fewer,
#: larger ones (moto's S3 server took 27 s for 200 MB in 1 MiB GETs, 1.8 s in 16 MiB ones).
READ_CHUNK = 2**20
REMOTE_READ_CHUNK = 16 * 2**20
#: CPUs each task reserves. A read task mostly waits on I/O; with 0.25 + 0.75 a 1-CPU node runs a
#: read beside a compaction task, and a 2-CPU node two compaction tasks beside it.
READ_CPUS = 0.25
MAP_CPUS = 0.75
EMPTY_FILE = "empty file: expected one conversation per line (JSONL)"
PARQUET_SUFFIXES = (".parquet",)
#: Columns of a Parquet input carried to its output travel under this prefix (no clash with ours).
CARRIED = "carried:"

_ROWS = pa.schema([("file", pa.int32()), ("source", pa.string()), ("relative", pa.string()), ("line", pa.int64()),
                   ("offset", pa.int64()), ("raw", pa.large_binary()), ("error", pa.string())])


# ---------------------------------------------------------------- paths


@dataclass(frozen=True)
class InputPath:
    """One input file: its filesystem and path there, the name the report uses, the name below -o."""

    fs: Any
    path: str
    source: str
    relative: str


def _resolve(uri: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path on it) for a local path or a URL."""
    if "://" in uri:
        try:
            return pafs.FileSystem.from_uri(uri)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise UsageError(f"cannot use {uri}: {exc}") from None
    return pafs.LocalFileSystem(), os.path.abspath(uri)


def _is_url(path: str) -> bool:
    return "://" in path


def _join(base: str, relative: str) -> str:
    return base.rstrip("/") + "/" + relative if _is_url(base) else os.path.join(base, relative)


def expand_inputs(inputs: list[str]) -> list[InputPath]:
    """Files as given; directories (local or URL prefixes) become their JSONL (and Parquet) files,
    sorted, as the CLI finds them. A JSON document (``.json``) is refused: the reader streams JSONL."""
    found: list[InputPath] = []
    documents: list[str] = []
    for given in inputs:
        if given == "-":
            raise UsageError("--engine ray cannot read stdin: give files, directories or URLs")
        fs, path = _resolve(given)
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
            names = []
            for f in infos:
                rel = posixpath.relpath(f.path, path) if _is_url(given) else os.path.relpath(f.path, path)
                base = rel.rsplit("/", 1)[-1]
                if f.type != pafs.FileType.File or base.startswith("."):
                    continue
                if is_jsonl_name(base) or is_parquet(base):
                    names.append((rel, f.path))
                elif is_input_name(base):
                    documents.append(_join(given, rel))
            for rel, fpath in sorted(names):
                source = _join(given, rel) if _is_url(given) else str(Path(given) / rel)
                found.append(InputPath(fs, fpath, source, rel))
        else:
            if is_input_name(given) and not is_jsonl_name(given) and not is_parquet(given):
                documents.append(given)
            found.append(InputPath(fs, path, given, posixpath.basename(path.rstrip("/"))))
    if documents:
        raise UsageError(f"--engine ray reads JSONL (.jsonl, .ndjson), one conversation per line; {documents[0]} "
                         f"is a JSON document{f' (and {len(documents) - 1} more)' if len(documents) > 1 else ''}: "
                         "run it without --engine ray")
    if not found:
        raise UsageError("no input files found (directories are searched for *.jsonl, *.ndjson and *.parquet)")
    return found


@dataclass(frozen=True)
class OutputRoot:
    fs: Any
    path: str
    given: str

    def dir_for(self, relative: str) -> str:
        return _join(self.path, relative) if not _is_url(self.given) else self.path.rstrip("/") + "/" + relative


def plan_outputs(inputs: list[InputPath], output: str) -> OutputRoot:
    """The output root, checked before any work: each input's part directory is new or empty,
    no two inputs share one, none is an input."""
    fs, root = _resolve(output)
    out = OutputRoot(fs, root, output)
    if _is_url(output) and fs.get_file_info(root.split("/")[0]).type == pafs.FileType.NotFound:
        raise UsageError(f"-o {output}: the bucket {root.split('/')[0]} does not exist (or cannot be seen with "
                         "these credentials)")
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.File:
        raise UsageError(f"-o {output} is a file: --engine ray writes a directory (one directory of parts per input)")
    seen: dict[str, str] = {}
    input_paths = {(type(i.fs).__name__, i.path) for i in inputs}
    for i in inputs:
        target = out.dir_for(i.relative)
        if target in seen:
            raise UsageError(f"{seen[target]} and {i.source} would both be written to {_join(output, i.relative)}")
        seen[target] = i.source
        if (type(fs).__name__, target) in input_paths:
            raise UsageError(f"refusing to write over input {i.source}: choose another -o")
        tinfo = fs.get_file_info(target)
        if tinfo.type == pafs.FileType.File:
            raise UsageError(f"{_join(output, i.relative)} is a file: --engine ray writes a directory of parts there; "
                             "choose another -o")
        if tinfo.type == pafs.FileType.Directory and fs.get_file_info(pafs.FileSelector(target, recursive=True)):
            raise UsageError(f"{_join(output, i.relative)} already holds files (an earlier run?): parts of two runs "
                             "would mix; remove it or choose another -o")
    return out


# ---------------------------------------------------------------- reading


def _table(rows: dict[str, list]) -> pa.Table:
    return pa.Table.from_pydict(rows, schema=_ROWS)


def _new_rows() -> dict[str, list]:
    return {name: [] for name in _ROWS.names}


def is_parquet(name: str) -> bool:
    return name.lower().endswith(PARQUET_SUFFIXES)


def _read_parquet_file(index: int, inp: InputPath, block_bytes: int, messages_column: str,
                       json_column: str) -> Iterator[pa.Table]:
    """A Parquet file's rows, one row group batch at a time: ``raw`` is each row's record (see
    compactor_cli.parquet: lossy from a messages column, exact from a JSON column); ``line`` the
    1-based row; the other columns carried as ``carried:<name>``."""
    import pyarrow.parquet as pq

    from .parquet import BATCH_ROWS, carried, record_lines

    pending: list[pa.Table] = []
    size, row = 0, 0
    try:
        if inp.fs.get_file_info(inp.path).type == pafs.FileType.NotFound:
            rows = _new_rows()
            for name, value in (("file", index), ("source", inp.source), ("relative", inp.relative), ("line", 0),
                                ("offset", 0), ("raw", None), ("error", "no such file")):
                rows[name].append(value)
            yield _table(rows)
            return
        with inp.fs.open_input_file(inp.path) as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=BATCH_ROWS):
                table = pa.Table.from_batches([batch])
                try:
                    raws = record_lines(table, messages_column, json_column)
                except ValueError as exc:
                    raise OSError(str(exc)) from None
                n = table.num_rows
                base = _table({"file": [index] * n, "source": [inp.source] * n, "relative": [inp.relative] * n,
                               "line": list(range(row + 1, row + n + 1)), "offset": list(range(row, row + n)),
                               "raw": raws, "error": [None] * n})
                for name in (extra := carried(table, messages_column, json_column)).column_names:
                    base = base.append_column(CARRIED + name, extra.column(name))
                pending.append(base)
                row += n
                size += sum(len(r) for r in raws if r is not None)
                if size >= block_bytes:
                    yield pa.concat_tables(pending)
                    pending, size = [], 0
    except OSError as exc:
        rows = _new_rows()
        for name, value in (("file", index), ("source", inp.source), ("relative", inp.relative), ("line", 0),
                            ("offset", 0), ("raw", None),
                            ("error", f"cannot read: {getattr(exc, 'strerror', None) or exc}")):
            rows[name].append(value)
        yield _table(rows)
        return
    if pending:
        yield pa.concat_tables(pending)


def _whole_file_log(inp: InputPath, input_format: str) -> bool:
    """Is this input a Claude Code or Codex log, which the CLI reads as one record (``--from``,
    or sniffed from its first line as the CLI does)?"""
    from ..formats import FILE_LEVEL, SNIFF_BYTES, _lines_format

    if input_format in FILE_LEVEL:
        return True
    if input_format != "auto":
        return False
    head = b""
    with _open(inp) as fh:
        try:  # what decodes of a damaged compressed input (the error comes with the read, line and all)
            read = getattr(fh, "read1", fh.read)
            while len(head) < SNIFF_BYTES and (more := read(SNIFF_BYTES - len(head))):
                head += more
        except InvalidInputError:
            pass
    head = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    return b"\n" in head.strip() and _lines_format(head) is not None


def _open(inp: InputPath) -> Any:
    """The input's bytes, decompressed by its suffix with the CLI's reader (not pyarrow's guess
    from the extension: the same codecs, .xz too, and the same errors for truncated data)."""
    fh = inp.fs.open_input_stream(inp.path, compression=None)
    codec = codec_of(inp.path)
    return fh if codec is None else open_decoded(fh, codec)


def _read_file(index: int, inp: InputPath, block_bytes: int, input_format: str = "auto") -> Iterator[pa.Table]:
    """Stream one JSONL file: split on b"\\n" only (a raw U+2028 inside a string is not a line
    end), skip blank lines as the CLI does, yield blocks of about ``block_bytes``. A Claude Code
    or Codex log is one conversation: its whole bytes are one record (line None), as in the CLI."""
    rows, size, records, line_no = _new_rows(), 0, 0, 0

    def add(line_no: int | None, offset: int, raw: bytes | None, error: str | None = None) -> None:
        for name, value in (("file", index), ("source", inp.source), ("relative", inp.relative), ("line", line_no),
                            ("offset", offset), ("raw", raw), ("error", error)):
            rows[name].append(value)

    try:
        info = inp.fs.get_file_info(inp.path)
        if info.type == pafs.FileType.NotFound:
            add(0, 0, None, "no such file")
            yield _table(rows)
            return
        if info.type == pafs.FileType.Directory:
            add(0, 0, None, "is a directory")
            yield _table(rows)
            return
        if _whole_file_log(inp, input_format):
            with _open(inp) as fh:
                data = fh.read()
            add(None, 0, data) if data.strip() else add(0, 0, None, "empty file: expected a conversation")
            yield _table(rows)
            return
        read_size = READ_CHUNK if isinstance(inp.fs, pafs.LocalFileSystem) else REMOTE_READ_CHUNK
        with _open(inp) as fh:
            # decoded bytes as they come: a damaged frame fails after the lines before it (the CLI's line)
            read = fh.read1 if codec_of(inp.path) else fh.read
            parts: list[bytes] = []
            line_no, offset = 0, 0
            while True:
                chunk = read(read_size)
                if not chunk:
                    break
                start = 0
                while True:
                    cut = chunk.find(b"\n", start)
                    if cut < 0:
                        if start < len(chunk):
                            parts.append(chunk[start:])
                        break
                    piece = chunk[start:cut + 1]
                    line = b"".join(parts) + piece if parts else piece
                    parts = []
                    start = cut + 1
                    line_no += 1
                    if line.strip():
                        add(line_no, offset, line)
                        size += len(line)
                        records += 1
                    offset += len(line)
                    if size >= block_bytes:
                        yield _table(rows)
                        rows, size = _new_rows(), 0
            if parts:
                line = b"".join(parts)
                line_no += 1
                if line.strip():
                    add(line_no, offset, line)
                    records += 1
    except OSError as exc:  # the CLI: "cannot read or write: ..." and nothing written for the file
        rows = _new_rows()
        add(0, 0, None, f"cannot read or write: {getattr(exc, 'strerror', None) or exc}")
        yield _table(rows)
        return
    except InvalidInputError as exc:  # a truncated or damaged compressed input: the CLI's message
        rows = _new_rows()
        add(0, 0, None, f"{exc} (while reading line {line_no + 1})" if line_no else str(exc))
        yield _table(rows)
        return
    if not records:
        add(0, 0, None, EMPTY_FILE)
    if rows["file"]:
        yield _table(rows)


class JsonlLines(Datasource):
    """One read task per file (streamed); the records of a file stay in order. Parquet files
    (``.parquet``) give one record per row."""

    def __init__(self, inputs: list[InputPath], block_bytes: int = BLOCK_BYTES, messages_column: str = "messages",
                 json_column: str = "conversation_json", input_format: str = "auto") -> None:
        super().__init__()
        self.inputs, self.block_bytes, self.input_format = inputs, block_bytes, input_format
        self.columns = (messages_column, json_column)
        self._sizes: list[int | None] = []
        for inp in inputs:
            try:
                self._sizes.append(inp.fs.get_file_info(inp.path).size)
            except OSError:
                self._sizes.append(None)

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(s or 0 for s in self._sizes)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        tasks = []
        for index, (inp, size) in enumerate(zip(self.inputs, self._sizes, strict=True)):
            meta = BlockMetadata(num_rows=None, size_bytes=size, exec_stats=None, input_files=(inp.source,))
            if is_parquet(inp.path):
                read = functools.partial(_read_parquet_file, index, inp, self.block_bytes, *self.columns)
                schema = None  # the rows carry the file's own columns too
            else:
                read = functools.partial(_read_file, index, inp, self.block_bytes, self.input_format)
                schema = _ROWS
            tasks.append(ReadTask(read, meta, schema=schema, per_task_row_limit=per_task_row_limit))
        return tasks


def read_jsonl(paths: list[str] | str, *, block_bytes: int = BLOCK_BYTES,
               input_format: str = "auto") -> ray.data.Dataset:
    """The records of JSONL files, directories or URLs as a Dataset (see the module's doc).
    ``input_format``: the CLI's ``--from`` (a Claude Code or Codex log is one record)."""
    inputs = expand_inputs([paths] if isinstance(paths, str) else list(paths))
    return _read(inputs, block_bytes, input_format=input_format)


def _read(inputs: list[InputPath], block_bytes: int = BLOCK_BYTES, messages_column: str = "messages",
          json_column: str = "conversation_json", input_format: str = "auto") -> ray.data.Dataset:
    ctx = ray.data.DataContext.get_current()
    # Ray merges the blocks a task yields up to this size (128 MiB by default): one block, one task,
    # one core for a whole file. Blocks of block_bytes are what spreads a file over the cluster.
    ctx.target_max_block_size = min(ctx.target_max_block_size or block_bytes, max(block_bytes, 2**20 // 16))
    ctx.execution_options.preserve_order = True
    return ray.data.read_datasource(JsonlLines(inputs, block_bytes, messages_column, json_column, input_format),
                                    override_num_blocks=len(inputs),
                                    num_cpus=READ_CPUS)


# ---------------------------------------------------------------- the per-record step


def _compact_block(table: pa.Table, settings: Settings) -> pa.Table:
    proc = processor_for(settings)
    raws = table.column("raw").to_pylist()
    sources, lines, offsets = (table.column(c).to_pylist() for c in ("source", "line", "offset"))
    idx = [i for i, raw in enumerate(raws) if raw is not None]
    outcomes = proc.outcomes([Record(sources[i], lines[i], raws[i], "jsonl", offsets[i] + len(raws[i])) for i in idx])
    out: list[bytes | None] = [None] * len(raws)
    items: list[bytes | None] = [None] * len(raws)
    for i, outcome in zip(idx, outcomes, strict=True):
        out[i], items[i] = output_of(settings, outcome), orjson.dumps(outcome.item)
    node = ray.get_runtime_context().get_node_id()
    return (table.drop_columns(["raw"])
            .append_column("out", pa.array(out, pa.large_binary()))
            .append_column("item", pa.array(items, pa.large_binary()))
            .append_column("node", pa.array([node] * len(raws), pa.string())))


def compact(ds: ray.data.Dataset, settings: Settings | str, **options: Any) -> ray.data.Dataset:
    """The CLI's per-record step over a Dataset from ``read_jsonl``: adds ``out`` (bytes to
    write, or null) and ``item`` (the report item, JSON), drops ``raw``. ``settings`` from
    ``batch.settings_for``, or a command name with its options."""
    if isinstance(settings, str):
        settings = configure(settings, **options).settings
    return ds.map_batches(_compact_block, batch_format="pyarrow", batch_size=None, zero_copy_batch=True,
                          fn_kwargs={"settings": settings}, num_cpus=MAP_CPUS)


# ---------------------------------------------------------------- writing


def _write_block(table: pa.Table, root: OutputRoot, json_column: str = "conversation_json") -> pa.Table:
    outs = table.column("out").to_pylist()
    files, relatives, offsets = (table.column(c).to_pylist() for c in ("file", "relative", "offset"))
    groups: dict[int, tuple[str, int, list[int]]] = {}
    for i, (f, rel, off) in enumerate(zip(files, relatives, offsets, strict=True)):
        if table.column("error")[i].as_py() is not None:
            continue
        if f not in groups:
            groups[f] = (rel, off, [])
        groups[f][2].append(i)
    for rel, first, rows in groups.values():
        if is_parquet(rel):
            _put(root, rel, f"part-{first:016d}.parquet", _parquet_part(table, rows, outs, json_column))
        else:
            chunks = [outs[i] for i in rows if outs[i] is not None]
            codec = codec_of(rel)
            if chunks and codec:  # one frame per part: the parts concatenated are one valid stream
                _put(root, rel, f"part-{first:016d}.jsonl{rel[len(plain_name(rel)):]}",
                     compress_bytes(b"".join(chunks), codec))
            elif chunks:
                _put(root, rel, f"part-{first:016d}.jsonl", b"".join(chunks))
    return table.select(["file", "source", "relative", "line", "offset", "error", "item", "node"])


def _parquet_part(table: pa.Table, rows: list[int], outs: list[bytes | None], json_column: str) -> bytes:
    """The rows' carried columns and the compacted record as JSON text (lossless)."""
    import pyarrow.parquet as pq

    part = table.take(pa.array(rows, pa.int64()))
    carried = [c for c in part.column_names if c.startswith(CARRIED)]
    out = part.select(carried).rename_columns([c[len(CARRIED):] for c in carried])
    texts = [None if (o := outs[i]) is None else o.decode("utf-8").removesuffix("\n") for i in rows]
    out = out.append_column(json_column, pa.array(texts, pa.large_string()))
    sink = pa.BufferOutputStream()
    pq.write_table(out, sink)
    return sink.getvalue().to_pybytes()


def _put(root: OutputRoot, rel: str, name: str, data: bytes) -> None:
    target = root.dir_for(rel)
    if isinstance(root.fs, pafs.LocalFileSystem):
        root.fs.create_dir(target, recursive=True)
        tmp = f"{target}/.{name}.{uuid.uuid4().hex[:8]}.partial"
        with root.fs.open_output_stream(tmp) as fh:
            fh.write(data)
        root.fs.move(tmp, f"{target}/{name}")  # atomic: a reader never sees half a part
    else:
        with root.fs.open_output_stream(f"{target}/{name}") as fh:  # an object appears whole when its upload completes
            fh.write(data)


def write_jsonl(ds: ray.data.Dataset, output: str) -> ray.data.Dataset:
    """Write ``out`` as ordered parts under ``output`` (a directory or URL prefix); returns the
    item rows, lazily: consume them (``run`` does) to run the job."""
    fs, root = _resolve(output)
    return ds.map_batches(_write_block, batch_format="pyarrow", batch_size=None, zero_copy_batch=True,
                          fn_kwargs={"root": OutputRoot(fs, root, output)}, num_cpus=MAP_CPUS)


def part_files(output: str, relative: str) -> list[str]:
    """The parts written for one input, in order (concatenated: the CLI's output file)."""
    fs, root = _resolve(output)
    target = OutputRoot(fs, root, output).dir_for(relative)
    if fs.get_file_info(target).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(target))
    return sorted(i.path for i in infos if i.base_name.startswith("part-"))


def read_parts(output: str, relative: str, decompress: bool = False) -> bytes:
    """The concatenated parts of one input (for tests and small outputs); ``decompress``: the
    decompressed bytes of a compressed input's parts (what the CLI's output decompresses to)."""
    fs, _ = _resolve(output)
    data = []
    for p in part_files(output, relative):
        with fs.open_input_stream(p, compression=None) as fh:
            data.append(fh.read())
    codec = codec_of(relative)
    return decompress_bytes(b"".join(data), codec) if decompress and codec else b"".join(data)


def read_parquet_parts(output: str, relative: str) -> pa.Table:
    """The parts of a Parquet input, in order, as one table."""
    import pyarrow.parquet as pq

    fs, _ = _resolve(output)
    tables = []
    for p in part_files(output, relative):
        with fs.open_input_file(p) as fh:
            tables.append(pq.read_table(fh))
    return pa.concat_tables(tables)


# ---------------------------------------------------------------- a run


@dataclass
class RunResult:
    report: Any  # report.Report: totals(), exit_code, summary()
    nodes: set[str] = field(default_factory=set)  # Ray nodes that ran the per-record step

    @property
    def exit_code(self) -> int:
        return self.report.exit_code


@dataclass
class _Cluster:
    """A Ray connection this run opened (and so closes)."""

    owned: bool

    def close(self) -> None:
        if self.owned and ray.is_initialized():
            ray.shutdown()


def connect(address: str | None = None, quiet: bool = False) -> _Cluster:
    """Join ``address`` (or RAY_ADDRESS), or start a local cluster for this run; an already
    initialised Ray (a caller's) is used as it is."""
    if ray.is_initialized():
        return _Cluster(False)
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs: dict[str, Any] = dict(logging_level=logging.ERROR if quiet else logging.WARNING, log_to_driver=False,
                                  configure_logging=True)
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(address="local", include_dashboard=False, **kwargs)  # never someone else's ray start
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(f"cannot connect to the Ray cluster {address or '(local)'}: {str(exc).splitlines()[0]}") \
            from None
    return _Cluster(True)


def plan(settings: Settings, inputs: list[str] | str, output: str | None,
         report_path: str | None) -> tuple[list[InputPath], OutputRoot | None]:
    """Inputs and the output root, every path problem a UsageError before any work."""
    files = expand_inputs([inputs] if isinstance(inputs, str) else list(inputs))
    root = None
    if settings.write_output:
        if not output:
            raise UsageError("--engine ray writes a directory of parts per input: give -o DIR (a path or a URL)")
        root = plan_outputs(files, output)
    elif output:
        raise UsageError(f"{settings.command} writes no conversations: drop -o")
    if report_path and report_path != "-" and not _is_url(report_path) and os.path.isdir(report_path):
        raise UsageError(f"--report {report_path} is a directory; name a file")
    return files, root


def run(settings: Settings | str, inputs: list[str] | str, output: str | None = None, *,
        report_path: str | None = None, parameters: dict[str, Any] | None = None, quiet: bool = True,
        warnings: str = "all", emit: Callable[[str], None] | None = None, block_bytes: int = BLOCK_BYTES,
        html: str | None = None,
        messages_column: str = "messages", json_column: str = "conversation_json", **options: Any) -> RunResult:
    """``xcompact COMMAND INPUT... -o OUTPUT --report REPORT`` on the connected Ray cluster (connect
    first, or one is started for the call). ``output``: a directory or URL prefix; each input's
    output is ``OUTPUT/<name>/part-*.jsonl``; a Parquet input's, ``OUTPUT/<name>/part-*.parquet``
    (its columns, and the compacted record as JSON text in ``json_column``; the record is read
    from ``json_column`` when the file has it, else from ``messages_column``: see
    compactor_cli.parquet). Returns the report (totals, exit code)."""
    from .report import Report

    if isinstance(settings, str):
        configured = configure(settings, **options)
        settings, parameters = configured.settings, parameters if parameters is not None else configured.parameters
    emit = emit or (lambda line: print(line, file=sys.stderr))
    files, root = plan(settings, inputs, output, report_path)
    if report_path and report_path != "-" and _is_url(report_path):
        report_fs, report_target = _resolve(report_path)
        import tempfile

        fd, local_report = tempfile.mkstemp(prefix="xcompact-report-", suffix=".json")
        os.close(fd)
    else:
        report_fs, report_target, local_report = None, None, report_path  # type: ignore[assignment]
    proc = processor_for(settings)  # option problems surface here, on the driver, before any work
    report = Report(command=settings.command, parameters=parameters or {}, report_path=local_report, html_path=html)
    try:
        cluster = connect(None, quiet)
    except BaseException:
        report.abort()
        raise
    result = RunResult(report)
    lines = Console(emit, quiet, warnings)
    try:
        start_report(report, proc.backend)
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = not quiet and sys.stderr.isatty()
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # stderr: xcompact's lines, not Ray's plan
        ds = compact(_read(files, block_bytes, messages_column, json_column,
                           getattr(settings, "input_format", "auto")), settings)
        if root is not None:
            ds = ds.map_batches(_write_block, batch_format="pyarrow", batch_size=None, zero_copy_batch=True,
                                fn_kwargs={"root": root, "json_column": json_column}, num_cpus=MAP_CPUS)
        else:
            ds = ds.select_columns(["file", "source", "relative", "line", "offset", "error", "item", "node"])
        report.files = len(files)
        for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            cols = {c: batch.column(c).to_pylist() for c in ("source", "item", "error", "node")}
            rows = zip(cols["source"], cols["item"], cols["error"], cols["node"], strict=True)
            for source, item, error, node in rows:
                if error is not None:
                    report.add_file_error(source, error)
                    lines.error(source, error)
                    continue
                if item is None:  # a Parquet row without a record (null messages)
                    continue
                result.nodes.add(node)
                parsed = orjson.loads(item)
                report.add(parsed)
                lines.item(parsed)
        report.close()
        if report_fs is not None:
            with open(local_report, "rb") as src, report_fs.open_output_stream(report_target) as dst:
                dst.write(src.read())
            os.unlink(local_report)
    except BaseException:
        report.abort()
        if report_fs is not None and local_report and os.path.exists(local_report):
            os.unlink(local_report)
        raise
    finally:
        cluster.close()
    if not quiet:
        emit(report.summary())
    return result


def run_cli(settings: Settings, *, inputs: list[str], output: str | None, report_path: str | None, address: str | None,
            quiet: bool, parameters: dict[str, Any], emit: Callable[[str], None], warnings: str = "all",
            html: str | None = None) -> int:
    """What ``xcompact COMMAND ... --engine ray`` runs; returns the exit code."""
    if address:
        parameters = {**parameters, "address": address}
    from .report import EXIT_FAILED

    plan(settings, inputs, output, report_path)  # usage errors before a cluster is started or joined
    if html is not None and (_is_url(html) or os.path.isdir(html)):
        raise UsageError(f"--html {html}: name a local file (the page is written on this machine)")
    cluster = connect(address, quiet)
    try:
        return run(settings, inputs, output, report_path=report_path, parameters=parameters, quiet=quiet,
                   warnings=warnings, emit=emit, html=html).exit_code
    except ray.exceptions.RayError as exc:  # a task failed (e.g. an output it could not write): one line
        cause = getattr(exc, "cause", None) or exc
        emit(f"error: the Ray job failed: {type(cause).__name__}: {str(cause).strip().splitlines()[-1]}")
        return EXIT_FAILED
    finally:
        cluster.close()


__all__ = ["BLOCK_BYTES", "COMMANDS", "JsonlLines", "RunResult", "compact", "connect", "expand_inputs", "part_files",
           "read_jsonl", "read_parquet_parts", "read_parts", "run", "write_jsonl"]
