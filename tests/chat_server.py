"""A real HTTP server on 127.0.0.1 that speaks /v1/chat/completions, scripted per test.

``ChatServer(handler)`` runs ``handler(request_body) -> Reply`` for every request in its own
thread, records every request, and can enforce a context window (in tokens) like a real server."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import orjson

from compactor_cli.sections import SECTIONS
from compactor_cli.tokens import TokenCounter


@dataclass
class Reply:
    status: int = 200
    content: str | None = None  # the answer text (status 200)
    body: bytes | None = None  # raw body, overrides everything
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    error: str = "scripted error"


def summary_text(facts: str = "the planted facts", filler_words: int = 0) -> str:
    body = {s: f"{s} of {facts}" for s in SECTIONS}
    if filler_words:
        body["overview"] += " " + " ".join(["word"] * filler_words)
    return "\n\n".join(f"## {k}\n{v}" for k, v in body.items())


def good(req: dict) -> Reply:
    return Reply(content=summary_text())


class ChatServer:
    def __init__(self, handler: Callable[[dict], Reply] = good, context_window: int | None = None,
                 latency: float = 0.0) -> None:
        self.handler = handler
        self.context_window = context_window
        self.latency = latency
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.max_in_flight = 0
        self._in_flight = 0
        self.counter = TokenCounter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every answer
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                req = orjson.loads(raw)
                req["_auth"] = self.headers.get("authorization")
                req["_arrived"] = time.monotonic()
                with server.lock:
                    server.requests.append(req)
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    reply = server.respond(self.path, req)
                    if reply.delay or server.latency:
                        time.sleep(reply.delay or server.latency)
                finally:
                    with server.lock:
                        server._in_flight -= 1
                self.send_response(reply.status)
                body = reply.body
                if body is None:
                    if reply.status == 200:
                        body = orjson.dumps({
                            "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                            "model": req.get("model"),
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": reply.content}}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                    else:
                        body = orjson.dumps({"error": {"message": reply.error, "type": "test", "code": None}})
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # socketserver's default of 5 drops concurrent connects for 1 s

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def respond(self, path: str, req: dict) -> Reply:
        if not path.endswith("/chat/completions"):
            return Reply(status=404, error=f"no route {path}")
        if self.context_window is not None:
            n = sum(self.counter.text(m.get("content") or "") for m in req["messages"]) + (req.get("max_tokens") or 0)
            if n > self.context_window:
                return Reply(status=400, error=f"This model's maximum context length is {self.context_window} tokens. "
                                               f"However, you requested {n} tokens (context_length_exceeded).")
        return self.handler(req)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "ChatServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass
class Endpoint:
    """A server as the test helpers see it, by another URL: e.g. a ChatServer's with
    credentials in it (``Endpoint(server.base_url.replace("//", "//user:pw@"))``)."""

    base_url: str
