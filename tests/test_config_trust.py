"""Issue 28, security: what the environment and the working directory can make xcompact do.

1. A remote model must be named by the user: OPENAI_API_KEY (or OPENAI_BASE_URL) in the
   environment never chooses the openai backend; --backend openai, --base-url or a config file
   the user named does. Every run that sends conversations says once, on stderr, to which host,
   and a failure to connect names the host and why that server is used.
2. A pyproject.toml merely found in the working directory cannot load code, choose where data
   is sent, or choose which files are written; harmless keys still apply, and naming the file
   with --config trusts it.

Every server here is the fake one on 127.0.0.1 (chat_server.py); the environment points at it,
so a request the run should not make is seen, never sent anywhere else."""

from __future__ import annotations

import orjson
import pytest
from chat_server import ChatServer
from helpers import FIXTURES, long_conv

from compactor_cli.backends.config import choose_backend_name
from compactor_cli.batch import settings_for
from compactor_cli.cli import cli

SECRET = "sk-test-TRUST-0123456789abcdef"
OFFLINE_URL = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, the connection is refused
NOTICE = "xcompact: sending conversations to summarise to the model server at"


def _conv_file(tmp_path, n=1):
    path = tmp_path / "in.jsonl"
    convs = []
    for i in range(n):
        c = long_conv(rounds=20)
        c["messages"][1]["content"] += f" (conversation {i})"
        convs.append(c)
    path.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in convs))
    return path


def _report(path) -> dict:
    return orjson.loads(path.read_bytes())


def _host(server: ChatServer) -> str:
    return server.base_url.split("//", 1)[1].split("/", 1)[0]  # 127.0.0.1:PORT


# ---------------------------------------------------------------- 1. the environment chooses no server


@pytest.mark.parametrize("command", ["summarize", "compact"])
def test_an_api_key_in_the_environment_sends_nothing(runner, tmp_path, command):
    """With OPENAI_API_KEY set (and OPENAI_BASE_URL at the fake server, so a request would be
    seen), --backend auto summarised every conversation with the openai backend."""
    src = _conv_file(tmp_path)
    extra = ["--token-threshold", "3000"] if command == "compact" else []
    with ChatServer() as server:
        res = runner.invoke(cli, [command, "--keep-recent", "6", str(src), "-o", str(tmp_path / "o.jsonl"),
                                  "--report", str(tmp_path / "r.json"), *extra],
                            env={"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": server.base_url})
    assert res.exit_code == 0, res.stderr
    assert server.requests == []
    assert _report(tmp_path / "r.json")["parameters"]["backend"] == "extractive"
    assert NOTICE not in res.stderr and SECRET not in res.stderr
    said = [ln for ln in res.stderr.splitlines() if "OPENAI_API_KEY" in ln]
    assert len(said) == 1 and "--backend openai" in said[0]


def test_openai_base_url_alone_chooses_no_backend_but_gives_the_url(runner, tmp_path):
    """OPENAI_BASE_URL does not select the openai backend; once --backend openai is given it is
    the server used, and the run says so."""
    src = _conv_file(tmp_path)
    args = ["summarize", "--keep-recent", "6", "--no-cache", str(src), "-o", str(tmp_path / "o.jsonl"),
            "--report", str(tmp_path / "r.json")]
    with ChatServer() as server:
        res = runner.invoke(cli, args, env={"OPENAI_BASE_URL": server.base_url})
        assert res.exit_code == 0, res.stderr
        assert server.requests == [] and _report(tmp_path / "r.json")["parameters"]["backend"] == "extractive"
        res = runner.invoke(cli, [*args, "--backend", "openai"], env={"OPENAI_BASE_URL": server.base_url})
        assert res.exit_code == 0, res.stderr
        assert len(server.requests) == 1
    notices = [ln for ln in res.stderr.splitlines() if NOTICE in ln]
    assert notices == [f"{NOTICE} {_host(server)} (--backend openai)"]


def test_choose_backend_name_reads_no_environment():
    env = {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": OFFLINE_URL}
    assert choose_backend_name("auto", None, env) == "extractive"
    assert choose_backend_name("auto", OFFLINE_URL, env) == "openai"
    assert choose_backend_name("openai", None, {}) == "openai"


def test_the_library_auto_backend_sends_nothing(monkeypatch):
    import compactor_cli

    with ChatServer() as server:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        _, status, details = compactor_cli.summarize_dump(long_conv(20), backend="auto", keep_recent=6)
        settings = settings_for("summarize")
    assert server.requests == [] and details["backend"] == "extractive"
    assert settings.backend is not None and settings.backend.name == "extractive"


@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_a_named_server_is_announced_once_without_credentials(runner, tmp_path, quiet):
    """--base-url chooses the openai backend (auto); the run says once, before sending, to which
    host, even with -q, and never prints the URL's user-info or the key."""
    src = _conv_file(tmp_path, n=3)
    with ChatServer() as server:
        url = server.base_url.replace("http://", "http://alice:hunter2@")
        res = runner.invoke(cli, ["summarize", *quiet, "--base-url", url, "--keep-recent", "6", "--no-cache", str(src),
                                  "-o", str(tmp_path / "o.jsonl")], env={"OPENAI_API_KEY": SECRET})
    assert res.exit_code == 0, res.stderr
    assert len(server.requests) == 3
    lines = res.stderr.splitlines()
    assert [ln for ln in lines if NOTICE in ln] == [f"{NOTICE} {_host(server)} (--base-url)"]
    assert lines[0].startswith(NOTICE)  # before anything else the run says
    for secret in ("alice", "hunter2", SECRET):
        assert secret not in res.stderr


def test_a_run_that_sends_nothing_says_nothing_about_a_server(runner, tmp_path):
    src = _conv_file(tmp_path)
    for args in (["compact", "--check", "--token-threshold", "1000"], ["compact", "--dry-run"],
                 ["summarize", "--dry-run"], ["summarize", "--backend", "extractive"]):
        res = runner.invoke(cli, [*args, "--base-url", OFFLINE_URL, str(src)] if "extractive" not in args
                            else [*args, str(src)], env={"OPENAI_API_KEY": SECRET})
        assert NOTICE not in res.stderr, args


def test_a_failure_to_connect_names_the_host_and_why(runner, tmp_path):
    src = _conv_file(tmp_path)
    res = runner.invoke(cli, ["summarize", "--backend", "openai", "--base-url", OFFLINE_URL, "--retries", "0",
                              "--no-cache", "--keep-recent", "6", str(src), "-o", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 1
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert errors and all("127.0.0.1:9" in ln and "--backend openai" in ln for ln in errors), res.stderr
    assert "Traceback" not in res.stderr


def test_a_bad_openai_base_url_is_a_usage_error_that_does_not_quote_it(runner, tmp_path):
    src = _conv_file(tmp_path)
    res = runner.invoke(cli, ["summarize", "--backend", "openai", str(src)],
                        env={"OPENAI_BASE_URL": "ftp://bob:s3cret@[::1"})
    assert res.exit_code == 2 and "OPENAI_BASE_URL" in res.stderr and "s3cret" not in res.stderr
    assert "Traceback" not in res.stderr
