"""Records into blocks and blocks into parts, for --engine ray (engine/ray.py): ``read_jsonl``
reads JSONL splitting on ``\\n`` only, in 1 MiB chunks or 16 MiB ranged GETs, never a whole
file, and Parquet inputs one record per row; ``write_jsonl`` writes each block's output lines as
one part ``OUT/<relative name>/part-<byte offset>.jsonl`` (in the input's codec), and Parquet
blocks as ``part-<first row>.parquet``. The parts of an input, concatenated in name order, are
the CLI's output for it, byte for byte."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import ray
import ray.data
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from ..errors import InvalidInputError
from ..files.compression import codec_of, compress_bytes, decompress_bytes, open_decoded, plain_name
from .ray_paths import InputPath, OutputRoot, expand_inputs, is_parquet, resolve

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
#: Columns of a Parquet input carried to its output travel under this prefix (no clash with ours).
CARRIED = "carried:"

ROWS = pa.schema([("file", pa.int32()), ("source", pa.string()), ("relative", pa.string()), ("line", pa.int64()),
                   ("offset", pa.int64()), ("raw", pa.large_binary()), ("error", pa.string())])



def rows_table(rows: dict[str, list]) -> pa.Table:
    return pa.Table.from_pydict(rows, schema=ROWS)


def _new_rows() -> dict[str, list]:
    return {name: [] for name in ROWS.names}


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
            yield rows_table(rows)
            return
        with inp.fs.open_input_file(inp.path) as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=BATCH_ROWS):
                table = pa.Table.from_batches([batch])
                try:
                    raws = record_lines(table, messages_column, json_column)
                except ValueError as exc:
                    raise OSError(str(exc)) from None
                n = table.num_rows
                base = rows_table({"file": [index] * n, "source": [inp.source] * n, "relative": [inp.relative] * n,
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
        yield rows_table(rows)
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
            yield rows_table(rows)
            return
        if info.type == pafs.FileType.Directory:
            add(0, 0, None, "is a directory")
            yield rows_table(rows)
            return
        if _whole_file_log(inp, input_format):
            with _open(inp) as fh:
                data = fh.read()
            add(None, 0, data) if data.strip() else add(0, 0, None, "empty file: expected a conversation")
            yield rows_table(rows)
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
                        yield rows_table(rows)
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
        yield rows_table(rows)
        return
    except InvalidInputError as exc:  # a truncated or damaged compressed input: the CLI's message
        rows = _new_rows()
        add(0, 0, None, f"{exc} (while reading line {line_no + 1})" if line_no else str(exc))
        yield rows_table(rows)
        return
    if not records:
        add(0, 0, None, EMPTY_FILE)
    if rows["file"]:
        yield rows_table(rows)


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
                schema = ROWS
            tasks.append(ReadTask(read, meta, schema=schema, per_task_row_limit=per_task_row_limit))
        return tasks


def read_jsonl(paths: list[str] | str, *, block_bytes: int = BLOCK_BYTES,
               input_format: str = "auto") -> ray.data.Dataset:
    """The records of JSONL files, directories or URLs as a Dataset (see the module's doc).
    ``input_format``: the CLI's ``--from`` (a Claude Code or Codex log is one record)."""
    inputs = expand_inputs([paths] if isinstance(paths, str) else list(paths))
    return read_inputs(inputs, block_bytes, input_format=input_format)


def read_inputs(inputs: list[InputPath], block_bytes: int = BLOCK_BYTES, messages_column: str = "messages",
          json_column: str = "conversation_json", input_format: str = "auto") -> ray.data.Dataset:
    ctx = ray.data.DataContext.get_current()
    # Ray merges the blocks a task yields up to this size (128 MiB by default): one block, one task,
    # one core for a whole file. Blocks of block_bytes are what spreads a file over the cluster.
    ctx.target_max_block_size = min(ctx.target_max_block_size or block_bytes, max(block_bytes, 2**20 // 16))
    ctx.execution_options.preserve_order = True
    return ray.data.read_datasource(JsonlLines(inputs, block_bytes, messages_column, json_column, input_format),
                                    override_num_blocks=len(inputs),
                                    num_cpus=READ_CPUS)



def write_block(table: pa.Table, root: OutputRoot, json_column: str = "conversation_json") -> pa.Table:
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
    fs, root = resolve(output)
    return ds.map_batches(write_block, batch_format="pyarrow", batch_size=None, zero_copy_batch=True,
                          fn_kwargs={"root": OutputRoot(fs, root, output)}, num_cpus=MAP_CPUS)


def part_files(output: str, relative: str) -> list[str]:
    """The parts written for one input, in order (concatenated: the CLI's output file)."""
    fs, root = resolve(output)
    target = OutputRoot(fs, root, output).dir_for(relative)
    if fs.get_file_info(target).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(target))
    return sorted(i.path for i in infos if i.base_name.startswith("part-"))


def read_parts(output: str, relative: str, decompress: bool = False) -> bytes:
    """The concatenated parts of one input (for tests and small outputs); ``decompress``: the
    decompressed bytes of a compressed input's parts (what the CLI's output decompresses to)."""
    fs, _ = resolve(output)
    data = []
    for p in part_files(output, relative):
        with fs.open_input_stream(p, compression=None) as fh:
            data.append(fh.read())
    codec = codec_of(relative)
    return decompress_bytes(b"".join(data), codec) if decompress and codec else b"".join(data)


def read_parquet_parts(output: str, relative: str) -> pa.Table:
    """The parts of a Parquet input, in order, as one table."""
    import pyarrow.parquet as pq

    fs, _ = resolve(output)
    tables = []
    for p in part_files(output, relative):
        with fs.open_input_file(p) as fh:
            tables.append(pq.read_table(fh))
    return pa.concat_tables(tables)
