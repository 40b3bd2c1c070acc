"""Helpers the tests share (import them: ``from helpers import tool_conv``), as black's
tests/util.py; the other helper modules hold what a few test modules share (engine_cases,
killed_runs, native_dumps, openai_runs, ray_cluster, strategies, chat_server, browser), and
conftest.py the fixtures pytest injects and the Hypothesis profiles. A test module never imports
another test module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def read_jsonl(path: os.PathLike | str) -> list:
    return [orjson.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]


def fixture_records() -> Iterator[tuple[Path, Any]]:
    """(file, parsed record) of every JSONL line under fixtures/ that is JSON (the bad inputs
    among them skipped): the real runs the fast paths are held to their references on."""
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                yield path, orjson.loads(line)
            except orjson.JSONDecodeError:
                continue


def fixture_message_texts() -> Iterator[str]:
    """The content text of every message of the OpenAI-form records among ``fixture_records``
    (empty for a message without text): the real texts the summariser's patterns are held to
    their plain forms on."""
    from compactor_cli.model.conversation import content_text

    for _, rec in fixture_records():
        for m in (rec.get("messages") if isinstance(rec, dict) else None) or ():
            yield content_text(m.get("content")) if isinstance(m, dict) else ""


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


def journal_states() -> list[dict]:
    """The --resume journals of this test's runs as they stand now (one removed or unreadable
    while it is looked at is left out: runs replace them atomically and delete them at the end)."""
    states = []
    for j in journals_dir().glob("*.json"):
        try:
            state = orjson.loads(j.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if isinstance(state, dict):
            states.append(state)
    return states


def checkpointed_offset(state: dict) -> int:
    """How many input bytes of its current input a journal records done."""
    return (state.get("current") or {}).get("input_offset", 0)


def start_run(argv: list[str], env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    """``xcompact ARGV`` in the background, checkpointing every 10 ms, at the lowest CPU priority
    (nice 19). A test watches its journal and stops it part way; under pytest -n, beside other
    users of the machine, a run at the test's own priority could get from the checkpoint the test
    waited for to its very end between two of the test's looks (6 MB take ~1 s), and the test then
    failed. At nice 19 the watching test runs first whenever the CPUs are busy."""
    env = {**os.environ, "XCOMPACT_CHECKPOINT_SECONDS": "0.01", **(env or {})}
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    return subprocess.Popen([sys.executable, "-m", "compactor_cli", *argv], env=env,
                            preexec_fn=lambda: os.nice(19), **popen)


def wait_for_journal(proc: subprocess.Popen, ready, timeout: float = 300) -> bool:
    """Until some journal's state satisfies ``ready`` (True) or the run has ended (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(ready(state) for state in journal_states()):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    raise AssertionError("the run's journal never got there")


def wait_for_checkpoint(proc: subprocess.Popen, min_offset: int = 1) -> None:
    """Until some journal records at least ``min_offset`` input bytes done (fails if the run ends first)."""
    assert wait_for_journal(proc, lambda state: checkpointed_offset(state) >= min_offset), \
        "the run ended before its checkpoint"


def killed_run(argv: list[str], min_offset: int, cwd: os.PathLike | str | None = None) -> None:
    """Run ``xcompact ARGV`` (start_run) and SIGKILL it once a checkpoint records at least
    ``min_offset`` input bytes done: an interrupted run for --resume to continue."""
    proc = start_run(argv, cwd=cwd)
    try:
        wait_for_checkpoint(proc, min_offset=min_offset)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
