"""The error lines of a tool output (evidence/extract.py lists them as "Error met"): the line
closing a traceback ("ValueError: ..."), pytest's ``E`` and ``FAILED`` lines, compiler and git
errors, shell errors; never a line of a file listing or of code.

A long output is not read line by line: only the lines that hold something an error line
cannot be without (one of ``_NEEDED``, or one of the first letters of the forms anchored at a
line's start) can be one, and those are found with ``str.find`` (issue 32: the line loop cost
about 2.4 µs a line, nearly all of it the loop's own Python, on outputs where a few lines in a
thousand are errors). ``tests/test_error_lines.py`` holds it to the line loop.
"""

from __future__ import annotations

import re

_ERROR_LINE = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b(?::\s*\S.*|\s*$)"
    r"|E\s{2,}\S.*|FAILED\s+\S.*|ERROR\s+\S+.*(?:Error|Exception|failed|error).*"
    r"|(?:\S+:\d+:(?:\d+:)?\s*)?(?:fatal )?error(?:\[\w+\])?:\s*\S.*|fatal:\s*\S.*|panic:\s*\S.*)$")
#: an error line anywhere a line says one of these (a substring test: issue 32, the pattern's
#: ``.*(?:…).*`` tried each of them at every position of every line)
_ERROR_WORDS = (": command not found", "No such file or directory", "Permission denied", "Segmentation fault",
                "Killed", "Timed out", "timed out after", "TimeoutExpired")


def is_error_line(line: str, words: tuple[str, ...] = _ERROR_WORDS) -> bool:
    """Whether a line of tool output (no newline in it) is an error line: what
    ``re.match(ERROR_LINE_WHOLE, line)`` answers, the reference ``tests/test_line_tests.py`` holds it to.
    ``words``: those of ``_ERROR_WORDS`` the line may hold (the others are not in its text)."""
    # map over a bound method, not a generator: this runs on every line of every tool output
    return _ERROR_LINE.match(line) is not None or any(map(line.__contains__, words))


#: the whole pattern ``is_error_line`` answers for, as text (the tests compile it: a run never needs it)
ERROR_LINE_WHOLE = _ERROR_LINE.pattern[:-2] + "|.*(?:" + "|".join(map(re.escape, _ERROR_WORDS)) + ").*)$"
_LISTING = re.compile(r"^\s*\d+\s*[\t:│|→]|^\s+\d+\s|^\s*[-+@]{1,3}\s|^\s*(?:def|class|raise|except|assert|return|if|"
                      r"elif|for|while|with|import|from)\b|^\s*#|^\s*//")
#: What every line ``_ERROR_LINE`` matches holds: a word of its first form or the ``error`` of its
#: fifth; or it begins with one of ``_FIRST_LETTERS`` (``E  ``, ``ERROR``, ``FAILED``, ``fatal:``,
#: ``panic:``).
_NEEDED = ("Error", "Exception", "Exit", "Interrupt", "Failure", "Fault", "error")
_FIRST_LETTERS = "EFfp"
_LINE_STARTS = tuple("\n" + c for c in _FIRST_LETTERS)
#: Outputs shorter than this are read line by line (a few lines: the searches would cost more).
SEARCH_CHARS = 2000


def error_lines(text: str) -> list[str]:
    """The distinctive error lines of a tool output, the closing line of a traceback first."""
    if len(text) >= SEARCH_CHARS and "Traceback (most recent call last)" not in text:
        return _searched(text)
    return _line_by_line(text)


def _line_by_line(text: str) -> list[str]:
    """Every line read in turn (a traceback's closing line is known only from the lines before it)."""
    out: list[str] = []
    in_traceback = False
    words = tuple(w for w in _ERROR_WORDS if w in text)  # one search of the text, not one per line
    for raw in text.split("\n"):
        line = raw.rstrip()
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
            continue
        if in_traceback and line and not line[0].isspace():  # the line that closes a traceback
            in_traceback = False
            plain = " ".join(line.split())
            if plain not in out and len(line) <= 400:
                out.append(plain)
            continue
        # the rare error line first: most lines are none, and a listing's pattern tries six forms
        if not line or len(line) > 400 or not is_error_line(line, words) or _LISTING.match(line):
            continue
        plain = " ".join(line.split())
        if plain not in out:
            out.append(plain)
    return out


def _searched(text: str) -> list[str]:
    """``_line_by_line(text)`` for a text without a traceback, reading only the lines that can be
    error lines (in order: the same lines, the same order)."""
    words = tuple(w for w in _ERROR_WORDS if w in text)
    find, rfind = text.find, text.rfind
    starts = {0} if text[:1] in _FIRST_LETTERS else set()
    for needle in _NEEDED + words:
        i = find(needle)
        while i >= 0:
            starts.add(rfind("\n", 0, i) + 1)
            end = find("\n", i)
            if end < 0:
                break
            i = find(needle, end + 1)  # the rest of that line is read anyway
    for needle in _LINE_STARTS:
        i = find(needle)
        while i >= 0:
            starts.add(i + 1)
            i = find(needle, i + 2)
    out: list[str] = []
    for start in sorted(starts):
        end = find("\n", start)
        line = (text[start:] if end < 0 else text[start:end]).rstrip()
        if not line or len(line) > 400 or not is_error_line(line, words) or _LISTING.match(line):
            continue
        plain = " ".join(line.split())
        if plain not in out:
            out.append(plain)
    return out
