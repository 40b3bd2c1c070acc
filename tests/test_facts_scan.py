"""The extractive summariser's fact scan (backends/fact_scan.py ``_FACT``) finds exactly what the plain
alternation of its four patterns finds, match for match and kind for kind: it tests once that no
word character precedes instead of trying each kind inside every word (issue 32), and a summary
must not change by a byte for that."""

from __future__ import annotations

import re

import pytest
from helpers import fixture_records
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.backends import fact_scan
from compactor_cli.backends.fact_scan import _is_path
from compactor_cli.backends.fact_scan import facts_in as _facts_in  # noqa: N813

#: The alternation as it was written before the gate: url, path, id, number, in that order.
PLAIN = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in
                            (("url", fact_scan._URL), ("path", fact_scan._PATH), ("id", fact_scan._IDENT),
                             ("number", fact_scan._CURRENCY + "|" + fact_scan._NUMBER_AT_WORD))))


def plain_facts(text: str) -> list[tuple[int, int, str]]:
    out = []
    for m in PLAIN.finditer(text):
        kind = m.lastgroup or ""
        if kind == "path" and not _is_path(m.group()):
            continue
        out.append((m.start(), m.end(), "path" if kind == "url" else kind))
    return out


# pieces that start or end every kind of fact, and the characters around them
PIECES = ["a", "b", "f", "x", "Z", "AB", "Q7", "0", "1", "9", "12", "2024-05-01", "_", "-", ".", "/", "~", "@", "+",
          "$", "€", "£", ",", ":", " ", "  ", "\n", "\t", "%", "ms", "MB", "seconds", "http://", "https://", ".com",
          ".py", ".json", "src/", "./", "~/", "commit ", "sha", "hash", "abc1234", "deadbeef", "é", "ß", "٣", "日本",
          "US$", "ABC-12", "user_id_3", "(", ")", "'", '"', "`", "<", ">", "#", "=", "|", "kB/s", "x.y.z", "-v",
          # the words the letters-only gate must not skip, and the characters that let a word go on
          "commit", "commits", "abcdef", "abcdefa", "deadbeefcafe", "deadbeefcafeb", "http", "https", "word",
          "snake_case", "Ab_", "ab", "A", ":", "a@b", "a+b", "AB-", "é"]


@settings(max_examples=400)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_the_gated_scan_finds_what_the_plain_alternation_finds(text: str) -> None:
    assert _facts_in(text) == plain_facts(text)


@pytest.mark.parametrize("text", [
    " +src/x.py", "~/notes/a.md", "@scope/pkg/index.js", "-x/y.py", ".github/ci.yml",  # starts the lead gate keeps
    "abcdefa commit", "abcdefabcdef is the sha", "commit abcdef1", "sha: deadbeefcafe", "hash=abcdef12",
    "see https://x.io/a", "http://localhost:8000/x", "foo-bar.com", "api.example.dev:8080", "x@y.com at a.io",
    "ABC-12 JIRA-7", "a.py",
    "snake_case_3 files", "word_ 12 files", "Ab_: 5 ms", "US$5", "total: $ 1,200.50", "2024-05-01",
])
def test_the_cases_each_gate_is_for(text: str) -> None:
    assert _facts_in(text) == plain_facts(text)
    assert _facts_in(text), "each case holds a fact"


@given(st.text(max_size=200))
def test_on_any_text(text: str) -> None:
    assert _facts_in(text) == plain_facts(text)


def test_on_the_real_transcripts() -> None:
    """Every message text of the fixtures' real runs."""
    texts: list[str] = []
    for _, record in fixture_records():
        for m in record.get("messages", []) if isinstance(record, dict) else []:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                texts.append(content)
    assert sum(map(len, texts)) > 100_000
    found = 0
    for text in texts:
        mine = _facts_in(text)
        assert mine == plain_facts(text)
        found += len(mine)
    assert found > 1000
