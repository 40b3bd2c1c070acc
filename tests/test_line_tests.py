"""The summariser's line tests (``facts.LineTest``: is this line code, routine output, an error
line?) answer what a search of their whole pattern answers (issue 32: the search tried every
alternative at every position, and was a fifth of ``summarize`` on Codex logs). Held to it on
Hypothesis texts dense in what the patterns look for, and on every line and sentence of the
fixtures' real runs; and each ``ANYWHERE`` alternative's required strings are checked to be
required."""

from __future__ import annotations

import re

import pytest
from helpers import fixture_records
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.backends import facts
from compactor_cli.backends.messages import sentences
from compactor_cli.evidence import extract
from compactor_cli.model.conversation import content_text

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


def test_line_tests_on_the_fixtures_real_lines_and_sentences():
    seen = dict.fromkeys(TESTS, 0)
    texts = 0
    for _, rec in fixture_records():
        for m in (rec.get("messages") if isinstance(rec, dict) else None) or ():
            text = content_text(m.get("content")) if isinstance(m, dict) else ""
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
    assert extract.is_error_line(line) == (extract.ERROR_LINE_WHOLE.match(line) is not None), line


def test_the_evidence_error_line_test_on_the_fixtures_real_lines():
    found = 0
    for _, rec in fixture_records():
        for m in (rec.get("messages") if isinstance(rec, dict) else None) or ():
            for raw in (content_text(m.get("content")) if isinstance(m, dict) else "").split("\n"):
                line = raw.rstrip()
                whole = extract.ERROR_LINE_WHOLE.match(line) is not None
                assert extract.is_error_line(line) == whole, line[:200]
                found += whole
    assert found >= 5  # the real runs have error lines to hold it to
