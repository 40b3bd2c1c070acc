from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch, tmp_path_factory):
    """No test may reach a model server by accident or find a user's tiktoken cache."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("empty-tiktoken-cache")))


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


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
