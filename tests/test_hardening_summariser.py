"""Issue 28: failures of the summariser side are the summariser's (SUMMARIZE_FAILED, or a usage
error), never the input's (INVALID_INPUT, "please report this record"); and --timeout is a total
deadline per request, not a limit per socket read."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest
from chat_server import ChatServer, Reply, summary_text
from helpers import long_conv

from compactor_cli import summarize_dump
from compactor_cli.backends import Answer
from compactor_cli.backends.cache import CACHE_FILE
from compactor_cli.backends.config import BackendConfig, OpenAIConfig
from compactor_cli.backends.sections import SECTIONS
from compactor_cli.cli import cli
from compactor_cli.errors import UsageError, XCompactError


class DrippingServer:
    """A chat-completions server that sends its headers at once, then one byte of body a second:
    every socket read succeeds well within any per-read timeout, the answer never completes."""

    def __init__(self) -> None:
        stop = self.stop = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "100000")
                self.end_headers()
                self.wfile.flush()
                try:
                    while not stop.wait(1.0):
                        self.wfile.write(b" ")  # JSON allows whitespace before the value
                        self.wfile.flush()
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> DrippingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _input(tmp_path, n: int = 1):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(long_conv(rounds=12 + i)) + b"\n" for i in range(n)))
    return src


def _summarize(runner, src, out, base_url: str, *more: str):
    report = out.with_suffix(".report.json")
    res = runner.invoke(cli, ["summarize", "--backend", "openai", "--base-url", base_url, "--summary-model", "m",
                              "--structured", "markdown", "--keep-recent", "6", str(src), "-o", str(out),
                              "--report", str(report), *more])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res, orjson.loads(report.read_bytes())["items"]


def test_a_dripping_server_is_cut_at_the_timeout(runner, tmp_path):
    src, out = _input(tmp_path), tmp_path / "out.jsonl"
    with DrippingServer() as server:
        started = time.monotonic()
        res, items = _summarize(runner, src, out, server.base_url, "--timeout", "2", "--retries", "0")
        took = time.monotonic() - started
    assert took < 8, f"the run took {took:.1f} s with --timeout 2"
    assert res.exit_code == 1
    assert [i["status"] for i in items] == ["SUMMARIZE_FAILED"]
    assert "2 s" in items[0]["error"] and "timeout" in items[0]["error"], items[0]["error"]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in res.stderr, res.stderr
    assert out.read_bytes() == src.read_bytes()  # left as it was


def test_a_bad_environment_url_is_a_usage_error_from_the_library(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://[::1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(UsageError, match="OPENAI_BASE_URL") as caught:
        summarize_dump(long_conv(rounds=12), keep_recent=6,
                       backend=BackendConfig("openai", OpenAIConfig(retries=0)))
    assert "[::1" not in str(caught.value)  # never quoted: a URL may hold credentials


def test_a_bad_base_url_in_the_library_options_is_a_usage_error():
    with pytest.raises(UsageError, match="base URL"):
        summarize_dump(long_conv(rounds=12), keep_recent=6,
                       backend=BackendConfig("openai", OpenAIConfig(base_url="http://u:secret@[::1/v1")))


def test_a_damaged_cache_entry_is_not_blamed_on_the_input(runner, tmp_path):
    src, cache = _input(tmp_path), tmp_path / "cache"
    with ChatServer() as server:
        _, items = _summarize(runner, src, tmp_path / "first.jsonl", server.base_url, "--cache-dir", str(cache))
        assert [i["status"] for i in items] == ["SUMMARIZED"]
        db = sqlite3.connect(cache / CACHE_FILE)
        db.execute("UPDATE summaries SET summary = X'FFFE80'")  # neither UTF-8 nor what put() writes
        db.commit()
        db.close()
        res, items = _summarize(runner, src, tmp_path / "second.jsonl", server.base_url, "--cache-dir", str(cache))
    assert [i["status"] for i in items] == ["SUMMARIZED"], items
    assert res.exit_code == 0, res.stderr
    assert "summary cache" in res.stderr and "Traceback" not in res.stderr


def _lone_surrogates(request: dict) -> Reply:
    content = "\n".join(f"## {s}\n{s} of the facts \\ud800" for s in SECTIONS)
    body = {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}
    return Reply(body=orjson.dumps(body).replace(b"\\\\ud800", b"\\ud800"))


def test_an_answer_that_cannot_be_written_as_it_came_is_not_blamed_on_the_input(runner, tmp_path):
    src, out = _input(tmp_path), tmp_path / "out.jsonl"
    with ChatServer(_lone_surrogates) as server:
        res, items = _summarize(runner, src, out, server.base_url)
    assert [i["status"] for i in items] == ["SUMMARIZED"], items
    text = out.read_bytes().decode("utf-8")  # valid UTF-8: the lone surrogate is written as U+FFFD
    assert "\\ufffd" in text or "\ufffd" in text
    assert "surrogate" in res.stderr  # said once, not silently


class _SurrogatePlugin:
    name = "surrogates"

    async def summarize(self, request: Any) -> Answer:
        return Answer("\n\n".join(f"## {s}\n{s} \ud800" for s in SECTIONS))


def test_a_plugin_answer_that_cannot_be_written_is_a_summary_failure():
    from compactor_cli.backends.factory import _Guarded

    with pytest.raises(XCompactError, match="cannot be written"):
        asyncio.run(_Guarded(_SurrogatePlugin(), "tests:surrogates").summarize(None))


def test_a_slow_but_steady_answer_within_the_timeout_still_arrives(runner, tmp_path):
    src, out = _input(tmp_path), tmp_path / "out.jsonl"
    with ChatServer(lambda req: Reply(content=summary_text(), delay=0.5)) as server:
        res, items = _summarize(runner, src, out, server.base_url, "--timeout", "3", "--retries", "0")
    assert [i["status"] for i in items] == ["SUMMARIZED"], res.stderr


class _OddFields:
    name = "odd"

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    async def summarize(self, request: Any) -> Answer:
        answer = Answer("\n\n".join(f"## {s}\n- {s}" for s in SECTIONS))
        for k, v in self.fields.items():
            setattr(answer, k, v)
        return answer


@pytest.mark.parametrize("fields", [{"calls": "2"}, {"usage": {"prompt_tokens": "many"}}, {"usage": [1]},
                                    {"structured": 3}, {"calls": -1}])
def test_a_plugin_answer_with_fields_of_the_wrong_type_is_a_summary_failure(fields):
    from compactor_cli.backends.factory import _Guarded

    with pytest.raises(XCompactError, match="backend tests:odd"):
        asyncio.run(_Guarded(_OddFields(**fields), "tests:odd").summarize(None))


def test_a_cache_dir_that_is_no_path_switches_the_cache_off(tmp_path):
    from compactor_cli.backends.cache import SummaryCache

    cache = SummaryCache(str(tmp_path / "a\x00b"))
    assert cache.problem and "running without it" in cache.problem


ODD_PLUGIN = '''
from compactor_cli import Answer
from compactor_cli.backends.sections import SECTIONS


class Odd:
    name = "odd"

    async def summarize(self, request):
        answer = Answer("\\\\n\\\\n".join(f"## {s}\\\\n- {s}" for s in SECTIONS))
        answer.calls = "2"
        return answer
'''


def test_through_the_cli_a_plugin_answer_of_the_wrong_shape_is_summarize_failed(tmp_path):
    import subprocess
    import sys

    (tmp_path / "odd_backend.py").write_text(ODD_PLUGIN)
    src = _input(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "compactor_cli", "summarize", "--backend", "odd_backend:Odd",
                           "--keep-recent", "6", str(src), "-o", "out.jsonl", "--report", "r.json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stderr
    item = orjson.loads((tmp_path / "r.json").read_bytes())["items"][0]
    assert item["status"] == "SUMMARIZE_FAILED" and "odd_backend:Odd" in item["error"], item
    assert "please report" not in proc.stderr and "Traceback" not in proc.stderr
