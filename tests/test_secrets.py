"""Secrets never leave the openai backend: pure masking functions, then whole runs against a
real chat-completions server on 127.0.0.1 that echoes the credentials it receives."""

from __future__ import annotations

import base64
from pathlib import Path

import openai
import orjson
from chat_server import ChatServer, Endpoint, Reply, summary_text
from openai_runs import SECRET, run, write_convs

from compactor_cli.backends.openai_backend import ECHOED_SECRET, OpenAIBackend, OpenAIOptions
from compactor_cli.model.secrets import collect_secrets, contains_secret, mask_credentials, mask_secrets, redact_url
from compactor_cli.model.tokens import TokenCounter

PASSWORD = "pa55w0rd-xyz"
BASIC = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


def leaked_forms(*secrets: str) -> list[bytes]:
    """A secret and the start a truncation would leave of it."""
    return [form.encode() for s in secrets for form in (s, s[:12], s[-12:])]


def all_bytes(tmp_path: Path, res) -> dict[str, bytes]:
    """Every byte a run wrote: its files (output, report, cache with its -wal/-shm), stdout, stderr."""
    blobs = {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    blobs.update(stdout=res.stdout.encode(), stderr=res.stderr.encode())
    return blobs


def assert_nowhere(blobs: dict[str, bytes], forms: list[bytes]) -> None:
    for where, blob in blobs.items():
        for form in forms:
            assert form not in blob, (where, form)


# ---------------------------------------------------------------- pure functions

def test_mask_secrets_masks_every_occurrence_fragments_and_the_bearer_form():
    text = f"got Authorization: Bearer {SECRET}; again {SECRET}; cut {SECRET[:12]}; tail {SECRET[-9:]}"
    masked = mask_secrets(text, [SECRET])
    assert masked == "got Authorization: Bearer ***; again ***; cut ***; tail ***"
    assert mask_secrets("nothing here, sk-", [SECRET]) == "nothing here, sk-"  # 3 characters are no fragment


def test_masking_before_a_cut_leaves_no_start_of_the_key():
    body = "x" * (200 - len("Bearer ") - 14) + f"Bearer {SECRET} and more"
    assert SECRET[:14] in body[:200]  # what the old order (cut, then mask) let through
    assert not contains_secret(mask_secrets(body, [SECRET])[:200], [SECRET])


def test_contains_secret_needs_a_fragment_of_eight_characters():
    assert contains_secret(f"key {SECRET[3:11]} here", [SECRET])
    assert not contains_secret(f"key {SECRET[3:10]} here", [SECRET])
    assert not contains_secret(summary_text(), [SECRET, PASSWORD, BASIC])


def test_redact_url_removes_credentials_and_token_parameters():
    assert redact_url(f"https://alice:{PASSWORD}@Host.example:8443/v1") == "https://Host.example:8443/v1"
    assert redact_url("https://tok_0123456789@host/v1/") == "https://host/v1/"
    assert redact_url("https://host/v1?api_key=abc&x=1&token=t&Key=k") == "https://host/v1?x=1"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url(None) is None and redact_url("") == ""


def test_url_credentials_are_secrets_in_every_form_a_server_sees():
    found = collect_secrets(SECRET, f"https://alice:{PASSWORD}@host/v1?key=qk-987654321")
    assert {SECRET, PASSWORD, BASIC, f"alice:{PASSWORD}", "qk-987654321"} <= set(found)
    assert "alice" not in found  # a user name beside a password is no secret (else "alice" vanishes everywhere)
    assert "tok_0123456789" in collect_secrets("", "https://tok_0123456789@host/v1")  # alone, it is the token


def test_mask_credentials_catches_shapes_of_unknown_secrets():
    text = "failed https://bob:hunter2@proxy:3128/v1?api_key=zz&b=2 with Basic Ym9iOmh1bnRlcjI= (basic validation)"
    assert mask_credentials(text) == "failed https://***@proxy:3128/v1?api_key=***&b=2 with Basic *** (basic validation)"


# ---------------------------------------------------------------- the backend's own strings

def test_describe_masks_the_url_and_headers_in_an_error_before_cutting():
    url = f"https://alice:{PASSWORD}@127.0.0.1:9/v1"
    backend = OpenAIBackend(OpenAIOptions(base_url=url), TokenCounter().text)
    try:  # the HTTP library under the openai client: httpx, renamed httpx2 in later releases
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]

    request = httpx.Request("POST", url + "/chat/completions")
    body = "y" * 120 + f" seen {url} with Basic {BASIC} " + "y" * 100
    exc = openai.InternalServerError("boom", response=httpx.Response(500, request=request), body=body)
    conn = openai.APIConnectionError(request=request)
    conn.__cause__ = OSError(f"cannot reach {url}: header Basic {BASIC}")
    for text in (backend._describe(exc), backend._describe(conn)):
        assert PASSWORD[:8] not in text and BASIC[:8] not in text, text
    assert "connection error: cannot reach https://***@127.0.0.1:9/v1" in backend._describe(conn)
    assert backend.endpoint == "https://127.0.0.1:9/v1"


# ---------------------------------------------------------------- whole runs

def test_an_answer_echoing_the_key_is_discarded_never_written_or_cached(runner, tmp_path):
    src, _ = write_convs(tmp_path)
    cache = tmp_path / "cache"
    echo = lambda req: Reply(content=summary_text(f"the header {req['_auth']}"))  # noqa: E731
    with ChatServer(echo) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--cache-dir", str(cache), env={"OPENAI_API_KEY": SECRET})
    assert server.requests[0]["_auth"] == f"Bearer {SECRET}"
    item = doc["items"][0]
    assert item["status"] == "SUMMARIZE_FAILED" and item["error"] == ECHOED_SECRET
    assert out.read_bytes() == orjson.dumps(orjson.loads(src.read_bytes())) + b"\n"  # left as it was
    assert any(cache.iterdir())  # the cache was opened...
    assert_nowhere(all_bytes(tmp_path, res), leaked_forms(SECRET))  # ...and holds no key, nor does anything else


def test_a_long_error_body_echoing_the_key_is_masked_before_it_is_cut(runner, tmp_path):
    src, _ = write_convs(tmp_path)
    pad = "z" * (200 - len("Bearer ") - 14)  # the 200-character cut falls inside the key
    leak = lambda req: Reply(status=500, headers={"retry-after": "0"},  # noqa: E731
                             error=f"{pad}{req['_auth']} was rejected by the upstream proxy " + "q" * 100)
    with ChatServer(leak) as server:
        res, out, doc = run(runner, server, src, tmp_path, "--retries", "1", env={"OPENAI_API_KEY": SECRET})
    assert doc["items"][0]["status"] == "SUMMARIZE_FAILED" and "server error 500" in doc["items"][0]["error"]
    assert_nowhere(all_bytes(tmp_path, res), leaked_forms(SECRET))
    assert "Bearer ***" in res.stderr


def test_credentials_in_the_base_url_never_appear(runner, tmp_path):
    src, _ = write_convs(tmp_path, n=2)
    cache = tmp_path / "cache"
    replies = {0: lambda auth: Reply(content=summary_text(f"header {auth}")),
               1: lambda auth: Reply(status=503, headers={"retry-after": "0"}, error="x" * 190 + f" {auth} denied")}
    handler = lambda req: replies["conversation 1" in req["messages"][1]["content"]](req["_auth"])  # noqa: E731
    with ChatServer(handler) as server:
        url = server.base_url.replace("http://", f"http://alice:{PASSWORD}@")
        res, out, doc = run(runner, Endpoint(url), src, tmp_path, "--cache-dir", str(cache), "--retries", "0")
    assert {r["_auth"] for r in server.requests} == {f"Basic {BASIC}"}  # the credentials were used...
    assert [i["status"] for i in doc["items"]] == ["SUMMARIZE_FAILED", "SUMMARIZE_FAILED"]
    assert doc["items"][0]["error"] == ECHOED_SECRET and "server error 503" in doc["items"][1]["error"]
    assert_nowhere(all_bytes(tmp_path, res), leaked_forms(PASSWORD, BASIC, f"alice:{PASSWORD}"))  # ...and never shown
    assert doc["parameters"]["base_url"] == server.base_url  # the CLI records it through redact_url
