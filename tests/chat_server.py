"""A real HTTP server on 127.0.0.1 that speaks /v1/chat/completions, scripted per test.

``ChatServer(handler)`` runs ``handler(request_body) -> Reply`` for every request in its own
thread, records every request, and can enforce a context window (in tokens) like a real server.

``Replay(exchanges)`` is a handler that answers as a recorded model did (fixtures/llm-answers/):
each request gets the recorded answer to the same request; a repair turn, which the recording
lacks, is answered by one of the ``REPAIR_ANSWERS`` policies. ``markdown_only(handler)`` is a
server that rejects ``response_format`` as servers without structured output do."""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import orjson

from compactor_cli.backends.sections import SECTIONS, read_answer
from compactor_cli.model.tokens import TokenCounter


@dataclass
class Reply:
    status: int = 200
    content: str | None = None  # the answer text (status 200)
    body: bytes | None = None  # raw body, overrides everything
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    error: str = "scripted error"
    finish_reason: str = "stop"  # "length": the answer was cut off at max_tokens


def summary_text(facts: str = "the planted facts", filler_words: int = 0) -> str:
    body = {s: f"{s} of {facts}" for s in SECTIONS}
    if filler_words:
        body["overview"] += " " + " ".join(["word"] * filler_words)
    return "\n\n".join(f"## {k}\n{v}" for k, v in body.items())


def json_summary(facts: str = "the planted facts", drop: tuple[str, ...] = ()) -> str:
    """The answer a server with structured output gives: the eight fields as one JSON object."""
    return orjson.dumps({s: f"{s} of {facts}" for s in SECTIONS if s not in drop}).decode()


def good(req: dict) -> Reply:
    return Reply(content=summary_text())


def markdown_only(handler: Callable[[dict], Reply] = good,
                  error: str = "response_format is not supported by this server") -> Callable[[dict], Reply]:
    """A server without structured output: a request with response_format is refused (400)."""

    def respond(req: dict) -> Reply:
        if "response_format" in req:
            return Reply(status=400, error=error)
        return handler(req)

    return respond


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
                            "choices": [{"index": 0, "finish_reason": reply.finish_reason,
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


# ---------------------------------------------------------------- replaying a recorded model

REPAIR_ANSWERS = ("none", "again", "nearest", "sections", "scripted")
_WORDS = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return set(_WORDS.findall(text))


def _answer_text(exchange: dict) -> str:
    return exchange["response"]["choices"][0]["message"]["content"]


def _title(section: str) -> str:
    return section.replace("_", " ").title()


class Replay:
    """A handler answering as a recorded model did.

    ``exchanges``: lines of a recording (``{"request", "status", "response"}``). A request whose
    user message is a recorded one's gets that recorded response, byte for byte (``finish_reason``
    and all); another gets the response to the most similar recorded request (counted in
    ``unmatched``). ``groups``: lists of exchange indices that belong to one conversation (its
    chunks and merges).

    A repair turn (more than two messages) is what the recording lacks; ``repair`` says how to
    answer it:

    - ``none``: refused with 404 (tolerant reading alone: a conversation that needs a repair fails);
    - ``again``: the recorded answer again (a model that ignores the repair);
    - ``nearest``: the recorded answer to the most similar *other* recorded request;
    - ``sections``: the model's own recorded text for exactly the sections the repair asks for,
      headed as this model heads them ("## Tone Context"): from the answer being repaired, then
      from the other answers of the same conversation, then from the most similar requests (a
      model that obeys the repair, writing each section as it wrote it elsewhere);
    - ``scripted``: the asked-for sections with a fixed text (the upper bound).
    """

    def __init__(self, exchanges: list[dict], groups: list[list[int]] | None = None, repair: str = "again") -> None:
        assert repair in REPAIR_ANSWERS, repair
        self.exchanges = exchanges
        self.repair = repair
        self.by_user = {ex["request"]["messages"][1]["content"]: i for i, ex in enumerate(exchanges)}
        self.by_answer = {_answer_text(ex): i for i, ex in enumerate(exchanges)}
        self.group_of = {i: g for g in (groups or []) for i in g}
        self.words = [_words(ex["request"]["messages"][1]["content"]) for ex in exchanges]
        self.unmatched = 0
        self.repairs = 0
        self.borrowed = 0  # sections a "sections" repair took from another conversation's answers
        self.lock = threading.Lock()

    def nearest(self, text: str, exclude: int | None = None) -> list[int]:
        """Recorded requests, most similar user message first (Jaccard of the word sets)."""
        w = _words(text)
        score = [(len(w & x) / max(1, len(w | x)), -i) for i, x in enumerate(self.words)]
        return [-i for _, i in sorted(score, reverse=True) if -i != exclude]

    def recorded(self, i: int) -> Reply:
        ex = self.exchanges[i]
        return Reply(status=ex["status"], body=orjson.dumps(ex["response"]))

    def __call__(self, req: dict) -> Reply:
        messages = req["messages"]
        user = messages[1]["content"]
        if len(messages) <= 2:
            i = self.by_user.get(user)
            if i is None:
                with self.lock:
                    self.unmatched += 1
                i = self.nearest(user)[0]
            return self.recorded(i)
        with self.lock:
            self.repairs += 1
        # the answer being repaired is the assistant message; it names the exchange
        i = self.by_answer.get(messages[2]["content"])
        if i is None:
            i = self.nearest(user)[0]
        asked = messages[-1]["content"]
        if self.repair == "none":  # refused, not retried: as if the backend had no repair turn
            return Reply(status=404, error="this replay has no answers to repair turns")
        if self.repair == "again":
            return self.recorded(i)
        if self.repair == "nearest":
            return self.recorded(self.nearest(self.exchanges[i]["request"]["messages"][1]["content"], exclude=i)[0])
        wanted = self.wanted(asked)
        if self.repair == "scripted":
            return Reply(content="\n\n".join(f"## {_title(s)}\n{s} (scripted repair)" for s in wanted))
        sources = [i] + [j for j in self.group_of.get(i, []) if j != i]
        sources += [j for j in self.nearest(self.exchanges[i]["request"]["messages"][1]["content"]) if j not in sources]
        readings = [read_answer(_answer_text(self.exchanges[j])).sections for j in sources]
        own = set(self.group_of.get(i, [i]))
        parts = []
        for s in wanted:
            k = next((k for k, r in enumerate(readings) if r.get(s)), None)
            if k is not None:
                parts.append(f"## {_title(s)}\n{readings[k][s]}")
                if sources[k] not in own:
                    with self.lock:
                        self.borrowed += 1
        return Reply(content="\n\n".join(parts) or _answer_text(self.exchanges[i]))

    @staticmethod
    def wanted(repair: str) -> list[str]:
        """The sections a repair message asks for: the missing ones, or all eight."""
        if "Write only the missing" in repair:
            return [s for s in SECTIONS if f"'## {s}'" in repair]
        return list(SECTIONS)
