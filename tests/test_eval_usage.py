"""`xcompact eval` with a model backend: the usage the server reported for each request (prompt,
completion and cached tokens) summed per setting, equal to what the server sent; priced with
--price. Runs against a scripted server on 127.0.0.1 that reports a different usage on every
request (tests/chat_server.py)."""

from __future__ import annotations

import itertools
import threading

import orjson
import pytest
from chat_server import ChatServer, Reply, summary_text
from helpers import FIXTURES, tool_conv

from compactor_cli.backends import Answer
from compactor_cli.cli import cli
from compactor_cli.model.schema import schema_problems

TAU = FIXTURES / "taubench_airline_5.jsonl"

pytestmark = pytest.mark.skipif(not hasattr(Answer(""), "usage"),
                                reason="the backends do not carry the server's usage yet (Answer.usage)")


class Billing:
    """A server's answers with a usage of its own each time, and the sums of what it reported."""

    def __init__(self) -> None:
        self.sent = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
        self.calls = 0
        self._n = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(self, req: dict) -> Reply:
        with self._lock:
            n = next(self._n)
            usage = {"prompt_tokens": 1000 + 37 * n, "completion_tokens": 200 + n, "cached_tokens": 64 * (n % 3)}
            self.calls += 1
            for key, value in usage.items():
                self.sent[key] += value
        body = orjson.dumps({
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": req.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": summary_text()}}],
            "usage": {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"],
                      "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
                      "prompt_tokens_details": {"cached_tokens": usage["cached_tokens"]}}})
        return Reply(body=body)


def test_usage_is_the_sum_of_what_the_server_reported_and_is_priced(runner, tmp_path):
    report = tmp_path / "eval.json"
    billing = Billing()
    with ChatServer(billing) as server:
        base = f"--backend openai --base-url {server.base_url} --model test-model --no-cache"
        tries = [f"summarize {base} --keep-recent 4", f"compact --token-threshold 2000 {base}"]
        res = runner.invoke(cli, ["eval", str(TAU), "--try", tries[0], "--try", tries[1], "--try", "toolcall --keep 1",
                                  "--report", str(report), "--price", "test-model=2/8/0.5"])
    assert res.exit_code == 0, res.stderr
    doc = orjson.loads(report.read_bytes())
    assert schema_problems(doc, "eval") == []
    rows = [doc["settings"][t]["usage"][0] for t in tries]
    assert all(r["backend"] == "openai" and r["model"] == "test-model" for r in rows)
    for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        assert sum(r[key] for r in rows) == billing.sent[key], key
    assert sum(r["calls"] for r in rows) == billing.calls > 2
    for r in rows:
        want = ((r["prompt_tokens"] - r["cached_tokens"]) * 2 + r["cached_tokens"] * 0.5
                + r["completion_tokens"] * 8) / 1e6
        assert r["cost_usd"] == pytest.approx(want, abs=1e-6)
        assert f"${r['cost_usd']:,.4f}" in res.stderr
        assert f"{r['prompt_tokens']:,}/{r['completion_tokens']:,}/{r['cached_tokens']:,}" in res.stderr
    assert "usage" not in doc["settings"]["toolcall --keep 1"]


@pytest.mark.real_llm
@pytest.mark.slow
def test_usage_against_the_real_server_is_what_it_sent(tmp_path):
    """llama-cpp-python's server with the 0.5B model, its answers passed through a recording
    relay on 127.0.0.1: the usage eval reports is the sum of the usage of each of its answers."""
    import subprocess
    import sys
    import urllib.request

    from llm import server as llm

    if llm.installed() is None:
        pytest.skip("real model server not installed: " + llm.SETUP_HINT)
    sent = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
    with llm.start(n_ctx=4096) as real:

        def relay(req: dict) -> Reply:
            body = orjson.dumps({k: v for k, v in req.items() if not k.startswith("_")})
            ask = urllib.request.Request(real.base_url + "/chat/completions", data=body,
                                         headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(ask, timeout=900) as resp:
                    raw, status = resp.read(), resp.status
            except urllib.error.HTTPError as exc:
                raw, status = exc.read(), exc.code
            if status == 200:
                usage = orjson.loads(raw).get("usage") or {}
                sent["calls"] += 1
                sent["prompt_tokens"] += usage.get("prompt_tokens", 0)
                sent["completion_tokens"] += usage.get("completion_tokens", 0)
            return Reply(status=status, body=raw)

        with ChatServer(relay) as relay_server:
            spec = (f"summarize --backend openai --base-url {relay_server.base_url} --model local --seed 0 --no-cache "
                    "--structured markdown --keep-recent 2 --max-summary-tokens 150")
            src = tmp_path / "one.jsonl"  # a few hundred tokens: the model writes ~10 tokens/s on 2 cores
            src.write_bytes(orjson.dumps(tool_conv(n_tools=3, size=120)) + b"\n")
            report = tmp_path / "eval.json"
            res = subprocess.run([sys.executable, "-m", "compactor_cli", "eval", str(src), "--try", spec, "--report",
                                  str(report)], capture_output=True, text=True, timeout=1500)
    assert res.returncode in (0, 1), res.stderr  # a 0.5B model may fail the summary: its requests count still
    (usage,) = orjson.loads(report.read_bytes())["settings"][spec]["usage"]
    assert sent["calls"] >= 1 and usage["prompt_tokens"] == sent["prompt_tokens"]
    assert usage["completion_tokens"] == sent["completion_tokens"]
