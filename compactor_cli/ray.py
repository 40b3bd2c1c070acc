"""xcompact on Ray Data (``pip install 'xcompact[ray]'``): the public path of engine/ray.py and
its readers and writers (read_jsonl, compact, write_jsonl, run; see engine/ray.py's docstring)."""

from .engine.ray import MAP_CPUS, RunResult, compact, connect, plan, run, run_cli
from .engine.ray_io import (
    BLOCK_BYTES,
    CARRIED,
    EMPTY_FILE,
    READ_CHUNK,
    READ_CPUS,
    REMOTE_READ_CHUNK,
    JsonlLines,
    part_files,
    read_jsonl,
    read_parquet_parts,
    read_parts,
    write_jsonl,
)
from .engine.ray_paths import PARQUET_SUFFIXES, InputPath, OutputRoot, expand_inputs, is_parquet, plan_outputs

__all__ = [
    "BLOCK_BYTES",
    "CARRIED",
    "EMPTY_FILE",
    "MAP_CPUS",
    "PARQUET_SUFFIXES",
    "READ_CHUNK",
    "READ_CPUS",
    "REMOTE_READ_CHUNK",
    "InputPath",
    "JsonlLines",
    "OutputRoot",
    "RunResult",
    "compact",
    "connect",
    "expand_inputs",
    "is_parquet",
    "part_files",
    "plan",
    "plan_outputs",
    "read_jsonl",
    "read_parquet_parts",
    "read_parts",
    "run",
    "run_cli",
    "write_jsonl",
]
