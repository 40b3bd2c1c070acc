"""A long tool output's error lines are found by searching for what an error line needs
(evidence/error_lines.py ``_searched``), not by reading every line: the same lines in the same
order as the line loop, on Hypothesis texts dense in error lines, near misses, listings and the
white space ``str.split`` and ``rstrip`` read, and on every tool output of the fixtures."""

from __future__ import annotations

import re

from helpers import fixture_message_texts
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compactor_cli.evidence import error_lines as el

TRACEBACK = "Traceback (most recent call last)"
#: Lines of every form the pattern takes, near misses of each, listing and code lines, the
#: substring words, and white space that only some of Python's tests read as white space.
PIECES = [
    "ValueError: bad input", "pkg.mod.CustomError: x", "KeyboardInterrupt", "SystemExit", "AssertionFault: y",
    "E   assert 1 == 2", "E assert 1", "E\t\tx", "FAILED tests/test_a.py::test_b - x", "FAILED",
    "ERROR tests/x.py - Error", "ERROR x", "src/a.c:10:5: error: bad", "a.rs:3: error[E0308]: mismatched",
    "fatal error: x", "error: no",
    "fatal: not a git repository", "panic: runtime error", "panic:", "bash: foo: command not found",
    "cat: x: No such file or directory", "Permission denied", "Killed", "Timed out", "TimeoutExpired",
    "    42 | raise ValueError('x')", "  3:ValueError: in a listing", "def f(): raise KeyError", "# Error: comment",
    "+ E   added", "errors: 0", "Error", "error", "no error here", "Exit", "Failure", "Faults", "exit 1",
    "", " ", "\t", "\r", "\x0b", "\x1c", "\x85", "\u2028", "\u3000", "\xa0", "  indented Error: x", "ok", "x" * 401,
    "ValueError: " + "y" * 395, "é ValueError: ü", "E", "F", "f", "p",
]
lines = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=20),
                           st.lists(st.sampled_from(PIECES), min_size=2, max_size=3).map("".join)), max_size=60)


@settings(deadline=None, max_examples=400)
@given(lines, st.sampled_from(["\n", "\r\n", "\n\n"]), st.integers(0, 3))
@example(["E   x", "y", "panic: z"], "\n", 0)
@example(["E", "E   x", "p", "panic: y"], "\n", 0)  # a line of one first letter, then an error line
@example(["ok", "ValueError: a", "ValueError: a"], "\r\n", 1)
def test_the_searched_lines_are_the_line_loops(pieces: list[str], end: str, pad: int) -> None:
    text = end.join(pieces) + end * pad
    if TRACEBACK in text:
        return
    assert el._searched(text) == el._line_by_line(text)
    long = text + "\n" + "filler line\n" * (el.SEARCH_CHARS // 12 + 1)
    assert el.error_lines(long) == el._line_by_line(long)


@settings(deadline=None, max_examples=300)
@given(st.from_regex(el.ERROR_LINE_WHOLE, fullmatch=True).filter(lambda s: "\n" not in s))
def test_every_error_line_holds_what_the_search_looks_for(line: str) -> None:
    """The search's premise: a line the pattern takes holds one of ``_NEEDED`` or of the words,
    or begins with one of ``_FIRST_LETTERS``."""
    assert re.match(el.ERROR_LINE_WHOLE, line)
    assert (line[:1] in el._FIRST_LETTERS and line[:1] != "") or any(
        w in line for w in el._NEEDED + el._ERROR_WORDS)


def test_the_fixtures_outputs_give_the_same_lines() -> None:
    texts = [t for t in fixture_message_texts() if t and TRACEBACK not in t]
    assert sum(len(t) >= el.SEARCH_CHARS for t in texts) > 40  # long outputs take the search
    for text in texts:
        assert el._searched(text) == el._line_by_line(text), text[:200]


def test_a_traceback_is_read_line_by_line() -> None:
    text = "x\n" * 1500 + TRACEBACK + ":\n  File \"a.py\", line 1\nValueError: boom\n"
    assert el.error_lines(text) == ["ValueError: boom"]
