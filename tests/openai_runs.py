"""Running summarize against the loopback chat server (tests/chat_server.py): the conversations
it is given, the run itself, and one backend call outside a run. Shared by test_openai_backend.py,
test_answers.py, test_secrets.py and test_salvage.py."""

from __future__ import annotations

import asyncio

import orjson
from helpers import long_conv

from compactor_cli.backends import SummaryRequest
from compactor_cli.backends.openai_backend import OpenAIBackend
from compactor_cli.cli import cli

SECRET = "sk-test-SECRET-0123456789abcdef"


def write_convs(tmp_path, n=1, rounds=20, name="in.jsonl"):
    path = tmp_path / name
    convs = []
    for i in range(n):
        c = long_conv(rounds=rounds)
        c["messages"][1]["content"] += f" (conversation {i})"
        c["messages"][6]["content"] += f" (conversation {i})"  # the summarised head differs too (the task is kept)
        convs.append(c)
    path.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in convs))
    return path, convs


def run(runner, server, src, tmp_path, *extra, env=None):
    out = tmp_path / "out.jsonl"
    report = tmp_path / "report.json"
    args = ["summarize", "--backend", "openai", "--base-url", server.base_url, "--summary-model", "test-model",
            "--keep-recent", "6", str(src), "-o", str(out), "--report", str(report), *extra]
    if "--cache-dir" not in extra:
        args.append("--no-cache")
    res = runner.invoke(cli, args, env=env or {})
    doc = orjson.loads(report.read_bytes()) if report.exists() else None
    return res, out, doc


def summarize_once(backend: OpenAIBackend, request: SummaryRequest):
    """One summary from ``backend`` outside a run (closes the backend's client after)."""
    async def go():
        try:
            return await backend.summarize(request)
        finally:
            await backend.aclose()
    return asyncio.run(go())
