"""Issue 28: a plug-in that writes to file descriptor 1 itself (os.write(1, ...), a C extension,
a child process inheriting stdout) never corrupts the data xcompact writes to stdout: while
plug-in code runs, fd 1 is fd 2. A real plug-in package on sys.path, the CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from helpers import FIXTURES, read_jsonl

TAU = FIXTURES / "taubench_airline_5.jsonl"

PACKAGE = '''
import asyncio
import os
import subprocess
import sys

from compactor_cli import Answer
from compactor_cli.backends.sections import SECTIONS

os.write(1, b"NOISE fd1 at import\\n")


class Backend:
    name = "fdnoise"

    def __init__(self):
        os.write(1, b"NOISE fd1 in __init__\\n")

    async def summarize(self, request):
        os.write(1, b"NOISE fd1 before an await\\n")
        await asyncio.sleep(0.01)  # suspended: xcompact's own code runs meanwhile
        os.write(1, b"NOISE fd1 after an await\\n")
        subprocess.run([sys.executable, "-c", "print('NOISE from a child process')"], check=True)
        sys.__stdout__.write("NOISE through sys.__stdout__\\n")
        return Answer("\\n\\n".join(f"## {s}\\n- fdnoise {s}" for s in SECTIONS))
'''


def _env(tmp_path: Path) -> dict[str, str]:
    """The environment with a real plug-in package on sys.path (before what was there)."""
    root = tmp_path / "site"
    (root / "fdnoise").mkdir(parents=True)
    (root / "fdnoise" / "__init__.py").write_text(PACKAGE)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}


def test_a_backend_plugin_writing_to_fd_1_does_not_reach_the_data(tmp_path):
    env = _env(tmp_path)
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "compact", str(TAU), "--backend", "fdnoise:Backend",
                          "--token-threshold", "100", "-o", "-", "--report", str(tmp_path / "r.json")],
                         capture_output=True, cwd=tmp_path, env=env, timeout=300)
    assert res.returncode in (0, 1), res.stderr.decode()
    assert b"NOISE" not in res.stdout, res.stdout[:400]
    lines = res.stdout.splitlines()
    assert len(lines) == len(read_jsonl(TAU)) and all(orjson.loads(line) for line in lines)
    err = res.stderr.decode()
    for noise in ("at import", "in __init__", "before an await", "after an await", "from a child process",
                  "through sys.__stdout__"):
        assert noise in err, (noise, err[-2000:])
    items = orjson.loads((tmp_path / "r.json").read_bytes())["items"]
    assert not [i for i in items if i["status"] in ("INVALID_INPUT", "SUMMARIZE_FAILED")], items


def test_stdout_is_fd_1_again_after_the_plugin_ran(tmp_path):
    """The redirection ends with the plug-in's code: the run's own lines on stdout arrive whole
    and in order (one per record), none of them on stderr."""
    env = _env(tmp_path)
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "compact", str(TAU), "--backend", "fdnoise:Backend",
                          "--token-threshold", "100", "-q"], capture_output=True, cwd=tmp_path, env=env, timeout=300)
    assert res.returncode in (0, 1), res.stderr.decode()
    assert b'{"messages"' not in res.stderr and b'"role"' not in res.stderr
    assert [orjson.loads(line).get("messages") is not None for line in res.stdout.splitlines()] == \
        [True] * len(read_jsonl(TAU))


STRATEGY = '''
import asyncio
import os
import subprocess
import sys

from compactor_cli.tiers.strategy import CompactionResult


class Keep2:
    def __init__(self):
        os.write(1, b"NOISE fd1 in the strategy's __init__\\n")

    def should_compact(self, request):
        os.write(1, b"NOISE fd1 in should_compact\\n")
        return True

    async def compact(self, request):
        os.write(1, b"NOISE fd1 before the strategy's await\\n")
        await asyncio.sleep(0.01)
        subprocess.run([sys.executable, "-c", "print('NOISE from the strategy\\'s child')"], check=True)
        return CompactionResult(messages=request.messages[-2:], summary="kept the last two")
'''


def test_a_strategy_plugin_writing_to_fd_1_does_not_reach_the_data(tmp_path):
    """A --strategy's constructor, should_compact and compact (sync and async) write to fd 1:
    it all reaches stderr, and stdout holds one JSON line per record."""
    env = _env(tmp_path)
    (tmp_path / "site" / "keep2.py").write_text(STRATEGY)
    res = subprocess.run([sys.executable, "-m", "compactor_cli", "compact", str(TAU), "--strategy", "keep2:Keep2",
                          "-o", "-"], capture_output=True, cwd=tmp_path, env=env, timeout=300)
    assert res.returncode in (0, 1), res.stderr.decode()
    assert b"NOISE" not in res.stdout, res.stdout[:400]
    assert [orjson.loads(line).get("messages") is not None for line in res.stdout.splitlines()] == \
        [True] * len(read_jsonl(TAU))
    err = res.stderr.decode()
    for noise in ("strategy's __init__", "in should_compact", "before the strategy's await", "strategy's child"):
        assert noise in err, (noise, err[-2000:])
