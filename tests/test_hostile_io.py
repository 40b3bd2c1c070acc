"""Hostile paths and inputs: clashing --report paths, special files as outputs, symlinks and
read-only files --in-place, planted temporary names, concurrent runs, killed parents, odd
inputs on stdin, records written exactly. Each test is a regression test for one defect."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, ROOT, read_jsonl, start_run, tool_conv

from compactor_cli.cli import cli

sys.path.insert(0, str(ROOT / "bench"))
from generate import generate  # noqa: E402

AIRLINE = FIXTURES / "taubench_airline_5.jsonl"


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 300)
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, **kw)


def popen(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "compactor_cli", *args], **kw)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """Over the 4 MiB below which xcompact stays in one process."""
    path = tmp_path_factory.mktemp("big") / "agents.jsonl"
    generate(str(path), 6)
    return path


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "data.jsonl"
    path.write_bytes(AIRLINE.read_bytes())
    return path


def usage_error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


# ---------------------------------------------------------------- 1. --report clashes

@pytest.mark.parametrize("args", [
    ["validate", "data.jsonl", "--report", "data.jsonl"],
    ["toolcall", "data.jsonl", "--in-place", "--report", "data.jsonl"],
    ["toolcall", "data.jsonl", "--keep", "0", "-o", "y.jsonl", "--report", "y.jsonl"],
    ["validate", "./data.jsonl", "--report", "data.jsonl"],
    ["toolcall", "data.jsonl", "-o", "y.jsonl", "--report", "link-to-data.jsonl"],
    ["toolcall", "data.jsonl", "--keep", "0", "-o", "y.jsonl", "--report", "./y.jsonl"],
], ids=["validate-report-is-input", "in-place-report-is-input", "report-is-output", "dot-slash-input",
        "report-symlink-to-input", "dot-slash-output"])
def test_report_clashing_with_an_input_or_output_is_a_usage_error(runner, data, args):
    """Defect 1: --report naming an input or the output (any spelling) replaced the input or
    ended in a traceback over a corrupt file; now exit 2 before any work, input unchanged."""
    os.symlink("data.jsonl", "link-to-data.jsonl")
    before = data.read_bytes()
    res = runner.invoke(cli, args)
    assert res.exit_code == 2, res.stderr
    assert len(usage_error_lines(res.stderr)) == 1 and "--report" in res.stderr
    assert res.stdout == ""
    assert data.read_bytes() == before
    assert not Path("y.jsonl").exists()
    assert sorted(os.listdir(".")) == ["data.jsonl", "link-to-data.jsonl"]  # no partial left


def test_report_dash_writes_the_report_to_stdout(runner, data):
    """Defect 1: --report - wrote a file named '-'; now the report goes to stdout."""
    res = runner.invoke(cli, ["toolcall", "data.jsonl", "--keep", "0", "-o", "out.jsonl", "--report", "-"])
    assert res.exit_code == 0, res.stderr
    doc = orjson.loads(res.stdout_bytes)
    assert doc["command"] == "toolcall" and doc["totals"]["conversations"] == 5
    assert not Path("-").exists()
    assert len(read_jsonl("out.jsonl")) == 5
    assert "5 conversations" in res.stderr


def test_report_dash_with_data_on_stdout_is_a_usage_error(runner, data):
    """Defect 1: --report - with the data also on stdout; now exit 2, nothing written."""
    res = runner.invoke(cli, ["toolcall", "data.jsonl", "--report", "-"])
    assert res.exit_code == 2
    assert len(usage_error_lines(res.stderr)) == 1 and "stdout" in res.stderr
    assert res.stdout == "" and not Path("-").exists()


def test_report_to_a_directory_is_one_usage_error_line(data):
    """Defect 1: --report DIR ended in a traceback (IsADirectoryError) after all the work."""
    os.mkdir("d")
    proc = xcompact("toolcall", "data.jsonl", "-o", "out.jsonl", "--report", "d")
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert usage_error_lines(err) == ["Error: --report d is a directory; name a file"]
    assert proc.stdout == b"" and not Path("out.jsonl").exists() and os.listdir("d") == []


# ---------------------------------------------------------------- 2. -o to special files

def test_output_to_a_null_device_keeps_the_device(data, tmp_path):
    """Defect 2: -o /dev/null (as root) replaced the device by a regular file. The test uses
    its own node of the same device (1, 3): a failing run must not break the real /dev/null."""
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError as exc:
        pytest.skip(f"cannot create a device node here: {exc}")
    proc = xcompact("toolcall", "data.jsonl", "--keep", "0", "-o", str(null))
    assert stat.S_ISCHR(os.lstat(null).st_mode), "the device was replaced by a regular file"
    assert os.lstat(null).st_rdev == os.makedev(1, 3)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    assert sorted(os.listdir(tmp_path)) == ["data.jsonl", "null"]  # no partial, no lock left


def test_output_to_a_fifo_writes_into_it(data, tmp_path):
    """Defect 2: -o FIFO replaced the FIFO by a regular file and a reader got nothing."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    keep_open = os.open(fifo, os.O_RDWR)  # lets the reader open now and see EOF once we close it
    reader_fd = os.open(fifo, os.O_RDONLY)
    got: list[bytes] = []

    def read_all() -> None:
        with os.fdopen(reader_fd, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    proc = xcompact("toolcall", "data.jsonl", "--keep", "0", "-o", str(fifo), timeout=120)
    os.close(keep_open)
    reader.join(30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    assert proc.returncode == 0, proc.stderr
    expected = xcompact("toolcall", "-q", "data.jsonl", "--keep", "0").stdout
    assert got == [expected]


def private_dev(*args: str) -> list[str]:
    """A command line running xcompact with a private /dev (a tmpfs in its own mount namespace),
    so a run that replaces /dev/stdout by a regular file cannot break the machine's."""
    script = ("mount -t tmpfs tmpfs /dev && ln -s /proc/self/fd /dev/fd && ln -s /proc/self/fd/1 /dev/stdout "
              "&& mknod -m 666 /dev/null c 1 3 && exec \"$@\"")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode().strip()}")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
            sys.executable, "-m", "compactor_cli", *args]


@pytest.mark.parametrize("spelling", ["/dev/stdout", "/proc/self/fd/1", "symlink-to-proc-self-fd-1"])
def test_output_to_dev_stdout_is_stdout(data, spelling):
    """Defect 2: -o /dev/stdout (a pipe here) was replaced by a regular file or failed; now
    it is our stdout: the same bytes as without -o."""
    if spelling.startswith("symlink"):
        os.symlink("/proc/self/fd/1", spelling)
    plain = xcompact("toolcall", "-q", "data.jsonl", "--keep", "0")
    assert plain.returncode == 0 and plain.stdout
    proc = subprocess.run(private_dev("toolcall", "-q", "data.jsonl", "--keep", "0", "-o", spelling),
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert proc.stdout == plain.stdout
    assert sorted(os.listdir(".")) == sorted(["data.jsonl"] + ([spelling] if spelling.startswith("symlink") else []))


def test_output_to_a_process_substitution(data, tmp_path):
    """Defect 2: -o >(cat > file) (a /dev/fd/N pipe) did not reach the reader."""
    sink = tmp_path / "via-cat.jsonl"
    script = (f"{sys.executable} -m compactor_cli toolcall -q data.jsonl --keep 0 "
              f"-o >(cat > {sink}.tmp && mv {sink}.tmp {sink}); rc=$?; wait; exit $rc")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, timeout=120)
    for _ in range(200):  # the file appears whole once cat has seen EOF (bash may not wait for it)
        if sink.exists():
            break
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b"" and proc.stdout == b""
    assert sink.read_bytes() == xcompact("toolcall", "-q", "data.jsonl", "--keep", "0").stdout


# ---------------------------------------------------------------- 3. --in-place on links and read-only files

def test_in_place_through_a_symlink_rewrites_the_target_and_keeps_the_link(runner, data):
    """Defect 3: --in-place on a symlink replaced the link by a regular file."""
    os.symlink("data.jsonl", "link.jsonl")
    res = runner.invoke(cli, ["toolcall", "-q", "link.jsonl", "--in-place", "--keep", "0"])
    assert res.exit_code == 0, res.stderr
    assert os.path.islink("link.jsonl") and os.readlink("link.jsonl") == "data.jsonl"
    assert data.read_bytes() == runner.invoke(cli, ["toolcall", "-q", str(AIRLINE), "--keep", "0"]).stdout_bytes


def test_in_place_on_a_file_without_write_bits_is_refused(runner, data):
    """Defect 3: --in-place rewrote a chmod 0444 file (root ignores permissions); now exit 2."""
    os.chmod(data, 0o444)
    before = data.read_bytes()
    res = runner.invoke(cli, ["toolcall", "data.jsonl", "--in-place", "--keep", "0"])
    assert res.exit_code == 2
    assert len(usage_error_lines(res.stderr)) == 1 and "not writable" in res.stderr
    assert data.read_bytes() == before and stat.S_IMODE(data.stat().st_mode) == 0o444


# ---------------------------------------------------------------- 4. temporary files created exclusively

def test_a_symlink_planted_at_the_old_partial_name_is_not_followed(runner, data, tmp_path):
    """Defect 4: the partial file had a predictable name (.NAME.xcompact-partial) opened
    without O_EXCL: a symlink planted there made the run overwrite the victim it points to."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    os.symlink(victim, tmp_path / ".out.jsonl.xcompact-partial")
    res = runner.invoke(cli, ["toolcall", "-q", "data.jsonl", "--keep", "0", "-o", "out.jsonl"])
    assert victim.read_bytes() == b"precious\n"
    assert res.exit_code == 0, res.stderr
    assert len(read_jsonl("out.jsonl")) == 5


def test_a_250_character_output_name_works(runner, data):
    """Defect 4: the partial name added ~20 characters to the target's name, so a legal long
    output name failed with 'File name too long'."""
    name = "o" * 244 + ".jsonl"
    assert len(name) == 250
    res = runner.invoke(cli, ["toolcall", "-q", "data.jsonl", "--keep", "0", "-o", name])
    assert res.exit_code == 0, res.stderr
    assert res.stderr == ""
    assert len(read_jsonl(name)) == 5


# ---------------------------------------------------------------- 5. two runs on one output

def _wait_until(condition, proc: subprocess.Popen, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        assert proc.poll() is None, f"the run ended before {what}"
        time.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_a_second_run_on_the_same_output_refuses_while_the_first_writes(big, tmp_path):
    """Defect 5: two runs writing one output shared one partial file and interleaved; now the
    second refuses (exit 1) while the first holds the lock, and the output is the first's.
    Run A is stopped (SIGSTOP) while its partial file exists, so the overlap is certain."""
    ref = tmp_path / "ref.jsonl"
    assert xcompact("toolcall", "-q", "-j", "1", str(big), "-o", str(ref)).returncode == 0
    out = tmp_path / "out" / "o.jsonl"
    out.parent.mkdir()
    # at low priority (start_run): on a busy machine, A at this test's priority could write its
    # whole output between two looks for its partial file
    a = start_run(["toolcall", "-q", "-j", "1", str(big), "-o", str(out)], stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    try:
        _wait_until(lambda: any(p.name.startswith(".") and p.name.endswith("partial") for p in out.parent.iterdir()),
                    a, "its partial output existed")
        a.send_signal(signal.SIGSTOP)
        b = xcompact("toolcall", "-q", str(AIRLINE), "-o", str(out))
    finally:
        a.send_signal(signal.SIGCONT)
    _, a_err = a.communicate(timeout=300)
    assert b.returncode == 1
    assert b.stdout == b""
    assert f"another xcompact run is writing {out}".encode() in b.stderr
    assert a.returncode == 0, a_err
    assert out.read_bytes() == ref.read_bytes()
    assert os.listdir(out.parent) == ["o.jsonl"]  # no partial, no lock file left


# ---------------------------------------------------------------- 6. workers die with their parent

def _stat(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, start time) of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0], int(fields[19])


def _children(parent: int) -> dict[int, int]:
    """Live children of ``parent``: pid -> start time (to tell a reused pid apart)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st and st[0] == parent and st[1] != "Z":
                found[int(entry)] = st[2]
    return found


def test_sigkill_of_the_main_process_ends_its_workers(big):
    """Defect 6: after a SIGKILL of the main process, the -j 2 worker processes lived on for
    minutes. The run's stdout is a pipe nobody reads, so it blocks with its pool up."""
    proc = popen("toolcall", str(big), "-j", "2", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    kids: dict[int, int] = {}
    try:
        _wait_until(lambda: len(_children(proc.pid)) >= 2, proc, "its worker processes started")
        kids = _children(proc.pid)
        proc.kill()
        proc.wait(timeout=60)

        def survivors() -> list[int]:
            return [pid for pid, start in kids.items()
                    if (st := _stat(pid)) is not None and st[2] == start and st[1] != "Z"]

        deadline = time.monotonic() + 10
        while survivors() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert survivors() == [], "worker processes outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        for pid, start in kids.items():  # a failing run must not leave them behind
            st = _stat(pid)
            if st is not None and st[2] == start:
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- 7. stdin and stream inputs

def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a run that reads forever fails, not the machine


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer reserves terabytes of address space, past the limit this test sets")
@pytest.mark.parametrize("command", ["toolcall", "validate"])
def test_dev_zero_on_stdin_fails_fast_with_one_line(command):
    """Defect 7: stdin was read whole before parsing: `< /dev/zero` read forever (or until out
    of memory). Now it is refused at its first byte: one 'not JSON' line, exit 1."""
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([sys.executable, "-m", "compactor_cli", command, "-"], stdin=zero,
                              capture_output=True, timeout=20, preexec_fn=_limit_memory)
    assert proc.returncode == 1
    assert proc.stdout == b""
    errors = [line for line in proc.stderr.decode().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not JSON" in errors[0], proc.stderr
    assert b"Traceback" not in proc.stderr


def test_a_bom_before_jsonl_on_stdin(data):
    """Defect 7: a UTF-8 BOM before JSONL on stdin made the whole stream one broken document."""
    expected = xcompact("toolcall", "-q", "--keep", "0", "data.jsonl").stdout
    proc = xcompact("toolcall", "-q", "--keep", "0", "-", input=b"\xef\xbb\xbf" + data.read_bytes())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert proc.stdout == expected


def test_a_bom_before_a_json_file_holding_jsonl(data, tmp_path):
    """Defect 7: a .json file starting with a BOM whose first line is a complete conversation
    followed by more lines (JSONL saved as .json) failed as 'broken JSON'."""
    src = tmp_path / "bom.json"
    src.write_bytes(b"\xef\xbb\xbf" + data.read_bytes())
    proc = xcompact("toolcall", "-q", "--keep", "0", str(src))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert proc.stdout == xcompact("toolcall", "-q", "--keep", "0", "data.jsonl").stdout


@pytest.mark.parametrize("how", ["fifo", "process-substitution"])
def test_a_stream_input_is_read(data, how):
    """Defect 7: a FIFO or <(...) as input was 'no such file'; now it is read as a stream."""
    expected = xcompact("toolcall", "-q", "--keep", "0", "data.jsonl").stdout
    run = f"{sys.executable} -m compactor_cli toolcall -q --keep 0"
    if how == "fifo":
        script = f"mkfifo in.pipe && {{ cat data.jsonl > in.pipe & }}; {run} in.pipe; rc=$?; kill $! 2>/dev/null; exit $rc"
    else:
        script = f"{run} <(cat data.jsonl)"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert proc.stdout == expected


def test_dev_null_as_input_is_an_empty_stream(runner):
    """Defect 7: /dev/null as input was reported as 'no such file'; it is an empty input."""
    res = runner.invoke(cli, ["toolcall", "/dev/null"])
    assert res.exit_code == 1
    assert res.stdout == ""
    assert "error: /dev/null: empty file" in res.stderr and "no such file" not in res.stderr


# ---------------------------------------------------------------- 8. records written exactly
# Inputs are written with Python's json.dumps ('": "' and '", "' separators), as many tools do.

def test_a_big_integer_in_a_rewritten_record_survives_exactly(runner, tmp_path):
    """Defect 8: an integer beyond 64 bits in a record that is rewritten came out as a float
    (1.2345678901234568e+29)."""
    conv = tool_conv(3, 400)
    conv["trace_id"] = 123456789012345678901234567890
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps(conv) + "\n")
    res = runner.invoke(cli, ["toolcall", "--keep", "0", str(src), "--report", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.stderr
    assert b'"trace_id":123456789012345678901234567890' in res.stdout_bytes
    out = json.loads(res.stdout_bytes)
    assert out["trace_id"] == 123456789012345678901234567890
    assert orjson.loads((tmp_path / "r.json").read_bytes())["items"][0]["status"] == "RECLAIMED"


def _long_conv_files(tmp_path: Path) -> dict[str, Path]:
    from helpers import long_conv

    conv = long_conv(6, 300)
    conv["note"] = "café ✓"
    conv["ratio"] = 1.0
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(json.dumps(conv) + "\n" + json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    doc = tmp_path / "c.json"
    doc.write_text(json.dumps(conv, indent=4))
    return {"jsonl": jsonl, "json": doc}


@pytest.mark.parametrize("form", ["jsonl", "json"])
@pytest.mark.parametrize("command, status", [
    (["toolcall", "--keep", "100"], "NOTHING_TO_CONDENSE"),
    (["compact", "--token-threshold", "1000000"], "UNDER_THRESHOLD"),
    (["restore"], None),
    (["summarize", "--backend", "openai", "--base-url", "http://127.0.0.1:9", "--retries", "0", "--keep-recent", "4",
      "--no-cache"], "SUMMARIZE_FAILED"),
], ids=["nothing-to-condense", "under-threshold", "nothing-to-restore", "summarize-failed"])
def test_an_unchanged_record_is_written_byte_for_byte(runner, tmp_path, form, command, status):
    """Defect 8: a record left unchanged was re-serialised (Python's '": "' spacing and a
    4-space indent lost); now it is written exactly as read, JSONL line and .json document alike."""
    src = _long_conv_files(tmp_path)[form]
    report = tmp_path / "r.json"
    res = runner.invoke(cli, [*command, str(src), "--report", str(report)])
    assert res.stdout_bytes == src.read_bytes()
    items = orjson.loads(report.read_bytes())["items"]
    if status:
        assert items[0]["status"] == status
        assert res.exit_code == (1 if status == "SUMMARIZE_FAILED" else 0), res.stderr
    else:
        assert res.exit_code == 0, res.stderr


def test_a_duplicate_key_in_a_record_to_rewrite_is_invalid_and_kept(runner, tmp_path):
    """Defect 8: a record with a repeated key was rewritten with one of the values silently
    dropped; now it is INVALID_INPUT, written unchanged, and validate warns about it."""
    line = json.dumps(tool_conv(3, 400))[:-1] + ', "tokens_used": 7}\n'
    src = tmp_path / "dup.jsonl"
    src.write_text(line + json.dumps(tool_conv(3, 400)) + "\n")
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["toolcall", "--keep", "0", str(src), "--report", str(report)])
    assert res.exit_code == 1
    assert res.stdout_bytes.splitlines(keepends=True)[0] == line.encode()
    assert [i["status"] for i in orjson.loads(report.read_bytes())["items"]] == ["INVALID_INPUT", "RECLAIMED"]
    assert "dup.jsonl:1:" in res.stderr and "tokens_used" in res.stderr
    res = runner.invoke(cli, ["validate", str(src)])
    assert res.stdout == ""
    assert "warning: " in res.stderr and "'tokens_used' appears twice" in res.stderr


def _deep_file(tmp_path: Path) -> Path:
    deep = tool_conv(2, 400)
    value: object = "leaf"
    for _ in range(300):
        value = {"k": value}
    deep["extra"] = value
    src = tmp_path / "deep.jsonl"
    src.write_text("".join(json.dumps(c) + "\n" for c in (tool_conv(2, 400), deep, tool_conv(2, 400))))
    return src


def test_validate_calls_a_record_nested_300_deep_invalid(runner, tmp_path):
    """Defect 8: a record nested deeper than can be written back passed validate as VALID."""
    src = _deep_file(tmp_path)
    report = tmp_path / "r.json"
    res = runner.invoke(cli, ["validate", str(src), "--report", str(report)])
    assert res.exit_code == 1
    assert res.stdout == ""
    assert [i["status"] for i in orjson.loads(report.read_bytes())["items"]] == ["VALID", "INVALID_INPUT", "VALID"]
    assert "deep.jsonl:2:" in res.stderr


def test_toolcall_over_a_record_nested_300_deep_processes_the_others(tmp_path):
    """Defect 8: toolcall on a file holding a record nested 300 levels deep ended in a
    traceback with no output; now that record is written unchanged and the others processed."""
    src = _deep_file(tmp_path)
    out, report = tmp_path / "o.jsonl", tmp_path / "r.json"
    proc = xcompact("toolcall", "--keep", "0", str(src), "-o", str(out), "--report", str(report))
    assert b"Traceback" not in proc.stderr
    assert proc.returncode == 1
    assert [i["status"] for i in orjson.loads(report.read_bytes())["items"]] == ["RECLAIMED", "INVALID_INPUT",
                                                                                 "RECLAIMED"]
    lines_in, lines_out = src.read_bytes().splitlines(), out.read_bytes().splitlines()
    assert lines_out[1] == lines_in[1]
    assert lines_out[0] != lines_in[0] and len(lines_out) == 3
