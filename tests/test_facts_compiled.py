"""The compiled fact scan (backends/_facts.c, issue 32) finds exactly what ``_FACT.finditer``
finds, match for match and kind for kind: it asks the pattern only where its tests say a fact may
start, and a test that wrongly said "no fact here" would drop a fact from a summary. Held to
finditer on generated texts of the pieces facts are made of, on every short text of the
characters the tests look at, and on the fixtures' real messages."""

from __future__ import annotations

import itertools
import re

import pytest
from helpers import fixture_message_texts
from hypothesis import given, settings
from hypothesis import strategies as st
from test_facts_scan import PIECES

from compactor_cli.backends import fact_scan, facts

SCAN = fact_scan.COMPILED


def test_the_compiled_scan_is_built() -> None:
    assert SCAN is not None, (
        "compactor_cli.backends._facts is not in the installed package: the wheel was built without a C "
        "compiler, or XCOMPACT_PURE_PYTHON is set")


def compiled(text: str) -> list[tuple[int, int, str | None]]:
    return SCAN.scan(fact_scan._FACT_KINDS, fact_scan._FACT_CURRENCY, fact_scan._DOT_WORDS, fact_scan._UNIT_WORDS, text)


def finditer(text: str) -> list[tuple[int, int, str | None]]:
    return [(*m.span(), m.lastgroup) for m in fact_scan.fact_pattern().finditer(text)]


#: what each of the scan's tests looks at: numbers with and without their unit, extensions and
#: domains and the words that only look like them, the identifier forms one character short or
#: long, hash words near and far
MORE_PIECES = ["1.5", "1,000", "3 ", "3\u00a0", "٣", "GiB", "KB", "files", "filesx", "%x", "50%", ".7z", ".tar.gz",
               ".pyc", ".jsonl", ".com:8080", ".comx", "a.b", "self.x", "ABCDE1", "ABCD1", "A1B2C3D4E5", "A1B2C3D4E5F",
               "snake_case_", "a_b_", "a_b_1", "a_b1", "__", "2024", "12345678", "deadbee", "abc1234", "0123456789abc",
               " " * 41, "//", "a/", "/a", ".a/", "~", "~a/b", "-", "--", "—", "\u2028", "x" * 20, "ᴬ", "Ⅻ", "²"]
ALL_PIECES = PIECES + MORE_PIECES


@settings(max_examples=600)
@given(st.lists(st.sampled_from(ALL_PIECES), max_size=50).map("".join))
def test_on_texts_of_fact_pieces(text: str) -> None:
    assert compiled(text) == finditer(text)


@given(st.text(max_size=300))
def test_on_any_text(text: str) -> None:
    assert compiled(text) == finditer(text)


#: the characters and short words the tests compare against, one at a time
SHORT = ["a", "f", "h", "s", "x", "A", "Z", "0", "7", "٣", "é", "_", "-", ".", "/", "~", "@", "+", ":", ",", "%", "$",
         "€", " ", "\n", "'", "py", "com", "ms", "commit", "http://"]


@pytest.mark.slow
def test_on_every_text_of_three_short_pieces() -> None:
    """Each of the ~30,000 texts, and each behind a word and a space (the gates look back)."""
    checked = 0
    for parts in itertools.product(SHORT, repeat=3):
        body = "".join(parts)
        for text in (body, "w" + body, " " + body + "7"):
            assert compiled(text) == finditer(text), text
            checked += 1
    assert checked == 3 * len(SHORT) ** 3


@pytest.mark.parametrize("text", [
    "see 3 files, 1.5 GiB and 50%x", "12 000 rows", "2024-05-01T10:00", "src/a.py and ./b.tar.gz", "x.pyc",
    "api.example.dev:8080", "~/notes/a.md", "//", " / ", "a-b-c-d", "ABC-12 A1B2C ABCD1", "user_id_3 a_b_c",
    "abc1234 is the commit", "deadbeef" + " " * 40 + "sha", "deadbeef" + " " * 41 + "sha", "deadbeef\nsha",
    "US$5 €3 £ 4", "٣ files", "۱۲ ms", "\ud800 3 files \udfff.py", "a\x00b.py 1\x00%", "K\u212a-12 \u0130D-3",
])
def test_the_cases_each_test_is_for(text: str) -> None:
    assert compiled(text) == finditer(text)


def test_on_the_real_transcripts() -> None:
    texts = [t for t in fixture_message_texts() if t]
    assert sum(map(len, texts)) > 100_000
    found = 0
    for text in texts:
        mine = compiled(text)
        assert mine == finditer(text)
        found += len(mine)
    assert found > 1000


def test_a_long_run_of_hyphens_asks_the_pattern_once_per_fact() -> None:
    """Every "x" of "x-x-x-..." passes the gates (no word character before it); none may start a
    fact, so the pattern is asked nowhere (the pattern itself tries each in time the run's length)."""
    asked: list[int] = []

    class Counting:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern = pattern

        def match(self, text: str, pos: int) -> re.Match[str] | None:
            asked.append(pos)
            return self.pattern.match(text, pos)

    text = "x-" * 20_000 + " 3 files"
    found = SCAN.scan(Counting(fact_scan._FACT_KINDS), Counting(fact_scan._FACT_CURRENCY), fact_scan._DOT_WORDS,
                      fact_scan._UNIT_WORDS, text)
    assert found == finditer(text) == [(len(text) - 7, len(text), "number")]
    assert asked == [len(text) - 7]


def test_a_pattern_that_matches_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="empty string"):
        SCAN.scan(re.compile(r"\b"), re.compile("x"), frozenset(), frozenset({"files"}), "3 files")


@pytest.mark.parametrize("alternatives", [fact_scan._EXTENSIONS, fact_scan._TLDS, fact_scan._UNITS])
def test_the_word_lists_are_spelt_out_in_full(alternatives: str) -> None:
    """The scan looks a word up in these sets; each alternative is letters, digits and "%" with
    optional characters, so its spellings are all it matches, and each is short enough for the
    scan to look up (16 characters)."""
    words = fact_scan.spellings(alternatives)
    whole = re.compile(f"(?:{alternatives})")
    for alternative in alternatives.split("|"):
        assert re.fullmatch(r"(?:[A-Za-z0-9%]\??)+", alternative), alternative
        assert sum(1 for w in words if re.fullmatch(alternative, w)) == 2 ** alternative.count("?")
    assert all(whole.fullmatch(w) and len(w) <= 16 for w in words)
    assert fact_scan._DOT_WORDS >= fact_scan.spellings(fact_scan._EXTENSIONS) | fact_scan.spellings(fact_scan._TLDS)


def has_word(text: str) -> bool:
    return SCAN.has_word(text, facts._FAILURE_WORDS)


def test_case_folding_to_an_ascii_letter_is_what_re_does_over_every_code_point() -> None:
    """A one-letter word is found in a one-character text exactly where a case-blind pattern
    of that letter matches it: the Kelvin sign, the dotted capital I, the dotless i and the long
    s included, and nothing else outside ASCII."""
    letters = tuple("abcdefghijklmnopqrstuvwxyz")
    any_letter = re.compile("[a-z]", re.I)
    equated = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        assert SCAN.has_word(c, letters) == (any_letter.fullmatch(c) is not None), hex(cp)
        if any_letter.fullmatch(c) and cp >= 128:
            equated[c] = next(x for x in letters if re.fullmatch(x, c, re.I))
    assert equated == {"\u212a": "k", "\u0130": "i", "\u0131": "i", "\u017f": "s"}
    for c, letter in equated.items():
        assert [x for x in letters if SCAN.has_word(c, (x,))] == [letter]


FAILURE_PIECES = [*facts._FAILURE_WORDS, "ERROR", "Error", "FaIlEd", "CAN'T", "can t", "errors", "error_", "_error",
                  "xerror", "error2", "2error", "\u0131nvalid", "\u0130NVALID", "refu\u017fed", "\u212a", "does not",
                  " exist", "not  found", "not\nfound", " ", "\n", ".", "'", "-", "a", "é", "日", "٣", "!", ":"]


@settings(max_examples=1000)
@given(st.lists(st.sampled_from(FAILURE_PIECES), max_size=12).map("".join))
def test_has_word_is_the_case_blind_pattern(text: str) -> None:
    assert has_word(text) == (facts._FAILURE.search(text) is not None)


@given(st.text(max_size=200))
def test_has_word_on_any_text(text: str) -> None:
    assert has_word(text) == (facts._FAILURE.search(text) is not None)


def test_has_word_on_the_real_lines() -> None:
    found = 0
    for text in fixture_message_texts():
        for line in text.split("\n"):
            mine = has_word(line)
            assert mine == (facts._FAILURE.search(line) is not None), line[:200]
            found += mine
    assert found > 50


@pytest.mark.parametrize("words", [("Error",), ("error ",), ("",), ("x" * 33,), ["error"], ("é",), (3,)])
def test_has_word_refuses_words_it_cannot_read(words: object) -> None:
    with pytest.raises(ValueError, match="has_word"):
        SCAN.has_word("an error", words)
    assert SCAN.has_word("an error", facts._FAILURE_WORDS)  # and reads the next tuple afresh
