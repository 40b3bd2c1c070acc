"""Which inputs a run reads and where each output and the report go, decided before any work.

Every clash between the paths a user names is a usage error here (exit 2): an output or the
report that is an input, the report that is an output, two inputs written to one output, the
report and the data both on stdout. Names are compared as files (device and inode), so links,
``..`` and ``/dev/stdout`` cannot sneak past."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .compression import plain_name
from .sinks import file_identity, is_special, is_stdout

STDIN = "-"
JSONL_SUFFIXES = (".jsonl", ".ndjson")
INPUT_SUFFIXES = (".json", ".traj") + JSONL_SUFFIXES


def is_input_name(name: str) -> bool:
    """A name a directory search picks up: ``*.json``, ``*.jsonl``... also compressed (``*.jsonl.gz``)."""
    return plain_name(name).lower().endswith(INPUT_SUFFIXES)


def is_jsonl_name(name: str) -> bool:
    """Does the name say JSONL, once a compression suffix is set aside?"""
    return plain_name(name).lower().endswith(JSONL_SUFFIXES)


@dataclass(frozen=True)
class InputFile:
    path: str  # as opened ("-" for stdin)
    relative: str  # name below -o DIR


@dataclass(frozen=True)
class Target:
    """Where one input's output goes: ``None`` path means stdout."""

    input: InputFile
    path: str | None


@dataclass(frozen=True)
class Plan:
    targets: list[Target]
    report_path: str | None  # None: no report; "-": stdout


def expand_inputs(paths: list[str]) -> list[InputFile]:
    """Files as given (also FIFOs and devices); directories become their ``*.json``/``*.jsonl``
    files (also compressed: ``*.jsonl.gz``, ``.zst``, ``.bz2``, ``.xz``), sorted."""
    found: list[InputFile] = []
    for p in paths:
        if p == STDIN:
            found.append(InputFile(STDIN, "stdin.json"))
        elif os.path.isdir(p):
            base = Path(p)
            files = sorted(f for f in base.rglob("*") if f.is_file() and is_input_name(f.name)
                           and not f.name.startswith("."))
            found.extend(InputFile(str(f), str(f.relative_to(base))) for f in files)
        else:
            found.append(InputFile(p, os.path.basename(p)))
    if not found:
        raise UsageError("no input files found (directories are searched for *.json, *.jsonl, *.ndjson and *.traj, "
                         "also compressed: *.jsonl.gz, .zst, .bz2, .xz)")
    return found


def _writable(path: str) -> bool:
    """Can the user rewrite this file? Root passes os.access, so a file with no write bit at all
    (chmod a-w: someone protected it) counts as not writable for root too."""
    if not os.access(path, os.W_OK):
        return False
    return os.geteuid() != 0 or bool(os.stat(path).st_mode & 0o222)


#: What --in-place on a log would do, and what to do instead (a log is read lossily, as an
#: OpenAI dump: written back in place, the log itself would be gone).
LOG_IN_PLACE = ("--in-place would rewrite {what} as an OpenAI dump, and a log is read lossily: the log would "
                "be lost; write the compacted dump elsewhere with -o FILE (or -o DIR), or make a request file "
                "first with xcompact convert")


def _in_place_targets(files: list[InputFile], input_format: str = "auto") -> list[Target]:
    from ..model.format_names import LOG_FORMATS

    if input_format in LOG_FORMATS:
        raise UsageError(LOG_IN_PLACE.format(what=f"each --from {input_format} log"))
    for f in files:
        if f.path == STDIN:
            raise UsageError("--in-place cannot rewrite stdin; use -o FILE")
        if plain_name(f.path).lower().endswith(".traj"):
            raise UsageError(f"{f.path}: " + LOG_IN_PLACE.format(what="this SWE-agent trajectory"))
        if not os.path.exists(f.path):
            continue  # reported as a missing file when its turn comes; the rest still runs
        if is_special(f.path):
            raise UsageError(f"--in-place cannot rewrite {f.path}: it is not a regular file")
        if not _writable(f.path):
            raise UsageError(f"--in-place: {f.path} is not writable; change its permissions or use -o")
    return [Target(f, f.path) for f in files]


def looks_like_file_name(path: str) -> bool:
    """A name with a suffix (``x.jsonl``, ``out.json``, ``a.txt``) names a file, never a
    directory to create; a trailing slash always names a directory."""
    if path.endswith(os.sep):
        return False
    stem, suffix = os.path.splitext(os.path.basename(path))
    return bool(stem and suffix)


def output_name(relative: str) -> str:
    """The name an input's output gets below -o DIR: its own, except that a SWE-agent ``.traj``
    (read as, and written as, an OpenAI dump) becomes ``.json``, so no output claims to be a log.
    A compression suffix stays (``x.traj.gz`` -> ``x.json.gz``): the output is compressed alike."""
    plain = plain_name(relative)
    stem, suffix = os.path.splitext(plain)
    return stem + ".json" + relative[len(plain):] if suffix.lower() == ".traj" else relative


def _output_targets(files: list[InputFile], inputs: list[str], output: str | None) -> list[Target]:
    many = len(files) > 1 or any(os.path.isdir(p) for p in inputs)
    dir_mode = output is not None and not is_special(output) and output != STDIN and (
        many or os.path.isdir(output) or output.endswith(os.sep))
    if dir_mode and many and output is not None and not os.path.isdir(output):
        what = "a directory input needs" if any(os.path.isdir(p) for p in inputs) else f"{len(files)} inputs need"
        if os.path.exists(output):
            raise UsageError(f"-o {output} is a file, but {what} a directory: give -o DIR")
        if looks_like_file_name(output):
            raise UsageError(f"-o {output} looks like a file name, but {what} a directory: give -o DIR "
                             f"(a name without a suffix, or end it with '/' to create {output}/)")
    if not dir_mode:
        if many:
            raise UsageError("several inputs: give -o DIR for the outputs, or --in-place")
        if output is None or is_stdout(output):
            return [Target(files[0], None)]
        if plain_name(output).lower().endswith(".traj") and not is_special(output):
            raise UsageError(f"-o {output}: a .traj name says SWE-agent trajectory, but xcompact writes a log as an "
                             "OpenAI dump; name the output .json (or .jsonl)")
    input_ids = {file_identity(f.path): f.path for f in files if f.path != STDIN and not is_special(f.path)}
    targets: list[Target] = []
    seen: dict[tuple[Any, ...], str] = {}
    for f in files:
        dest = os.path.join(output, output_name(f.relative)) if dir_mode and output is not None else output
        assert dest is not None
        ident = file_identity(dest)
        if ident in input_ids:
            raise UsageError(f"refusing to overwrite input {input_ids[ident]} with the output of {f.path}: "
                             "use --in-place to rewrite inputs")
        if ident in seen and not is_special(dest):
            raise UsageError(f"{seen[ident]} and {f.path} would both be written to {dest}")
        seen[ident] = f.path
        targets.append(Target(f, dest))
    return targets


def _check_report(report_path: str, files: list[InputFile], targets: list[Target], flag: str = "--report") -> None:
    """The report (or the page) goes to a file of its own: not an input, not an output, not a directory."""
    if report_path == STDIN or is_stdout(report_path):
        if any(t.path is None for t in targets):
            raise UsageError(f"{flag} - and the data would both go to stdout: give -o for the data")
        return
    if os.path.isdir(report_path):
        raise UsageError(f"{flag} {report_path} is a directory; name a file")
    if is_special(report_path):
        return  # /dev/null, a FIFO, a terminal: written into, nothing is replaced
    ident = file_identity(report_path)
    for f in files:
        if f.path != STDIN and not is_special(f.path) and file_identity(f.path) == ident:
            raise UsageError(f"{flag} {report_path} is the input {f.path}: choose another path")
    for t in targets:
        if t.path is not None and not is_special(t.path) and file_identity(t.path) == ident:
            raise UsageError(f"{flag} {report_path} is also the output of {t.input.path}: choose another path")


def plan_run(inputs: list[str], output: str | None, in_place: bool, report_path: str | None,
             writes_data: bool = True, input_format: str = "auto", html_path: str | None = None) -> Plan:
    """Decide each input's destination and check the report path against all of them."""
    files = expand_inputs(inputs)
    if in_place and output:
        raise UsageError("--in-place and -o/--output cannot be used together")
    if not writes_data:
        targets = [Target(f, None) for f in files]
    elif in_place:
        targets = _in_place_targets(files, input_format)
    else:
        targets = _output_targets(files, inputs, output)
    if report_path is not None:
        data_on_stdout = writes_data and any(t.path is None for t in targets)
        _check_report(report_path, files, targets if data_on_stdout or writes_data else [])
    if html_path is not None:
        data_on_stdout = writes_data and any(t.path is None for t in targets)
        _check_report(html_path, files, targets if data_on_stdout or writes_data else [], "--html")
        if report_path is not None and ((is_stdout(report_path) and is_stdout(html_path))
                                        or file_identity(report_path) == file_identity(html_path)):
            raise UsageError(f"--report and --html both name {html_path}: give each its own file")
    return Plan(targets, report_path)


def is_regular_input(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
