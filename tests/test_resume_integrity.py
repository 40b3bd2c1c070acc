"""--resume trusts nothing it left behind: a killed run's partial files, its input and its
journal are tampered with, and the resumed run must still end exactly like an uninterrupted
run on the (possibly changed) input, saying that it started afresh.

Regression tests for defect 9: the old --resume trusted the journal and the partial files and
ended with exit 0 and missing lines, NUL bytes, an invalid report, mixed conversations or a
traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import ROOT, journals_dir, killed_run

sys.path.insert(0, str(ROOT / "bench"))
from generate import generate

ARGS = ["toolcall", "--keep", "2", "-j", "1", "-q"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "agents.jsonl"
    generate(str(path), 6)
    return path


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=300, **kw)


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


def _tamper(case: str, src: Path, out_dir: Path, rep_dir: Path) -> None:
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
    elif case == "journal-garbage":
        journals = list(journals_dir().glob("*.json"))
        assert len(journals) == 1
        journals[0].write_bytes(b'{"done": [0, "\x00garbage')
    else:
        raise AssertionError(case)


def _killed_run(dataset: Path, tmp_path: Path) -> tuple[Path, Path, Path, list[str]]:
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


CASES = ["output-partial-deleted", "output-partial-truncated", "report-partial-deleted", "input-line-appended",
         "input-line-modified", "input-line-prepended", "journal-garbage"]


@pytest.mark.parametrize("case", CASES)
def test_resume_after_tampering_equals_an_uninterrupted_run(dataset, tmp_path, case):
    """Defect 9: --resume trusted its partial files, its input and its journal (old: missing
    lines, NUL bytes, an invalid report, stale or mixed conversations, a traceback, or -- for
    an appended line -- silence about the input having changed)."""
    src, out_dir, rep_dir, args = _killed_run(dataset, tmp_path)
    _tamper(case, src, out_dir, rep_dir)

    done = xcompact(*args, "--resume")

    ref_out, ref_report = tmp_path / "ref" / "out.jsonl", tmp_path / "ref" / "report.json"
    ref = xcompact(*ARGS, str(src), "-o", str(ref_out), "--report", str(ref_report))
    assert ref.returncode == 0, ref.stderr
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert (out_dir / "out.jsonl").read_bytes() == ref_out.read_bytes()
    got, want = orjson.loads((rep_dir / "report.json").read_bytes()), orjson.loads(ref_report.read_bytes())
    assert got["items"] == want["items"]
    assert got["totals"] == want["totals"]
    assert b"afresh" in done.stderr and b"Traceback" not in done.stderr
    assert os.listdir(rep_dir) == ["report.json"] or case == "journal-garbage"
    if case not in ("report-partial-deleted", "journal-garbage"):  # see the xfail test below; an unreadable
        assert os.listdir(out_dir) == ["out.jsonl"]  # journal cannot name the partials it left


def test_resume_that_restarts_for_a_missing_report_partial_leaves_no_stale_partial(dataset, tmp_path):
    """Defect 9 (found while testing it): the journal names the output's partial file, so a
    run that starts afresh can remove it; the output directory must hold only the output."""
    src, out_dir, rep_dir, args = _killed_run(dataset, tmp_path)
    _tamper("report-partial-deleted", src, out_dir, rep_dir)
    done = xcompact(*args, "--resume")
    assert done.returncode == 0, done.stderr
    assert os.listdir(rep_dir) == ["report.json"]
    assert os.listdir(out_dir) == ["out.jsonl"]
