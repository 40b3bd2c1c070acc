"""Helpers the tests share (import them: ``from helpers import tool_conv``), as black's
tests/util.py; conftest.py holds only the fixtures pytest injects."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def read_jsonl(path: os.PathLike | str) -> list:
    return [orjson.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]


def tool_conv(n_tools: int = 5, size: int = 400, ids: list[str] | None = None) -> dict:
    """A system prompt, then user / assistant call / tool result rounds with big results."""
    messages: list[dict] = [{"role": "system", "content": "You are a helpful agent."}]
    for i in range(n_tools):
        cid = ids[i] if ids else f"call_{i}"
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "read", "arguments": f'{{"n": {i}}}'}}]})
        messages.append({"role": "tool", "tool_call_id": cid, "content": f"result {i} " + "x" * size})
    messages.append({"role": "assistant", "content": "done"})
    return {"messages": messages, "tokens_used": 1234}


def long_conv(rounds: int = 20, size: int = 600) -> dict:
    """A long agent conversation with a user turn per round, for tier 2."""
    messages: list[dict] = [{"role": "system", "content": "You are a coding agent. Work in the repository."}]
    for i in range(rounds):
        messages.append({"role": "user", "content": f"Please look at module_{i}.py and tell me what it does."})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}a", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "src/module_{i}.py"}}'}},
            {"id": f"c{i}b", "type": "function", "function": {"name": "grep", "arguments": f'{{"q": "def f{i}"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}b", "content": f"src/module_{i}.py:3: def f{i}()" + " pad" * 50})
        messages.append({"role": "tool", "tool_call_id": f"c{i}a", "content": f"# module {i}\n" + "code line\n" * (size // 10)})
        messages.append({"role": "assistant", "content": f"Module {i} defines f{i}. I will check the next one."})
    return {"messages": messages, "tokens_used": 99999}


def journals_dir() -> Path:
    """Where runs keep their --resume journals (XDG_CACHE_HOME is a fresh directory per test session)."""
    return Path(os.environ["XDG_CACHE_HOME"]) / "xcompact" / "journals"


def wait_for_checkpoint(proc, min_offset: int = 1) -> None:
    """Until some journal records at least ``min_offset`` input bytes done (fails if the run ends first)."""
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for j in journals_dir().glob("*.json"):
            try:
                state = orjson.loads(j.read_bytes())
            except orjson.JSONDecodeError:
                continue
            if (state.get("current") or {}).get("input_offset", 0) >= min_offset:
                return
        assert proc.poll() is None, "the run ended before its checkpoint"
        time.sleep(0.01)
    raise AssertionError("no checkpoint was written")


def killed_run(argv: list[str], min_offset: int, cwd: os.PathLike | str | None = None) -> None:
    """Run ``xcompact ARGV`` with a checkpoint every 10 ms and SIGKILL it once one records at
    least ``min_offset`` input bytes done: an interrupted run for --resume to continue."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "compactor_cli", *argv], cwd=cwd,
                            env={**os.environ, "XCOMPACT_CHECKPOINT_SECONDS": "0.01"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_checkpoint(proc, min_offset=min_offset)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
