"""Where --engine ray reads and writes: inputs (local paths or object-store URLs, a directory
expanded to its files with their relative names) and the output root, checked before any work
(two inputs on one output, a file where a directory of parts goes, parts of an earlier run)."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import UsageError
from ..files.targets import is_input_name, is_jsonl_name

PARQUET_SUFFIXES = (".parquet",)


def is_parquet(name: str) -> bool:
    return name.lower().endswith(PARQUET_SUFFIXES)



@dataclass(frozen=True)
class InputPath:
    """One input file: its filesystem and path there, the name the report uses, the name below -o."""

    fs: Any
    path: str
    source: str
    relative: str


def resolve(uri: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path on it) for a local path or a URL."""
    if "://" in uri:
        try:
            return pafs.FileSystem.from_uri(uri)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise UsageError(f"cannot use {uri}: {exc}") from None
    return pafs.LocalFileSystem(), os.path.abspath(uri)


def is_url(path: str) -> bool:
    return "://" in path


def join_path(base: str, relative: str) -> str:
    return base.rstrip("/") + "/" + relative if is_url(base) else os.path.join(base, relative)


def expand_inputs(inputs: list[str]) -> list[InputPath]:
    """Files as given; directories (local or URL prefixes) become their JSONL (and Parquet) files,
    sorted, as the CLI finds them. A JSON document (``.json``) is refused: the reader streams JSONL."""
    found: list[InputPath] = []
    documents: list[str] = []
    for given in inputs:
        if given == "-":
            raise UsageError("--engine ray cannot read stdin: give files, directories or URLs")
        fs, path = resolve(given)
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
            names = []
            for f in infos:
                rel = posixpath.relpath(f.path, path) if is_url(given) else os.path.relpath(f.path, path)
                base = rel.rsplit("/", 1)[-1]
                if f.type != pafs.FileType.File or base.startswith("."):
                    continue
                if is_jsonl_name(base) or is_parquet(base):
                    names.append((rel, f.path))
                elif is_input_name(base):
                    documents.append(join_path(given, rel))
            for rel, fpath in sorted(names):
                source = join_path(given, rel) if is_url(given) else str(Path(given) / rel)
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
        return join_path(self.path, relative) if not is_url(self.given) else self.path.rstrip("/") + "/" + relative


def plan_outputs(inputs: list[InputPath], output: str) -> OutputRoot:
    """The output root, checked before any work: each input's part directory is new or empty,
    no two inputs share one, none is an input."""
    fs, root = resolve(output)
    out = OutputRoot(fs, root, output)
    if is_url(output) and fs.get_file_info(root.split("/")[0]).type == pafs.FileType.NotFound:
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
            raise UsageError(f"{seen[target]} and {i.source} would both be written to {join_path(output, i.relative)}")
        seen[target] = i.source
        if (type(fs).__name__, target) in input_paths:
            raise UsageError(f"refusing to write over input {i.source}: choose another -o")
        tinfo = fs.get_file_info(target)
        if tinfo.type == pafs.FileType.File:
            raise UsageError(f"{join_path(output, i.relative)} is a file: --engine ray writes a directory of parts "
                             "there; choose another -o")
        if tinfo.type == pafs.FileType.Directory and fs.get_file_info(pafs.FileSelector(target, recursive=True)):
            raise UsageError(f"{join_path(output, i.relative)} already holds files (an earlier run?): parts of two "
                             "runs would mix; remove it or choose another -o")
    return out
