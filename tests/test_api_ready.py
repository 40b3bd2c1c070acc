"""--api-ready SIDECAR (issue 16): compacted Anthropic/Responses/OpenAI requests are written
exactly as their API takes them (no xcompact bookkeeping at the top level), with the
bookkeeping in a sidecar that restore --sidecar and extract --sidecar read, so nothing is lost.
Through the real CLI."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import FIXTURES, long_conv, tool_conv
from native_dumps import ANTHROPIC, RESPONSES

from compactor_cli.engine.apiready import API_KEYS


def xcompact(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor_cli", *args], capture_output=True, timeout=120, **kw)


def _responses_long() -> dict:
    r = copy.deepcopy(RESPONSES)
    for i in range(8):
        r["input"] += [{"role": "user", "content": f"question {i} " + "w" * 300},
                       {"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "answer " + "v" * 300}]}]
    return r


CASES = {
    "anthropic-toolcall": (ANTHROPIC, ["toolcall", "--keep", "0"]),
    "responses-toolcall": (RESPONSES, ["toolcall", "--keep", "0"]),
    "responses-summarize": (_responses_long(), ["summarize", "--backend", "extractive", "--keep-recent", "4"]),
    "openai-compact": (long_conv(rounds=12), ["compact", "--backend", "extractive", "--token-threshold", "3000"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("form", ["jsonl", "json"])
@pytest.mark.parametrize("case", list(CASES))
def test_api_ready_output_has_no_bookkeeping_and_restores_with_its_sidecar(tmp_path, case, form):
    record, command = CASES[case]
    src = tmp_path / f"in.{form}"
    src.write_bytes(orjson.dumps(record) + b"\n")
    out, side = tmp_path / f"out.{form}", tmp_path / "side.jsonl"
    proc = xcompact(*command, "-q", str(src), "-o", str(out), "--api-ready", str(side))
    assert proc.returncode == 0, proc.stderr
    sent = orjson.loads(out.read_bytes())
    assert not set(sent) & set(API_KEYS), sorted(sent)  # as the API takes it
    assert set(sent) <= set(record) | {"instructions"}
    plain = tmp_path / f"plain.{form}"
    assert xcompact(*command, "-q", str(src), "-o", str(plain)).returncode == 0
    assert sent != orjson.loads(src.read_bytes())  # it was compacted
    keys = orjson.loads(side.read_bytes())["keys"]
    assert {**sent, **keys} == orjson.loads(plain.read_bytes())  # nothing lost: output + sidecar = the dump
    back = tmp_path / f"back.{form}"
    proc = xcompact("restore", "-q", str(out), "--sidecar", str(side), "-o", str(back))
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(back.read_bytes()) == record


def test_extract_reads_the_sidecar(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(ANTHROPIC) + b"\n")
    out, side = tmp_path / "out.jsonl", tmp_path / "side.jsonl"
    assert xcompact("toolcall", "-q", "--keep", "0", str(src), "-o", str(out), "--api-ready", str(side)).returncode == 0
    proc = xcompact("extract", "toolu_01", str(out), "--sidecar", str(side))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("error: xxx")


def test_every_record_has_its_sidecar_line_also_failed_ones(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(tool_conv(4, size=300)) + b"\n" for _ in range(3)) + b"{broken\n"
                    + orjson.dumps(tool_conv(2, size=300)) + b"\n")
    out, side = tmp_path / "out.jsonl", tmp_path / "side.jsonl"
    proc = xcompact("toolcall", "-q", "--keep", "0", str(src), "-o", str(out), "--api-ready", str(side))
    assert proc.returncode == 1  # the broken record
    assert len(side.read_bytes().splitlines()) == len(out.read_bytes().splitlines()) == 5
    plain = tmp_path / "plain.jsonl"
    xcompact("toolcall", "-q", "--keep", "0", str(src), "-o", str(plain))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    xcompact("restore", "-q", str(out), "--sidecar", str(side), "-o", str(a))
    xcompact("restore", "-q", str(plain), "-o", str(b))
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "extra", "garbage"])
def test_a_sidecar_that_does_not_match_fails_the_file(tmp_path, damage):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(tool_conv(4, size=300)) + b"\n" for _ in range(3)))
    out, side = tmp_path / "out.jsonl", tmp_path / "side.jsonl"
    assert xcompact("toolcall", "-q", "--keep", "0", str(src), "-o", str(out), "--api-ready", str(side)).returncode == 0
    lines = side.read_bytes().splitlines(keepends=True)
    side.write_bytes(b"".join(lines[:2]) if damage == "truncated" else b"".join(lines + lines[:1])
                     if damage == "extra" else b"".join(lines[:1]) + b"{nope\n" + b"".join(lines[2:]))
    back = tmp_path / "back.jsonl"
    proc = xcompact("restore", str(out), "--sidecar", str(side), "-o", str(back))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err and "sidecar" in err, err
    assert not back.exists()


@pytest.mark.parametrize("args", [["--resume"], ["SECOND"], ["SIDE=OUT"], ["SIDE=IN"], ["SIDE=STDOUT"], ["IN-PLACE"]])
def test_api_ready_usage_errors(tmp_path, args):
    src = tmp_path / "in.jsonl"
    src.write_bytes(orjson.dumps(tool_conv(3)) + b"\n")
    out, side = tmp_path / "out.jsonl", tmp_path / "side.jsonl"
    extra: list[str] = []
    if args == ["SECOND"]:
        (tmp_path / "b.jsonl").write_bytes(src.read_bytes())
        extra, out = [str(tmp_path / "b.jsonl")], tmp_path / "outdir"
    elif args == ["SIDE=OUT"]:
        side = out
    elif args == ["SIDE=IN"]:
        side = src
    elif args == ["SIDE=STDOUT"]:
        side = Path("/dev/stdout")
    elif args != ["IN-PLACE"]:
        extra = args
    where = ["--in-place"] if args == ["IN-PLACE"] else ["-o", str(out)]
    proc = xcompact("toolcall", str(src), *extra, *where, "--api-ready", str(side))
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr, proc.stderr
    why = {"--resume": b"--resume", "SECOND": b"one input", "SIDE=OUT": b"sidecar", "SIDE=IN": b"sidecar",
           "SIDE=STDOUT": b"stdout", "IN-PLACE": b"--in-place"}[args[0]]
    assert why in proc.stderr and b"No such option" not in proc.stderr, proc.stderr
    assert src.read_bytes() == orjson.dumps(tool_conv(3)) + b"\n"


def test_a_claude_code_log_api_ready_keeps_its_earlier_part_in_the_sidecar(tmp_path):
    log = FIXTURES / "formats" / "claude_code_session.jsonl"
    out, side = tmp_path / "out.jsonl", tmp_path / "side.jsonl"
    assert xcompact("toolcall", "-q", "--keep", "0", str(log), "-o", str(out), "--api-ready", str(side)).returncode == 0
    assert "source" not in orjson.loads(out.read_bytes())
    back = xcompact("restore", "-q", str(out), "--sidecar", str(side))
    full = xcompact("toolcall", "-q", "--keep", "100", "--claude-code-history", "full", str(log))
    assert orjson.loads(back.stdout)["messages"] == orjson.loads(full.stdout)["messages"]


@pytest.mark.parametrize("change", ["reordered", "edited", "foreign"])
def test_a_sidecar_is_tied_to_its_records_not_their_positions(tmp_path, change):
    """Issue 28: each sidecar line carries its record's fingerprint; a reordered or edited output,
    or another run's output of the same length, fails with a line naming it — never gets other
    records' originals back."""
    def records(task: str) -> bytes:
        convs = [tool_conv(4, size=300) for _ in range(3)]
        for i, conv in enumerate(convs):  # what the API-ready records differ in: their task
            conv["messages"][0] = {"role": "user", "content": f"{task} {i}"}
        return b"".join(orjson.dumps(c) + b"\n" for c in convs)

    src = tmp_path / "in.jsonl"
    src.write_bytes(records("task"))
    out, side = tmp_path / "out.jsonl", tmp_path / "side.jsonl"
    assert xcompact("toolcall", "-q", "--keep", "0", str(src), "-o", str(out), "--api-ready", str(side)).returncode == 0
    lines = out.read_bytes().splitlines(keepends=True)
    if change == "reordered":
        out.write_bytes(lines[1] + lines[0] + lines[2])
    elif change == "edited":
        out.write_bytes(lines[0] + lines[1].replace(b"task 1", b"task 7") + lines[2])
    else:  # the output of another input, with as many records
        other, other_side = tmp_path / "other.jsonl", tmp_path / "other_side.jsonl"
        src.write_bytes(records("another task"))
        assert xcompact("toolcall", "-q", "--keep", "0", str(src), "-o", str(other),
                        "--api-ready", str(other_side)).returncode == 0
        out.write_bytes(other.read_bytes())
    back = tmp_path / "back.jsonl"
    proc = xcompact("restore", str(out), "--sidecar", str(side), "-o", str(back))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "was written for another record" in err and "Traceback" not in err, err
    assert not back.exists()
