"""Start and stop a real OpenAI-compatible model server on 127.0.0.1 for tests and benchmarks:
llama-cpp-python's ``python -m llama_cpp.server`` serving the GGUF that tests/llm/setup.sh
installs. Nothing here fakes an answer: what the server says is what a user's server says.

Never run two inference servers at once on this 2-core machine: llama.cpp's threads spin while
they wait, and two of them slow each other down far more than twice."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

SETUP_HINT = "run 'bash tests/llm/setup.sh' and export the two variables it prints"


def installed() -> tuple[str, str] | None:
    """(server python, model path) when the real server and model are installed, else None."""
    py, gguf = os.environ.get("XCOMPACT_LLAMA_PYTHON"), os.environ.get("XCOMPACT_TEST_GGUF")
    if not py or not gguf or not os.path.exists(py) or not os.path.exists(gguf):
        return None
    return py, gguf


def _die_with_parent() -> None:
    """The server ends when the test run that started it dies (SIGKILL included), on Linux."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LlamaServer:
    """A running server: its base URL, and the process to stop."""

    base_url: str
    process: subprocess.Popen
    log_path: str

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)

    def __enter__(self) -> "LlamaServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def threads() -> int:
    """The cores a server may use: all of them, or their share among pytest-xdist's workers."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    return max(1, cores // workers)


def start(n_ctx: int = 8192, log_path: str | None = None, startup_timeout: float = 180.0,
          alias: str = "local") -> LlamaServer:
    """Start the server (seed 0) and wait until it answers /v1/models. Threads: the machine's
    cores shared among the test processes that may each run a server at once (pytest-xdist
    workers): llama.cpp's threads spin while they wait, so two servers of 2 threads each on 2
    cores ran the real-model tests 5x slower than one each."""
    found = installed()
    if found is None:
        raise RuntimeError("the real model server is not installed: " + SETUP_HINT)
    py, gguf = found
    port = free_port()
    log_path = log_path or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"xcompact-llama-{port}.log")
    log = open(log_path, "wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HTTP_PROXY", "HTTPS_PROXY"))}
    proc = subprocess.Popen(
        [py, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", alias, "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads()), "--n_threads_batch", str(threads()),
         "--seed", "0",
         "--verbose", "false"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, preexec_fn=_die_with_parent)
    log.close()
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", proc, log_path)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the model server exited with {proc.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(server.base_url + "/models", timeout=2) as r:
                if r.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"the model server did not answer within {startup_timeout:.0f} s; see {log_path}")


def chat(base_url: str, body: dict, timeout: float = 900.0) -> tuple[int, dict]:
    """POST a chat-completions request; (status, JSON body) whatever the status."""
    import json

    req = urllib.request.Request(base_url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, {}
