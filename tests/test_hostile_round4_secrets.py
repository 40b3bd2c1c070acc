"""Round 4 (issue 28): the echo check sees the text as it will be written (a key written as
``\\uXXXX`` escapes in a JSON answer is the key once decoded), and the base64 of the key and of
the Authorization header (``Bearer <key>``) are the key too."""

from __future__ import annotations

import base64
import json

import pytest
from helpers import FIXTURES

from compactor_cli.model.secrets import collect_secrets, contains_secret, mask_secrets

KEY = "sk-proj-Zq81nVb47LmW2xTy90PaQe"


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


@pytest.mark.parametrize("answer", [
    json.dumps({"summary": "the key is " + KEY}, ensure_ascii=True).replace(KEY, _escaped(KEY)),
    '{"summary": "k=' + _escaped(KEY[:12]) + KEY[12:] + '"}',
    '{"summary": "half ' + _escaped(KEY[:10]) + '"}',
])
def test_unicode_escapes_of_the_key_are_caught(answer):
    assert KEY not in answer
    assert contains_secret(answer, collect_secrets(KEY, None))


@pytest.mark.parametrize("plain", [KEY, "Bearer " + KEY, "Authorization: Bearer " + KEY, "x" + KEY, "xy" + KEY])
def test_base64_of_the_key_and_of_the_header_is_caught(plain):
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        text = "header was " + enc(plain.encode()).decode() + " ok"
        secrets = collect_secrets(KEY, None)
        assert contains_secret(text, secrets), (plain, text)
        assert enc(plain.encode()).decode()[6:-6] not in mask_secrets(text, secrets)


def test_ordinary_text_is_not_a_secret():
    secrets = collect_secrets(KEY, None)
    assert not contains_secret("## Goal\nFix the parser; tests pass. \\u00e9t\\u00e9 " * 20, secrets)
    assert not contains_secret(base64.b64encode(b"hello world, nothing secret here").decode(), secrets)


@pytest.mark.parametrize("url", ["http://alice:s3cr3t-pw@127.0.0.1:99999/v1", "ftp://alice:s3cr3t-pw@127.0.0.1/v1",
                                 "http://alice:s3cr3t-pw@:80/v1"])
def test_a_bad_base_url_is_refused_without_quoting_its_credentials(url):
    from click.testing import CliRunner

    from compactor_cli.cli import cli

    res = CliRunner().invoke(cli, ["summarize", "--backend", "openai", "--base-url", url,
                                   str(FIXTURES / "taubench_airline_5.jsonl")])
    assert res.exit_code == 2 and "--base-url" in res.stderr
    assert "s3cr3t-pw" not in res.stderr + res.stdout and "alice" not in res.stderr + res.stdout
