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

import sys

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


def test_the_openai_backend_without_a_key_is_refused_before_it_says_it_sends(runner, tmp_path):
    """--backend openai with no key and no server named: a usage error, and no line saying the
    conversations are on their way to api.openai.com."""
    src = _conv_file(tmp_path)
    for command in ("summarize", "compact"):
        res = runner.invoke(cli, [command, "--backend", "openai", str(src), "-o", str(tmp_path / "o.jsonl")],
                            env={"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None})
        assert res.exit_code == 2, res.stderr
        assert "needs OPENAI_API_KEY" in res.stderr and NOTICE not in res.stderr
        assert not (tmp_path / "o.jsonl").exists()


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


# ---------------------------------------------------------------- 2. a found pyproject.toml


def _pyproject(tmp_path, body: str) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.xcompact]\n" + body)


def _refused(res, *words: str) -> None:
    assert res.exit_code == 2, (res.exit_code, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    message = lines[-1]
    assert "Traceback" not in res.stderr
    assert "pyproject.toml" in message and "--config" in message, message
    for word in words:
        assert word in message, (word, message)


PLUGIN = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")

class Plugin:
    def should_compact(self, dump, counter): return False
    def compact(self, dump, counter): return dump
    async def summarize(self, request): raise RuntimeError("never")
"""


@pytest.mark.parametrize("key", ["strategy", "backend"])
def test_a_found_pyproject_cannot_load_a_plugin(runner, tmp_path, monkeypatch, key):
    """[tool.xcompact] strategy/backend = "MODULE:ATTR" in the working directory's pyproject.toml
    imported (ran) that module."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    marker = tmp_path / "imported.txt"
    module = f"trust_plugin_{key}"
    (tmp_path / f"{module}.py").write_text(PLUGIN.format(marker=str(marker)))
    (tmp_path / "pyproject.toml").write_text(f'[tool.xcompact.compact]\n{key} = "{module}:Plugin"\n')
    src = _conv_file(tmp_path)
    res = runner.invoke(cli, ["compact", "--token-threshold", "1000", str(src)])
    _refused(res, key)
    assert not marker.exists() and module not in sys.modules


@pytest.mark.parametrize("body, key", [
    ('base-url = "{url}"\n', "base-url"),
    ('backend = "openai"\n', "backend"),
    ('base-url = "{url}"\nbackend = "openai"\n', "base-url"),
])
def test_a_found_pyproject_cannot_choose_a_server(runner, tmp_path, monkeypatch, body, key):
    """A found pyproject.toml set the server, and the user's key and conversations went to it."""
    monkeypatch.chdir(tmp_path)
    src = _conv_file(tmp_path)
    with ChatServer() as server:
        _pyproject(tmp_path, body.format(url=server.base_url))
        res = runner.invoke(cli, ["summarize", "--keep-recent", "6", "--no-cache", str(src)],
                            env={"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": server.base_url})
    _refused(res, key)
    assert server.requests == [] and SECRET not in res.stderr


def test_a_found_pyproject_cannot_choose_a_file_to_send(runner, tmp_path, monkeypatch):
    """The user named the server; a found pyproject.toml named the prompt file, whose text went to it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "private.txt").write_text("PRIVATE NOTES")
    _pyproject(tmp_path, 'prompt-file = "private.txt"\n')
    src = _conv_file(tmp_path)
    with ChatServer() as server:
        res = runner.invoke(cli, ["summarize", "--backend", "openai", "--base-url", server.base_url, "--no-cache",
                                  "--keep-recent", "6", str(src)])
    _refused(res, "prompt-file")
    assert server.requests == []


@pytest.mark.parametrize("body, key, written", [
    ('output = "victim.jsonl"\n', "output", "victim.jsonl"),
    ('report = "victim.json"\n', "report", "victim.json"),
    ('html = "victim.html"\n', "html", "victim.html"),
    ('api-ready = "victim.sidecar"\n', "api-ready", "victim.sidecar"),
    ('cache-dir = "victim-cache"\n', "cache-dir", "victim-cache"),
])
def test_a_found_pyproject_cannot_choose_files_to_write(runner, tmp_path, monkeypatch, body, key, written):
    """A command the user ran towards stdout wrote (overwrote) a file the found pyproject.toml named."""
    monkeypatch.chdir(tmp_path)
    _pyproject(tmp_path, body)
    src = _conv_file(tmp_path)
    res = runner.invoke(cli, ["summarize", "--backend", "extractive", "--keep-recent", "6", str(src)])
    _refused(res, key)
    assert not (tmp_path / written).exists()
    assert res.stdout == ""


@pytest.mark.parametrize("body, key", [('engine = "ray"\n', "engine"), ('address = "10.0.0.1:6379"\n', "address")])
def test_a_found_pyproject_cannot_send_records_to_a_cluster(runner, tmp_path, monkeypatch, body, key):
    monkeypatch.chdir(tmp_path)
    _pyproject(tmp_path, body)
    res = runner.invoke(cli, ["toolcall", str(FIXTURES / "swe_agent_3.jsonl")])
    _refused(res, key)


def test_every_refused_key_is_named_in_one_line(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _pyproject(tmp_path, 'output = "a.jsonl"\nreport = "r.json"\n[tool.xcompact.compact]\nstrategy = "x:Y"\n')
    res = runner.invoke(cli, ["compact", str(FIXTURES / "swe_agent_3.jsonl")])
    _refused(res, "output", "report", "strategy")
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) <= 3  # usage banner, hint, the one error line


def test_harmless_keys_of_a_found_pyproject_still_apply(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _pyproject(tmp_path, 'keep = 2\nencoding = "cl100k_base"\nbackend = "extractive"\nengine = "local"\nquiet = true\n'
                         'summary-model = "some-model"\nno-cache = true\n'
                         '[tool.xcompact.compact]\ntoken-threshold = 100000\nkeep-recent = 3\n')
    res = runner.invoke(cli, ["compact", str(FIXTURES / "swe_agent_3.jsonl"), "--report", "r.json"])
    assert res.exit_code == 0, res.stderr
    params = _report(tmp_path / "r.json")["parameters"]
    assert params["token_threshold"] == 100000 and params["keep"] == 2 and params["keep_recent"] == 3
    assert params["backend"] == "extractive" and params["encoding"] == "cl100k_base"
    assert res.stderr == ""  # quiet = true


def test_the_command_line_overrides_a_refused_key(runner, tmp_path, monkeypatch):
    """The file's value never applies, so the command line giving the option is no conflict."""
    monkeypatch.chdir(tmp_path)
    _pyproject(tmp_path, 'output = "victim.jsonl"\nbackend = "openai"\nkeep = 0\n')
    res = runner.invoke(cli, ["toolcall", "-q", str(FIXTURES / "swe_agent_3.jsonl"), "-o", "mine.jsonl"])
    assert res.exit_code == 0, res.stderr
    res = runner.invoke(cli, ["summarize", "-q", "--backend", "extractive", str(FIXTURES / "swe_agent_3.jsonl"),
                              "-o", "mine.jsonl"])
    assert res.exit_code == 0, res.stderr
    assert (tmp_path / "mine.jsonl").exists() and not (tmp_path / "victim.jsonl").exists()


def test_a_config_named_with_dash_dash_config_is_trusted(runner, tmp_path, monkeypatch):
    """Naming the same file with --config is the opt-in: its server and its output are used, and
    the notice says where the choice came from."""
    monkeypatch.chdir(tmp_path)
    src = _conv_file(tmp_path)
    with ChatServer() as server:
        (tmp_path / "pyproject.toml").write_text(f'[tool.xcompact]\nbase-url = "{server.base_url}"\n'
                                                 'output = "named.jsonl"\nno-cache = true\nkeep-recent = 6\n')
        res = runner.invoke(cli, ["summarize", "--config", "pyproject.toml", str(src)])
    assert res.exit_code == 0, res.stderr
    assert len(server.requests) == 1 and (tmp_path / "named.jsonl").exists()
    assert [ln for ln in res.stderr.splitlines() if NOTICE in ln] == \
        [f"{NOTICE} {_host(server)} (base-url in pyproject.toml)"]


def test_in_place_stays_refused_from_a_named_config(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text("in-place = true\n")
    res = runner.invoke(cli, ["toolcall", "--config", "c.toml", str(FIXTURES / "swe_agent_3.jsonl")])
    assert res.exit_code == 2 and "in-place" in res.stderr
