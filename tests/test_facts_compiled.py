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


# ---------------------------------------------------------------- error_lines

def error_lines(text: str) -> list[int]:
    return SCAN.error_lines(text, facts._ERROR_STARTS, facts._ERROR_NEEDLES, facts._FAILURE_WORDS, facts._FAILURE_MAX)


def error_lines_as_defined(text: str) -> list[int]:
    """error_lines' definition (backends/_facts.c), in Python."""
    out = []
    for k, line in enumerate(text.split("\n")):
        plain = facts._TAG.sub("", line).strip()
        if plain and (plain[0] in facts._ERROR_STARTS or any(n in plain for n in facts._ERROR_NEEDLES)
                      or (len(plain) <= facts._FAILURE_MAX and facts._FAILURE.search(plain))):
            out.append(k)
    return out


def failure_lines_testing_every_line(text: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``_failure_lines`` as it is without the compiled part: every line tested in Python."""
    units = facts._units(text, True)
    with monkeypatch.context() as m:
        m.setattr(facts, "COMPILED", None)
        return facts._failure_lines(units, text)


#: what the lines' tests look at: tags whole and broken, spaces of every kind, "E" at a line's
#: start or not, each needle and a letter short of it, failure words in any case and inside words
LINE_PIECES = ["<b>", "</b>", "<x-y>", "< b>", "<>", "</>", "<", ">", "<E>", "<é>", " ", "\t", "\u3000", "\x1c", "\n",
               "E", "EE", "e", "Error", "Erro", "rror", "error", "ERROR", "Exception", "Traceback", "FAIL", "FAI",
               "fatal:", "panic:", "No such file", "command not found", "Permission denied", "Segmentation fault",
               "not found", "ot foun", "exit ", "exit", "1", ":", "x", "é", "日", "\U0001f600", "wrong", "WRONG",
               "\u0131nvalid", "Inval\u0130d", "can't", "does not exist", "mismatch", "errors", "_error",
               "a" * 60]


@settings(max_examples=600)
@given(st.lists(st.sampled_from(LINE_PIECES), max_size=40).map("".join))
def test_error_lines_lists_what_its_definition_says(text: str) -> None:
    assert error_lines(text) == error_lines_as_defined(text)


@given(st.text(max_size=300))
def test_error_lines_on_any_text(text: str) -> None:
    assert error_lines(text) == error_lines_as_defined(text)


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a pattern."""
    out: list[str] = []
    depth = start = i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*out, pattern[start:]]


#: every way a line is an error line or a failure line: each alternative of the error pattern at
#: the line's start, each of the anywhere patterns and each failure word anywhere
_LINE_KINDS = ([rf"\s*(?:{alt})" for alt in _alternatives(facts._ERROR_LINE)]
               + [rf".*(?:{rx})" for rx in facts._ERROR_ANYWHERE]
               + [rf".*\b{word}\b" for word in facts._FAILURE_WORDS])


def test_the_error_pattern_is_split_into_its_alternatives() -> None:
    alternatives = _alternatives(facts._ERROR_LINE)
    assert len(alternatives) == 10 and "|".join(alternatives) == facts._ERROR_LINE


@settings(max_examples=60)
@given(st.sampled_from(_LINE_KINDS).flatmap(lambda rx: st.from_regex(re.compile(rx), fullmatch=True)),
       st.text(max_size=20))
def test_every_line_the_tests_take_is_listed(line: str, after: str) -> None:
    """A line left out is a line never tested: an alternative added to the patterns without its
    string in facts._ERROR_NEEDLES would drop its error lines from every summary."""
    line = (line + after).replace("\n", " ")
    plain = facts._TAG.sub("", line).strip()
    taken = bool(plain) and (facts.is_error_line(plain)
                             or (len(plain) <= facts._FAILURE_MAX and facts._FAILURE.search(plain) is not None))
    if taken:
        assert error_lines(line) == [0], line


def test_every_kind_of_error_line_is_listed() -> None:
    """One line of each kind (the property above only checks the lines the tests take)."""
    lines = ["Traceback (most recent call last):", "  ValueError: bad", "KeyError", "error[E0308]: mismatched",
             "ERROR collecting", "FAILED tests/a.py", "FAIL: test_x", "fatal: not a git repository",
             "panic: oops", "E       assert 1 == 2", "EISDIR: illegal operation", "ls: x: No such file or directory",
             "bash: foo: command not found", "cp: Permission denied", "Segmentation fault (core dumped)",
             "Not found.", "exited with exit code 2", "Wrong flag!", "<b>Error:</b> bad"]
    text = "\n".join(["fine", *lines, "also fine"])
    assert error_lines(text) == list(range(1, len(lines) + 1))
    units = facts._units(text, True)
    assert all(facts.is_error_line(facts._TAG.sub("", line).strip()) or facts._failure_word(line) for line in lines)
    assert facts._failure_lines(units, text) == [facts._TAG.sub("", line).strip() for line in lines]


def test_the_error_lines_are_those_of_every_line_tested(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the fixtures' real tool output and every other message text: the error lines the
    summariser keeps are the same with the compiled list of lines as with every line tested."""
    texts = [t for t in fixture_message_texts() if "\n" in t]
    kept = 0
    for text in texts:
        mine = facts._failure_lines(facts._units(text, True), text)
        assert mine == failure_lines_testing_every_line(text, monkeypatch), text[:200]
        kept += len(mine)
    assert sum(t.count("\n") for t in texts) > 5000 and kept > 50


@pytest.mark.parametrize("args", [("x", "é", (), ("wrong",), 9), ("x", "E", ("é",), ("wrong",), 9),
                                  ("x", "E", ("",), ("wrong",), 9), ("x", "E", ("a",) * 33, ("wrong",), 9),
                                  ("x", "E", (), ("Error",), 9), ("x", "E", (), (), 9),
                                  ("x", "E", [], ("wrong",), 9), (b"x", "E", (), ("wrong",), 9),
                                  ("x", "E", (), ("wrong",), "9")])
def test_error_lines_refuses_what_it_cannot_read(args: tuple) -> None:
    with pytest.raises((ValueError, TypeError), match=r"error_lines|has_word"):
        SCAN.error_lines(*args)
    assert error_lines("an error\nfine") == [0]


def test_a_rejected_word_list_leaves_no_reference_behind() -> None:
    """The word list read last is cached; one rejected after it must release it."""
    import sys

    words = ("wrong", "invalid")
    SCAN.has_word("x", words)
    before = sys.getrefcount(words)
    for _ in range(100):
        with pytest.raises(ValueError):
            SCAN.has_word("x", ("ok", "Bad"))
        SCAN.has_word("x", words)
    assert sys.getrefcount(words) == before


@pytest.mark.parametrize(("word_max", "listed"), [(2**100, [0]), (-2**100, []), (2**63, [0]), (-1, []), (5, [0]),
                                                  (4, [])])
def test_any_word_max_is_a_length(word_max: int, listed: list[int]) -> None:
    assert SCAN.error_lines("wrong", "E", (), facts._FAILURE_WORDS, word_max) == listed


# ---------------------------------------------------------------- has_run

def run_searched(text: str, chars: str, n: int) -> bool:
    return re.search("[" + "".join(map(re.escape, chars)) + "]{%d,}" % n, text) is not None


RUN_PIECES = ["━", "█", "▉", "#", "=", ">", "==", "#" * 7, "=" * 8, "-", "]", "^", "\\", "a", " ", "\n", "é", "\U0001f600"]


@settings(max_examples=600)
@given(st.lists(st.sampled_from(RUN_PIECES), max_size=30).map("".join),
       st.sampled_from(["━█▉▊▋▌▍▎▏#=>", "#", "-]^\\", "é\U0001f600=", "a"]), st.integers(1, 10))
def test_has_run_is_the_class_search(text: str, chars: str, n: int) -> None:
    assert SCAN.has_run(text, chars, n) == run_searched(text, chars, n)


@given(st.text(max_size=200), st.text(min_size=1, max_size=5), st.integers(1, 4))
def test_has_run_on_any_text(text: str, chars: str, n: int) -> None:
    assert SCAN.has_run(text, chars, n) == run_searched(text, chars, n)


def test_the_progress_bar_run_is_what_is_routine_asked_before() -> None:
    """The routine test's progress bar, now a run, is the alternative it was."""
    assert facts.is_routine._runs[0][2].pattern == r"[━█▉▊▋▌▍▎▏\#=>]{8,}"
    assert facts.is_routine("  ████████  ") and facts.is_routine("[=======>]") and not facts.is_routine("a == b")


@pytest.mark.parametrize("args", [("x", "", 1), ("x", "a", 0), ("x", "a" * 33, 2), ("x", "a", "2"), (b"x", "a", 1),
                                  ("x", "a", 2**100)])
def test_has_run_refuses_what_it_cannot_read(args: tuple) -> None:
    with pytest.raises((ValueError, TypeError, OverflowError)):
        SCAN.has_run(*args)
