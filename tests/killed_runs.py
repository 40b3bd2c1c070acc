"""Killed runs for the --resume tests (on conftest's ``dataset``): a journaled run SIGKILLed a
quarter of the way in, with its output and report in directories of their own, and the ways its
leftovers are tampered with. Shared by test_resume_integrity.py and test_run_leftovers.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from helpers import journals_dir, killed_run

ARGS = ["toolcall", "--keep", "2", "-j", "1", "-q"]


def _partial(directory: Path) -> Path:
    """The one partial file a killed run left in ``directory`` (output and report live in
    different directories, so each holds one)."""
    found = [p for p in directory.iterdir() if p.name.startswith(".") and p.name.endswith("partial")]
    assert len(found) == 1, found
    return found[0]


def _rewrite_line(path: Path, index: int, old: bytes, new: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    assert old in lines[index]
    lines[index] = lines[index].replace(old, new, 1)
    path.write_bytes(b"".join(lines))


def tamper(case: str, src: Path, out_dir: Path, rep_dir: Path) -> None:
    if case == "output-partial-deleted":
        _partial(out_dir).unlink()
    elif case == "output-partial-truncated":
        part = _partial(out_dir)
        os.truncate(part, part.stat().st_size // 2)
    elif case == "report-partial-deleted":
        _partial(rep_dir).unlink()
    elif case == "input-line-appended":
        with open(src, "ab") as fh:
            fh.write(src.read_bytes().splitlines(keepends=True)[0])
    elif case == "input-line-modified":  # same size, in a line the run had already done
        _rewrite_line(src, 0, b"You are a coding agent.", b"You are a CODING agent.")
    elif case == "input-line-prepended":  # every later line moves: a resume at the old offset is mid-line
        data = src.read_bytes()
        src.write_bytes(data.splitlines(keepends=True)[1] + data)
    elif case.startswith("journal-offset-"):
        _edit_offset(src, case)
    elif case == "journal-garbage":
        journals = list(journals_dir().glob("*.json"))
        assert len(journals) == 1
        journals[0].write_bytes(b'{"done": [0, "\x00garbage')
    else:
        raise AssertionError(case)


def _edit_offset(src: Path, case: str) -> None:
    """The journal's input offset edited by hand: naively (its checksum no longer matches), or
    with the checksum made again (a forgery of the checksum that the offset check must catch):
    into the middle of a line, or onto the start of the next line without its line number."""
    import zlib

    import orjson

    (journal,) = list(journals_dir().glob("*.json"))
    state = orjson.loads(journal.read_bytes())
    cur = state["current"]
    assert cur["input_offset"] > 0
    data = src.read_bytes()
    if case == "journal-offset-mid-line" or case == "journal-offset-edited":
        cur["input_offset"] += 7
    elif case == "journal-offset-next-line":
        cur["input_offset"] = data.index(b"\n", cur["input_offset"]) + 1
    else:
        raise AssertionError(case)
    if case != "journal-offset-edited":
        state.pop("crc")
        state["crc"] = zlib.crc32(orjson.dumps(state, option=orjson.OPT_SORT_KEYS))
    journal.write_bytes(orjson.dumps(state))


def killed_run_in_dirs(dataset: Path, tmp_path: Path) -> tuple[Path, Path, Path, list[str]]:
    """A journaled run killed (SIGKILL) after a checkpoint a quarter of the way in. The output
    and the report live in different directories, so each holds one partial file."""
    src = tmp_path / "in.jsonl"
    shutil.copyfile(dataset, src)
    out_dir, rep_dir = tmp_path / "out", tmp_path / "rep"
    out_dir.mkdir()
    rep_dir.mkdir()
    args = [*ARGS, str(src), "-o", str(out_dir / "out.jsonl"), "--report", str(rep_dir / "report.json")]
    killed_run(args, min_offset=src.stat().st_size // 4)
    assert os.listdir(out_dir) != ["out.jsonl"] and not (rep_dir / "report.json").exists()
    return src, out_dir, rep_dir, args
