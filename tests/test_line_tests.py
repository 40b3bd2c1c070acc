"""The summariser's line tests (``facts.LineTest``: is this line code, routine output, an error
line?) answer what a search of their whole pattern answers (issue 32: the search tried every
alternative at every position, and was a fifth of ``summarize`` on Codex logs). Held to it on
Hypothesis texts dense in what the patterns look for, and on every line and sentence of the
fixtures' real runs; and each ``ANYWHERE`` alternative's required strings are checked to be
required."""

from __future__ import annotations

import re

import pytest
from helpers import fixture_message_texts, fixture_records
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.backends import facts
from compactor_cli.backends.messages import sentences
from compactor_cli.evidence import extract

TESTS = {"code": facts.is_code, "routine": facts.is_routine, "error": facts.is_error_line}

# pieces of what the three patterns look for, at a line's start and anywhere in it
_PIECES = list(" \t\n;{}:|%=#>-_.,/()[]0123456789abcdefilnorstuxBEFKMNRST█━▉٣\u00a0") + [
    "def ", "class ", "import", "return", "# ", "// ", "<div", "</", "12: ", "3→", "7 x", "{:error", "; ",
    "total 12", "-rwxr-xr-x 1 a b 1", "a  b  c", "Wall time: 1.2 s", "Output:", "Collecting x",
    "Successfully installed", "== FAILURES ==", "45%|", "|##|", "45%|##| 3/10",
    "========", "████████", "12 MB/s", "3.5kiB/s",
    "eta 1:23", "beta 1:23", "Traceback (most recent call last)", "ValueError:", "Exception", "error[E1]:",
    "ERROR", "FAILED", "FAIL:", "fatal:", "panic:", "E   x", "EACCES:", "No such file", "command not found",
    "Permission denied", "Segmentation fault", "not found.", "Not found", "exit code 2", "exit status 0",
]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=24).map("".join))
def test_a_line_test_answers_what_its_whole_pattern_finds(text):
    for name, test in TESTS.items():
        assert test(text) == (test.pattern.search(text) is not None), (name, text)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES + ["\n"] * 6), max_size=60).map("".join))
def test_a_line_test_within_a_text_answers_as_the_test_on_its_lines(text):
    """``within(text)`` leaves out the alternatives whose strings the text lacks: on the text's
    lines, stripped or not, it answers what the whole test answers."""
    for name, test in TESTS.items():
        narrowed = test.within(text)
        for line in text.split("\n"):
            for unit in (line, line.strip()):
                assert narrowed(unit) == test(unit), (name, unit)


def test_the_failure_lines_of_the_fixtures_are_those_of_the_whole_line_test(monkeypatch):
    """The summariser's failure lines of every fixture text, with each line's test narrowed to its
    text and without (tagged lines, whose tags are taken out, keep the whole test)."""
    texts = [t for t in fixture_message_texts() if t]
    narrowed = [facts._failure_lines(facts._units(t, True), t) for t in texts]
    monkeypatch.setattr(facts.LineTest, "within", lambda self, text: self)
    assert narrowed == [facts._failure_lines(facts._units(t, True), t) for t in texts]
    assert sum(map(len, narrowed)) > 20


def test_line_tests_on_the_fixtures_real_lines_and_sentences():
    seen = dict.fromkeys(TESTS, 0)
    texts = 0
    for text in fixture_message_texts():
        if not text:
            continue
        texts += 1
        for unit in [*text.split("\n"), *sentences(text)]:
            for name, test in TESTS.items():
                found = test.pattern.search(unit) is not None
                assert test(unit) == found, (name, unit[:200])
                seen[name] += found
    assert texts > 400 and all(seen.values()), seen  # the real runs have lines of each kind


@pytest.mark.parametrize("name", TESTS)
def test_the_strings_an_anywhere_alternative_requires_are_required(name):
    """A required string that a match could lack would turn that line away: every match of each
    alternative, on texts made to hold one, contains them all."""
    test = TESTS[name]
    for needles, rx in test._anywhere:
        made = 0
        for piece in _PIECES:
            for text in (piece, f"x {piece} y", f"{piece}\n"):
                for m in rx.finditer(text):
                    made += 1
                    assert all(n in m.group() for n in needles), (name, rx.pattern, text)
        assert made, f"no piece matches {rx.pattern}: add one"


def test_a_wrongly_required_string_is_caught_by_the_pieces():
    """The checks above can fail: a progress bar that wrongly required "#" disagrees with its
    pattern on a bar the pieces make, and the required-strings check names it."""
    wrong = facts.LineTest("x", {r"[━█▉▊▋▌▍▎▏#=>]{8,}": ("#",)})
    bars = [p for p in _PIECES if re.search(r"[━█▉▊▋▌▍▎▏#=>]{8,}", p)]
    assert any(wrong.pattern.search(b) and not wrong(b) for b in bars)
    assert any(not all(n in m.group() for n in ("#",)) for b in bars for _, rx in wrong._anywhere
               for m in rx.finditer(b))


_EVIDENCE_PIECES = [p for p in _PIECES if "\n" not in p] + [
    ": command not found", "No such file or directory", "Killed", "Timed out", "timed out after",
    "TimeoutExpired", "KeyboardInterrupt", "SystemExit", "a.py:3:1: error: x", "fatal error: y", "ERROR x Error",
]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_EVIDENCE_PIECES), max_size=16).map("".join))
def test_the_evidence_error_line_test_answers_what_its_whole_pattern_matches(line):
    assert extract.is_error_line(line) == (re.match(extract.ERROR_LINE_WHOLE, line) is not None), line


def test_the_evidence_error_line_test_on_the_fixtures_real_lines():
    found = 0
    for text in fixture_message_texts():
        for raw in text.split("\n"):
            line = raw.rstrip()
            whole = re.match(extract.ERROR_LINE_WHOLE, line) is not None
            assert extract.is_error_line(line) == whole, line[:200]
            found += whole
    assert found >= 5  # the real runs have error lines to hold it to


_CASE_PIECES = list(" \n:<>/-.0123456789aceiopstxEIKPSX") + [
    "\u0131", "\u0130", "\u017f", "\u212a", "é", "exit code ", "EXIT STATUS: ", "Exit code: ", "exit code: -",
    "e\u0131t code 2", "Proce\u017f\u017f exited with code 3", "Process exited with code ", "<returncode>",
    "</returncode>", "<ReturnCode> 4 </returncode>", "wrong", "INVALID", "Failed", "fa\u0131led", "can't", "CANNOT",
    "does not exist", "not found", "Error", "mismatch", "unable", "refused", "denied", "illegal", "not allowed",
]


def _exit_code_by_the_pattern(text: str) -> int | None:
    m = extract._EXIT.search(text[:4000]) or extract._EXIT.search(text[-2000:])
    return None if m is None else int(next(g for g in m.groups() if g is not None))


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_CASE_PIECES), max_size=20).map("".join))
def test_substring_tests_rule_out_only_what_the_case_blind_patterns_would_not_find(text):
    """An exit code is found by a case-blind pattern; the substring tests in front of it (on the
    text lowered, with the dotless i, the dotted capital I and the long s folded) never turn away
    a text the pattern matches."""
    assert extract.exit_code(text) == _exit_code_by_the_pattern(text), text
    long = "x " * 2500 + text  # past the head: the tail's window
    assert extract.exit_code(long) == _exit_code_by_the_pattern(long)


def test_the_folded_characters_are_all_a_case_blind_match_equates_with_an_ascii_letter():
    """Every code point a case-blind pattern matches with an ASCII letter is that letter once
    lowered, but for the three the exit code's substring test folds first: so the test never
    misses a letter of a word the pattern would match."""
    letter = re.compile("[a-z]", re.I)
    unlike = set()
    for cp in range(0x110000):
        c = chr(cp)
        if not 0xD800 <= cp <= 0xDFFF and letter.fullmatch(c) and not re.fullmatch("[a-z]", c.lower()):
            unlike.add(c)
    assert unlike == set(extract._FOLD_TO_ASCII)
    assert all(re.fullmatch(ascii_letter, c, re.I) for c, ascii_letter in extract._FOLD_TO_ASCII.items())


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_substring_tests_on_the_fixtures_real_texts():
    """Every string of every fixture record, whatever its format (Codex rollouts' outputs hold
    their exit codes)."""
    past_the_substrings = 0
    for _, rec in fixture_records():
        for text in _strings(rec):
            assert extract.exit_code(text) == _exit_code_by_the_pattern(text), text[:200]
            past_the_substrings += any(w in text.lower() for w in extract._EXIT_WORDS)
    assert past_the_substrings
