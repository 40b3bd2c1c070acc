"""Dataset scale: worker processes, resuming a killed run, configuration, progress."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, journal_states, start_run, wait_for_checkpoint, wait_for_journal

from compactor_cli.cli import cli


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=300, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("command", [["toolcall", "--keep", "3"],
                                     ["compact", "--token-threshold", "20000", "--backend", "extractive"]])
def test_output_and_report_are_the_same_for_any_jobs(dataset, tmp_path, command):
    outs = []
    for jobs in ("1", "2"):
        out, report = tmp_path / f"o{jobs}.jsonl", tmp_path / f"r{jobs}.json"
        proc = xcompact(*command, str(dataset), "-o", str(out), "--report", str(report), "-j", jobs, "-q")
        assert proc.returncode == 0, proc.stderr
        doc = orjson.loads(report.read_bytes())
        outs.append((out.read_bytes(), doc["items"], doc["totals"]))
    assert outs[0] == outs[1]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_run_leaves_no_output_and_resume_finishes_it_identically(dataset, tmp_path, sig):
    ref, ref_report = tmp_path / "ref" / "out.jsonl", tmp_path / "ref" / "report.json"
    assert xcompact("toolcall", "--keep", "2", "-j", "1", "-q", str(dataset), "-o", str(ref),
                    "--report", str(ref_report)).returncode == 0
    work = tmp_path / "work"
    work.mkdir()
    out, report = work / "out.jsonl", work / "report.json"
    args = ["toolcall", "--keep", "2", "-j", "1", "-q", str(dataset), "-o", str(out), "--report", str(report)]
    proc = start_run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_checkpoint(proc, min_offset=dataset.stat().st_size // 4)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (-9 if sig == signal.SIGKILL else 130)
    if sig == signal.SIGINT:
        assert b"--resume" in err
    assert not out.exists() and not report.exists()  # nothing half-written where outputs go
    assert [p.name for p in work.glob(".xcompact-*.partial")]  # the partial output waits for --resume
    done = xcompact(*args, "--resume")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == ref.read_bytes()
    assert orjson.loads(report.read_bytes()) == orjson.loads(ref_report.read_bytes())
    assert sorted(p.name for p in work.iterdir()) == ["out.jsonl", "report.json"]  # no partials, no journal
    again = xcompact(*[a for a in args if a != "-q"], "--resume")  # resuming a finished run does nothing
    assert again.returncode == 0 and b"nothing to resume" in again.stderr
    assert out.read_bytes() == ref.read_bytes()


def test_resume_without_a_journal_runs_everything(tmp_path):
    out = tmp_path / "o.jsonl"
    proc = xcompact("toolcall", "-q", "--resume", str(FIXTURES / "taubench_airline_5.jsonl"), "-o", str(out))
    assert proc.returncode == 0 and len(out.read_bytes().splitlines()) == 5


def test_resume_to_stdout_is_a_usage_error(runner):
    res = runner.invoke(cli, ["toolcall", "--resume", str(FIXTURES / "airline_list.json")])
    assert res.exit_code == 2 and "--resume needs outputs in files" in res.stderr


# ---- configuration

def _params(report: Path) -> dict:
    return orjson.loads(report.read_bytes())["parameters"]


def test_pyproject_pins_options_and_flags_win(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.xcompact]\nkeep = 2\nencoding = "cl100k_base"\n'
                                             '[tool.xcompact.compact]\ntoken-threshold = 1234\n')
    src = str(FIXTURES / "taubench_airline_5.jsonl")
    runner.invoke(cli, ["toolcall", "-q", src, "--report", "r.json"])
    assert _params(tmp_path / "r.json")["keep"] == 2
    assert _params(tmp_path / "r.json")["config"] == str(tmp_path / "pyproject.toml")
    runner.invoke(cli, ["toolcall", "-q", src, "--keep", "5", "--report", "r.json"])
    assert _params(tmp_path / "r.json")["keep"] == 5
    runner.invoke(cli, ["compact", "--check", "-q", src, "--report", "r.json"])
    assert _params(tmp_path / "r.json")["token_threshold"] == 1234 and _params(tmp_path / "r.json")["keep"] == 2


def test_config_file_and_unknown_keys(runner, tmp_path):
    cfg = tmp_path / "x.toml"
    cfg.write_text("[compact]\nmessage-threshold = 10\nbackend = 'extractive'\n")
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["compact", "--config", str(cfg), "--dry-run", "-q", str(FIXTURES / "swe_agent_3.jsonl"),
                              "--report", str(report)])
    assert res.exit_code == 0, res.stderr
    assert _params(report)["message_threshold"] == 10
    cfg.write_text("[compact]\nkeep_forever = 1\n")
    res = runner.invoke(cli, ["compact", "--config", str(cfg), str(FIXTURES / "swe_agent_3.jsonl")])
    assert res.exit_code == 2 and "has no option 'keep_forever'" in res.stderr
    cfg.write_text("nonsense = 1\n")
    res = runner.invoke(cli, ["toolcall", "--config", str(cfg), str(FIXTURES / "swe_agent_3.jsonl")])
    assert res.exit_code == 2 and "unknown option 'nonsense'" in res.stderr


# ---- progress

@pytest.mark.slow
def test_progress_only_on_a_terminal(dataset, tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    proc = xcompact("toolcall", str(dataset), "-o", str(tmp_path / "a.jsonl"))
    assert b"B/s" not in proc.stderr and b"%|" not in proc.stderr  # not a terminal: summary only
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal has a size
    p = subprocess.Popen([sys.executable, "-m", "compactor_cli", "toolcall", "-j", "1", str(dataset), "-o",
                          str(tmp_path / "b.jsonl")], stderr=follower, stdout=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    p.wait(timeout=120)
    os.close(leader)
    assert p.returncode == 0
    assert b"agents.jsonl" in seen and b"B/s" in seen


@pytest.mark.slow
def test_repeated_kills_in_place_over_many_files_then_resume(dataset, tmp_path):
    """--in-place with a command that is not idempotent (a second summary round would change
    the bytes): killed again and again at arbitrary moments, resumed each time, the result must
    still be exactly one uninterrupted run's."""
    import random
    import shutil

    lines = dataset.read_bytes().splitlines(keepends=True)
    work, ref = tmp_path / "work", tmp_path / "ref"
    work.mkdir()
    for i in range(0, len(lines), 2):
        (work / f"part{i:03}.jsonl").write_bytes(b"".join(lines[i:i + 2]))
    shutil.copytree(work, ref)
    args = ["summarize", "--backend", "extractive", "--keep-recent", "8", "-j", "1", "-q", "--in-place"]
    assert xcompact(*args, str(ref), "--report", str(tmp_path / "ref.json")).returncode == 0
    rng = random.Random(5)
    done = 0
    for attempt in range(5):
        proc = start_run([*args, str(work), "--report", str(tmp_path / "work.json"),
                          *(["--resume"] if attempt else [])])
        # killed a moment after this attempt has finished one more file (its journal says so), not
        # after a fixed time: on a busy machine that came before the run had done anything
        if not wait_for_journal(proc, lambda state, before=done: len(state["done"]) > before):
            break  # it finished
        time.sleep(rng.uniform(0, 0.1))
        proc.kill()
        proc.wait(timeout=60)
        done = max((len(state["done"]) for state in journal_states()), default=done)
    done = xcompact(*args, str(work), "--report", str(tmp_path / "work.json"), "--resume")
    assert done.returncode == 0, done.stderr
    for f in sorted(ref.iterdir()):
        assert (work / f.name).read_bytes() == f.read_bytes(), f.name
    assert sorted(p.name for p in work.iterdir()) == sorted(p.name for p in ref.iterdir())  # no partials
    assert orjson.loads((tmp_path / "work.json").read_bytes())["totals"] == \
        orjson.loads((tmp_path / "ref.json").read_bytes())["totals"]


def test_an_unwritable_cache_costs_resume_not_the_run(tmp_path):
    (tmp_path / "cache").write_text("a file where the cache directory should be")
    out = tmp_path / "o.jsonl"
    proc = xcompact("toolcall", str(FIXTURES / "taubench_airline_5.jsonl"), "-o", str(out),
                    env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert proc.returncode == 0 and b"cannot be resumed" in proc.stderr
    assert len(out.read_bytes().splitlines()) == 5
