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

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import ray
import ray.data

from ..commands.settings import Settings
from ..errors import UsageError
from ..files.records import Record
from .batch import COMMANDS, configure, output_of, processor_for
from .ray_io import (  # the readers and writers, re-exported with the run (compactor_cli/ray.py)
    BLOCK_BYTES,
    MAP_CPUS,
    JsonlLines,
    part_files,
    read_inputs,
    read_jsonl,
    read_parquet_parts,
    read_parts,
    write_block,
    write_jsonl,
)
from .ray_paths import InputPath, OutputRoot, expand_inputs, is_url, plan_outputs, resolve
from .run import Console, start_report


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
    if report_path and report_path != "-" and not is_url(report_path) and os.path.isdir(report_path):
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
    if report_path and report_path != "-" and is_url(report_path):
        report_fs, report_target = resolve(report_path)
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
        ds = compact(read_inputs(files, block_bytes, messages_column, json_column,
                           getattr(settings, "input_format", "auto")), settings)
        if root is not None:
            ds = ds.map_batches(write_block, batch_format="pyarrow", batch_size=None, zero_copy_batch=True,
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
    if html is not None and (is_url(html) or os.path.isdir(html)):
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
