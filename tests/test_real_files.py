"""Real files keep their data (issue 16): --in-place never turns a log into another format,
outputs of logs are named for what they are, a directory input never goes to a file name,
streams are opened once, temporary files and journals do not outlive a run. Every test runs
the real CLI in a subprocess (timeouts, so a hang fails instead of hanging CI)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, journals_dir, read_jsonl, tool_conv

FORMATS_DIR = FIXTURES / "formats"
AIRLINE = FIXTURES / "taubench_airline_5.jsonl"


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 120)
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, **kw)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def no_traceback(proc: subprocess.CompletedProcess) -> str:
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    return err


# ---------------------------------------------------------------- 1. --in-place on a log

LOGS = ["claude_code_session.jsonl", "claude_code_tool_heavy.jsonl", "codex_rollout.jsonl",
        "mini_swe_agent.traj.json", "sharegpt.jsonl"]


@pytest.mark.parametrize("command", ["toolcall", "restore"])
@pytest.mark.parametrize("name", LOGS)
def test_in_place_on_a_log_is_refused_and_the_log_is_unchanged(tmp_path, name, command):
    """A log is read lossily; in place, that read destroyed the user's file (exit 0, no word)."""
    log = tmp_path / name
    log.write_bytes((FORMATS_DIR / name).read_bytes())
    before = digest(log)
    proc = xcompact(command, *(["--keep", "0"] if command == "toolcall" else []), str(log), "--in-place")
    err = no_traceback(proc)
    assert proc.returncode == 1, err
    assert digest(log) == before
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and str(log) in lines[0] and "-o" in lines[0] and "convert" in lines[0], err
    assert sorted(os.listdir(tmp_path)) == [name]  # no partial, no lock left


@pytest.mark.parametrize("name", ["swe_agent_text_actions.traj", "swe_agent_function_calling.traj"])
def test_in_place_on_a_traj_is_a_usage_error_before_any_work(tmp_path, name):
    traj = tmp_path / name
    traj.write_bytes((FORMATS_DIR / name).read_bytes())
    before = digest(traj)
    proc = xcompact("toolcall", "--keep", "0", str(traj), "--in-place")
    err = no_traceback(proc)
    assert proc.returncode == 2 and "-o" in err and "convert" in err, err
    assert digest(traj) == before


def test_in_place_with_from_a_log_format_is_a_usage_error(tmp_path):
    log = tmp_path / "s.jsonl"
    log.write_bytes((FORMATS_DIR / "claude_code_session.jsonl").read_bytes())
    proc = xcompact("toolcall", "--from", "claude-code", str(log), "--in-place")
    assert proc.returncode == 2 and "--in-place" in no_traceback(proc)
    assert log.read_bytes() == (FORMATS_DIR / "claude_code_session.jsonl").read_bytes()


def test_in_place_over_a_directory_rewrites_requests_and_refuses_logs(tmp_path):
    """Request formats keep being written back natively in place; a log beside them is kept."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "req.jsonl").write_bytes(orjson.dumps(tool_conv(6)) + b"\n")
    (d / "anthropic.json").write_bytes(orjson.dumps({"system": "s", "messages": [{"role": "user", "content": "hi"}]}))
    (d / "log.jsonl").write_bytes((FORMATS_DIR / "codex_rollout.jsonl").read_bytes())
    log_before = digest(d / "log.jsonl")
    proc = xcompact("toolcall", "--keep", "0", str(d), "--in-place")
    err = no_traceback(proc)
    assert proc.returncode == 1, err
    assert digest(d / "log.jsonl") == log_before
    assert read_jsonl(d / "req.jsonl")[0]["compacted_tool_results"]  # rewritten, as before
    assert "system" in orjson.loads((d / "anthropic.json").read_bytes())  # still Anthropic


@pytest.mark.parametrize("command", ["toolcall", "summarize"])
def test_outputs_of_trajectories_in_a_directory_are_named_json(tmp_path, command):
    """summarize swe-agent/ -o dir/ wrote OpenAI dumps named *.traj."""
    d = tmp_path / "trajs"
    (d / "sub").mkdir(parents=True)
    for name in ("swe_agent_text_actions.traj", "swe_agent_function_calling.traj"):
        (d / "sub" / name).write_bytes((FORMATS_DIR / name).read_bytes())
    out = tmp_path / "out"
    extra = ["--backend", "extractive"] if command == "summarize" else []
    proc = xcompact(command, "-q", str(d), "-o", str(out), *extra)
    assert proc.returncode == 0, no_traceback(proc)
    names = sorted(p.name for p in (out / "sub").iterdir())
    assert names == ["swe_agent_function_calling.json", "swe_agent_text_actions.json"]
    for p in (out / "sub").iterdir():
        assert "messages" in orjson.loads(p.read_bytes())


# ---------------------------------------------------------------- 2. a directory input to a file name

@pytest.mark.parametrize("output", ["one.jsonl", "one.json", "out.txt", "nested/x.ndjson"])
def test_a_directory_input_to_a_file_name_is_a_usage_error(tmp_path, output):
    """It silently created a directory named one.jsonl (exit 0)."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_bytes(AIRLINE.read_bytes())
    proc = xcompact("toolcall", str(d), "-o", str(tmp_path / output))
    err = no_traceback(proc)
    assert proc.returncode == 2 and "directory" in err, err
    assert not (tmp_path / output).exists()


def test_several_inputs_to_a_file_name_or_an_existing_file_are_usage_errors(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(AIRLINE.read_bytes())
    b.write_bytes(AIRLINE.read_bytes())
    proc = xcompact("toolcall", str(a), str(b), "-o", str(tmp_path / "both.jsonl"))
    assert proc.returncode == 2 and not (tmp_path / "both.jsonl").exists(), no_traceback(proc)
    existing = tmp_path / "existing"
    existing.write_bytes(b"keep me")
    proc = xcompact("toolcall", str(a), str(b), "-o", str(existing))
    assert proc.returncode == 2, no_traceback(proc)
    assert existing.read_bytes() == b"keep me"


@pytest.mark.parametrize("output", ["outdir", "out.d/"])
def test_a_directory_is_created_for_a_name_without_a_suffix_or_with_a_slash(tmp_path, output):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_bytes(AIRLINE.read_bytes())
    proc = xcompact("toolcall", "-q", str(d), "-o", str(tmp_path) + "/" + output)
    assert proc.returncode == 0, no_traceback(proc)
    assert (tmp_path / output.rstrip("/") / "a.jsonl").is_file()


# ---------------------------------------------------------------- 3. every input opened once

def _expected(src: Path, *args: str) -> bytes:
    proc = xcompact("toolcall", "-q", "--keep", "0", *args, str(src))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _through_fifo(tmp_path: Path, src: Path, name: str, *args: str, env: dict | None = None) -> tuple:
    """Run with ``src`` fed through a named pipe by a writer that exits once done."""
    fifo = tmp_path / name
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat '{src}' > '{fifo}'"])
    try:
        proc = xcompact(*args, str(fifo), timeout=60, env=env)
    finally:
        if writer.poll() is None:  # the run never opened it: unblock the writer
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)
            writer.kill()
        writer.wait(timeout=10)
    return proc, fifo


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("name", ["p.jsonl", "p.json", "pipe"])
def test_a_fifo_input_with_o_file_is_read_once_whole(tmp_path, name, jobs):
    """The input was fingerprinted for --resume by reading 64 KiB, then opened again: a FIFO
    hung (the writer had gone) or lost records."""
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "XCOMPACT_TEST_PARALLEL_MIN_BYTES": "0"}
    proc, _ = _through_fifo(tmp_path, AIRLINE, name, "toolcall", "-q", "--keep", "0", "-j", jobs, "-o", str(out),
                            env=env)
    assert proc.returncode == 0, no_traceback(proc)
    assert out.read_bytes() == _expected(AIRLINE)


@pytest.mark.parametrize("spelling", ["/dev/stdin", "-", "/proc/self/fd/0"])
def test_piped_stdin_with_o_file_loses_no_record(tmp_path, spelling):
    """cat data.jsonl | xcompact toolcall /dev/stdin -o out.jsonl wrote half the records."""
    big = tmp_path / "big.jsonl"
    big.write_bytes(AIRLINE.read_bytes() * 40)  # over the 64 KiB the fingerprint read
    out = tmp_path / "out.jsonl"
    with open(big, "rb") as src:
        cat = subprocess.Popen(["cat"], stdin=src, stdout=subprocess.PIPE)
        proc = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", "-q", "--keep", "0", spelling,
                               "-o", str(out)], stdin=cat.stdout, capture_output=True, timeout=120)
        cat.stdout.close()
        cat.wait(timeout=10)
    assert proc.returncode == 0, no_traceback(proc)
    assert out.read_bytes() == _expected(big)
    assert len(read_jsonl(out)) == 200


def test_a_process_substitution_with_o_file_loses_no_record(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_bytes(AIRLINE.read_bytes() * 40)
    out = tmp_path / "out.jsonl"
    script = f"{sys.executable} -m compactor_cli toolcall -q --keep 0 <(cat '{big}') -o '{out}'"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 0, no_traceback(proc)
    assert out.read_bytes() == _expected(big)


def test_resume_on_a_fifo_is_refused_clearly(tmp_path):
    proc, _ = _through_fifo(tmp_path, AIRLINE, "p.jsonl", "toolcall", "--keep", "0", "--resume", "-o",
                            str(tmp_path / "o.jsonl"))
    err = no_traceback(proc)
    assert proc.returncode == 2 and "--resume" in err and "stream" in err, err


def test_resume_on_piped_dev_stdin_is_refused_clearly(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "compactor_cli", "toolcall", "/dev/stdin", "--resume", "-o",
                           str(tmp_path / "o.jsonl")], input=AIRLINE.read_bytes(), capture_output=True, timeout=60)
    err = no_traceback(proc)
    assert proc.returncode == 2 and "stream" in err, err


@pytest.mark.parametrize("name", ["claude_code_session.jsonl", "codex_rollout.jsonl"])
def test_a_log_through_a_fifo_is_recognised_as_one_conversation(tmp_path, name):
    """File-level logs were sniffed only on regular files: through a pipe each line failed."""
    src = FORMATS_DIR / name
    expected = xcompact("toolcall", "-q", "--keep", "0", str(src)).stdout
    proc, _ = _through_fifo(tmp_path, src, "p.jsonl", "toolcall", "-q", "--keep", "0")
    assert proc.returncode == 0, no_traceback(proc)
    assert len(proc.stdout.splitlines()) == 1
    assert orjson.loads(proc.stdout)["messages"] == orjson.loads(expected)["messages"]


def test_a_claude_code_log_whose_first_line_is_over_1_mib_is_recognised(tmp_path):
    lines = (FORMATS_DIR / "claude_code_session.jsonl").read_bytes().splitlines()
    first = orjson.loads(lines[0])
    first["padding"] = "x" * (1 << 21)
    log = tmp_path / "big-first-line.jsonl"
    log.write_bytes(b"\n".join([orjson.dumps(first)] + lines[1:]) + b"\n")
    proc = xcompact("toolcall", "-q", "--keep", "0", str(log))
    assert proc.returncode == 0, no_traceback(proc)
    assert len(proc.stdout.splitlines()) == 1
    assert orjson.loads(proc.stdout)["source"]


def test_an_output_named_like_a_trajectory_is_refused(tmp_path):
    traj = tmp_path / "t.traj"
    traj.write_bytes((FORMATS_DIR / "swe_agent_text_actions.traj").read_bytes())
    proc = xcompact("toolcall", str(traj), "-o", str(tmp_path / "out.traj"))
    assert proc.returncode == 2 and ".json" in no_traceback(proc)
    assert not (tmp_path / "out.traj").exists()
