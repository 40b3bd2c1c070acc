"""A model's answer holding a lone surrogate ("\\ud800", valid JSON, not valid UTF-8) crashed the
summary cache write and the whole run (issue 16): now the cache keeps it exactly and the run
goes on; the record's fate is decided as for any other answer (never a traceback)."""

from __future__ import annotations

import orjson
from chat_server import ChatServer, Reply
from helpers import long_conv

from compactor_cli.backends.cache import SummaryCache
from compactor_cli.backends.sections import SECTIONS
from compactor_cli.cli import cli


def _answer_with_a_lone_surrogate(request: dict) -> Reply:
    body = {"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "\n".join(f"## {s}\n{s} of the facts \\ud800" for s in SECTIONS)}}]}
    return Reply(body=orjson.dumps(body).replace(b"\\\\ud800", b"\\ud800"))


def test_a_lone_surrogate_in_an_answer_does_not_crash_the_run(runner, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(long_conv(rounds=12)) + b"\n" for _ in range(2)))
    out, cache = tmp_path / "out.jsonl", tmp_path / "cache"
    with ChatServer(_answer_with_a_lone_surrogate) as server:
        res = runner.invoke(cli, ["summarize", "--backend", "openai", "--base-url", server.base_url, "--summary-model", "m",
                                  "--structured", "markdown", "--keep-recent", "6", str(src), "-o", str(out),
                                  "--cache-dir", str(cache)])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code in (0, 1), res.stderr
    assert len(out.read_bytes().splitlines()) == 2  # every record written (summarised or as it was)


def test_the_cache_keeps_a_lone_surrogate_exactly(tmp_path):
    cache = SummaryCache(str(tmp_path))
    cache.put("k", "a \ud800 b")
    assert cache.problem is None
    assert cache.get("k") == "a \ud800 b"
    cache.put("k2", "plain é")
    assert cache.get("k2") == "plain é"
