"""What a run leaves behind (issue 16): temporary files are removed on every failure that is
not a resumable interruption, an interruption keeps what --resume needs and says so, finished
runs leave no journal, a damaged journal's partials are removed, and only the run holding the
journal's lock may touch it. All through the real CLI in subprocesses, with timeouts."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, journals_dir, start_run, tool_conv, wait_for_checkpoint
from killed_runs import ARGS, killed_run_in_dirs, tamper

AIRLINE = FIXTURES / "taubench_airline_5.jsonl"


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 300)
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, **kw)


def _file_size_limit(limit: int):
    def preexec() -> None:  # ulimit -f: writes past ``limit`` bytes fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


def _leftovers(*dirs: Path) -> list[str]:
    return [p.name for d in dirs for p in d.iterdir() if p.name.startswith(".xcompact-")]


def _many_records(tmp_path: Path, n: int = 400) -> Path:
    src = tmp_path / "in" / "many.jsonl"
    src.parent.mkdir()
    src.write_bytes(b"".join(orjson.dumps(tool_conv(4, size=300)) + b"\n" for _ in range(n)))
    return src


@pytest.mark.parametrize("which", ["report", "output"])
def test_a_write_that_fails_on_a_file_size_limit_leaves_no_temporary_file(tmp_path, which):
    """A full disk or ulimit -f under the report left both .xcompact-*.partial files."""
    src = _many_records(tmp_path)
    out_dir, rep_dir = tmp_path / "out", tmp_path / "rep"
    out_dir.mkdir()
    rep_dir.mkdir()
    size = src.stat().st_size
    # the report of 400 records is ~150 KiB; the output is about the input's size
    limit = 64 * 1024 if which == "report" else size // 3
    out = out_dir / "out.jsonl" if which == "output" else Path("/dev/null")
    proc = xcompact("toolcall", "-q", "--no-tokens", "--keep", "0", "-j", "1", str(src), "-o", str(out),
                    "--report", str(rep_dir / "report.json"), preexec_fn=_file_size_limit(limit))
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 1, err
    assert "File too large" in err and err.count("\n") <= 3, err
    assert _leftovers(out_dir, rep_dir) == [], err
    assert not list(journals_dir().glob("*.json")), "a failed run that cannot be resumed left its journal"


def test_finished_is_the_last_attempt_s_not_an_earlier_one_s(tmp_path):
    """Issue 28: a run finished, a second attempt of it failed (an output over the file-size
    limit); --resume then said "nothing to resume: this run already finished" and left the failed
    attempt's state. Now every attempt that runs takes the run off the finished list first."""
    src = _many_records(tmp_path, n=200)
    out = tmp_path / "out.jsonl"
    args = ["toolcall", "--no-tokens", "--keep", "0", "-j", "1", str(src), "-o", str(out)]
    assert xcompact(*args, "-q").returncode == 0
    finished = out.read_bytes()
    out.unlink()
    failed = xcompact(*args, "-q", preexec_fn=_file_size_limit(src.stat().st_size // 4))
    assert failed.returncode == 1 and b"File too large" in failed.stderr and not out.exists()
    again = xcompact(*args, "--resume")
    err = again.stderr.decode()
    assert again.returncode == 0 and "already finished" not in err, err
    assert out.read_bytes() == finished


def test_a_file_size_limit_hit_while_loading_the_tokenizer_is_one_error_line(tmp_path):
    """With token counting, the tokenizer's cache write under ulimit -f was a traceback."""
    src = _many_records(tmp_path, n=3)
    proc = xcompact("toolcall", "-q", str(src), "-o", str(tmp_path / "o.jsonl"), preexec_fn=_file_size_limit(4096))
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode in (0, 1) and err.count("\n") <= 2, err
    assert _leftovers(tmp_path, src.parent) == []


@pytest.mark.slow
def test_finished_runs_leave_no_journal_and_the_cache_does_not_grow(tmp_path):
    """Every finished run left its journal in ~/.cache/xcompact/journals forever."""
    for i in range(6):
        proc = xcompact("toolcall", "-q", str(AIRLINE), "-o", str(tmp_path / f"o{i}.jsonl"))
        assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in journals_dir().iterdir()) if journals_dir().exists() else []
    assert [n for n in names if n.endswith(".json")] == []
    assert names in ([], ["finished"])
    # resuming a finished run still does nothing (its key is remembered, boundedly)
    again = xcompact("toolcall", str(AIRLINE), "-o", str(tmp_path / "o0.jsonl"), "--resume")
    assert again.returncode == 0 and b"nothing to resume" in again.stderr


@pytest.mark.slow
def test_a_damaged_journal_s_partials_are_removed(dataset, tmp_path):
    """After a garbage journal the killed run's partials stayed beside the output and report."""
    src, out_dir, rep_dir, args = killed_run_in_dirs(dataset, tmp_path)
    tamper("journal-garbage", src, out_dir, rep_dir)
    done = xcompact(*args, "--resume")
    assert done.returncode == 0, done.stderr
    assert os.listdir(out_dir) == ["out.jsonl"]
    assert os.listdir(rep_dir) == ["report.json"]


@pytest.mark.slow
def test_a_fresh_run_after_a_killed_one_removes_its_partials(dataset, tmp_path):
    src, out_dir, rep_dir, args = killed_run_in_dirs(dataset, tmp_path)
    done = xcompact(*args)  # without --resume: starts afresh
    assert done.returncode == 0, done.stderr
    assert os.listdir(out_dir) == ["out.jsonl"]
    assert os.listdir(rep_dir) == ["report.json"]


def _one_input_one_output(dataset, tmp_path):
    """A copy of the dataset, an output in a directory of its own, and the run's arguments."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(dataset.read_bytes())
    out = tmp_path / "out" / "out.jsonl"
    out.parent.mkdir()
    return src, out, [*ARGS, str(src), "-o", str(out)]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interruption_says_resume_and_keeps_what_resume_needs(dataset, tmp_path, sig):
    src, out, args = _one_input_one_output(dataset, tmp_path)
    proc = start_run(args, stderr=subprocess.PIPE)
    try:
        wait_for_checkpoint(proc, min_offset=src.stat().st_size // 4)
    finally:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"--resume" in err and b"Traceback" not in err
    assert len(_leftovers(out.parent)) == 1 and len(list(journals_dir().glob("*.json"))) == 1
    done = xcompact(*args, "--resume")
    ref = xcompact(*ARGS, str(src))
    assert done.returncode == 0 and out.read_bytes() == ref.stdout
    assert os.listdir(out.parent) == ["out.jsonl"] and not list(journals_dir().glob("*.json"))


@pytest.mark.slow
def test_a_run_refused_by_the_output_lock_does_not_finish_the_journal(dataset, tmp_path):
    """A second run refused by the lock marked the journal complete: a later --resume said
    "nothing to resume", exited 0, and the output was never written."""
    src, out, args = _one_input_one_output(dataset, tmp_path)
    a = start_run(args)
    try:
        wait_for_checkpoint(a, min_offset=src.stat().st_size // 4)
        a.send_signal(signal.SIGSTOP)
        b = xcompact(*args)  # the same command: refused by the lock the stopped run holds
    finally:
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=60)
    assert b.returncode == 1 and b"another xcompact run" in b.stderr, b.stderr
    done = xcompact(*args, "--resume")
    assert done.returncode == 0, done.stderr
    assert b"nothing to resume" not in done.stderr
    assert out.read_bytes() == xcompact(*ARGS, str(src)).stdout


@pytest.mark.slow
def test_a_fifo_planted_at_the_partial_path_does_not_hang_resume(dataset, tmp_path):
    src, out_dir, rep_dir, args = killed_run_in_dirs(dataset, tmp_path)
    part = next(p for p in out_dir.iterdir() if p.name.endswith(".partial"))
    part.unlink()
    os.mkfifo(part)
    done = xcompact(*args, "--resume", timeout=120)
    assert done.returncode == 0, done.stderr
    assert b"afresh" in done.stderr and b"Traceback" not in done.stderr
    ref = xcompact(*ARGS, str(src))
    assert (out_dir / "out.jsonl").read_bytes() == ref.stdout


# ---------------------------------------------------------------- inputs that change under a run

def _mutate(case: str, src: Path, original: bytes) -> None:
    if case == "appended":
        with open(src, "ab") as fh:
            fh.write(original.splitlines(keepends=True)[0])
    elif case == "truncated":
        os.truncate(src, len(original) // 2)
    elif case == "mv-replaced":
        other = src.with_name("other.jsonl")
        other.write_bytes(original.replace(b"coding agent", b"CODING AGENT"))
        os.replace(other, src)
    else:
        raise AssertionError(case)


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("in_place", [False, True], ids=["o-file", "in-place"])
@pytest.mark.parametrize("case", ["appended", "truncated", "mv-replaced"])
def test_an_input_that_changes_under_a_run_stops_that_file(dataset, tmp_path, case, in_place, jobs):
    """Under -j 2 an input replaced by mv, appended to or truncated gave a silent mix of
    versions and records cut at stale range ends; now that file fails, nothing is written
    (in place: the changed input is left as it is), no temporary file stays."""
    src = tmp_path / "in" / "in.jsonl"
    src.parent.mkdir()
    original = dataset.read_bytes()
    src.write_bytes(original)
    out = tmp_path / "out" / "out.jsonl"
    out.parent.mkdir()
    target = ["--in-place"] if in_place else ["-o", str(out)]
    proc = start_run(["toolcall", "--keep", "2", "-j", jobs, "-q", str(src), *target], stderr=subprocess.PIPE,
                     env={"XCOMPACT_TEST_PARALLEL_MIN_BYTES": "0", "XCOMPACT_TEST_CHUNK_BYTES": "65536"})
    try:
        wait_for_checkpoint(proc, min_offset=1)
        proc.send_signal(signal.SIGSTOP)
        after = None
        _mutate(case, src, original)
        after = src.read_bytes()
    finally:
        proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=300)
    assert b"Traceback" not in err, err
    assert proc.returncode == 1, err
    assert b"changed while it was being read" in err, err
    assert src.read_bytes() == after  # in place: never renamed over the changed input
    assert not out.exists()
    assert _leftovers(out.parent, src.parent) == []


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.slow
def test_a_worker_killed_under_a_parallel_run_is_one_error_line_and_no_partial(tmp_path):
    """Issue 28: a -j 2 worker killed (the out-of-memory killer's SIGKILL) ended the run with a
    BrokenProcessPool traceback. Now: exit 1, one line saying what happened and what to do, no
    output and no temporary file left."""
    src = _many_records(tmp_path, n=16000)  # ~20 MB: long enough to kill a worker mid-run
    out_dir = tmp_path / "out"
    proc = start_run(["toolcall", "-j", "2", str(src), "-o", str(out_dir / "out.jsonl")],
                     stderr=subprocess.PIPE)
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while not workers and proc.poll() is None and time.monotonic() < deadline:
        workers = _children(proc.pid)
        time.sleep(0.01)
    if not workers:
        proc.wait()
        pytest.skip("the run ended before its workers could be seen")
    time.sleep(0.05)
    try:
        os.kill(workers[0], signal.SIGKILL)
    except ProcessLookupError:  # that worker had already ended (the run is fast): nothing was killed
        proc.wait()
        pytest.skip("the worker ended before the kill reached it")
    _, err_bytes = proc.communicate(timeout=300)
    err = err_bytes.decode()
    if proc.returncode == 0:
        pytest.skip("the run finished before the kill reached a worker")
    assert proc.returncode == 1 and "Traceback" not in err and "Usage:" not in err, err
    assert "a worker process died" in err and "-j 1" in err
    assert not (out_dir / "out.jsonl").exists() and _leftovers(out_dir, src.parent) == []
