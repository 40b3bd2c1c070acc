"""--resume trusts nothing it left behind: a killed run's partial files, its input and its
journal are tampered with, and the resumed run must still end exactly like an uninterrupted
run on the (possibly changed) input, saying that it started afresh.

Regression tests for defect 9: the old --resume trusted the journal and the partial files and
ended with exit 0 and missing lines, NUL bytes, an invalid report, mixed conversations or a
traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest
from killed_runs import ARGS, killed_run_in_dirs, tamper

pytestmark = pytest.mark.slow  # a killed 6 MB run per test


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=300, **kw)


CASES = ["output-partial-deleted", "output-partial-truncated", "report-partial-deleted", "input-line-appended",
         "input-line-modified", "input-line-prepended", "journal-garbage", "journal-offset-edited",
         "journal-offset-mid-line", "journal-offset-next-line"]


@pytest.mark.parametrize("case", CASES)
def test_resume_after_tampering_equals_an_uninterrupted_run(dataset, tmp_path, case):
    """Defect 9: --resume trusted its partial files, its input and its journal (old: missing
    lines, NUL bytes, an invalid report, stale or mixed conversations, a traceback, or -- for
    an appended line -- silence about the input having changed)."""
    src, out_dir, rep_dir, args = killed_run_in_dirs(dataset, tmp_path)
    tamper(case, src, out_dir, rep_dir)

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
    src, out_dir, rep_dir, args = killed_run_in_dirs(dataset, tmp_path)
    tamper("report-partial-deleted", src, out_dir, rep_dir)
    done = xcompact(*args, "--resume")
    assert done.returncode == 0, done.stderr
    assert os.listdir(rep_dir) == ["report.json"]
    assert os.listdir(out_dir) == ["out.jsonl"]
