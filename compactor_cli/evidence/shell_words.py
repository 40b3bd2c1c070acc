"""The words of a shell command as ``shlex.split(command, comments=False)`` reads them, without
shlex's state machine: it reads a character at a time in Python, and was a twentieth of the
extractive summariser's time (issue 32). ``tests/test_shell_words.py`` holds ``posix_split`` to
``shlex.split`` on every short text of the characters it treats apart, and on Hypothesis texts.
"""

from __future__ import annotations

import re

_QUOTING = re.compile(r"['\"\\]")
_SHELL_SPACE = re.compile(r"[ \t\r\n]+")  # shlex's whitespace (not str.split's, which has more)
#: One piece of a word (POSIX mode): a run of plain characters, an escaped character, a single-
#: quoted text (no escapes in it), a double-quoted one (a backslash escapes the next character),
#: or the whitespace between words.
_PIECE = re.compile(r"""([^ \t\r\n'"\\]+)|\\(.)|'([^']*)'|"((?:[^"\\]|\\.)*)"|([ \t\r\n]+)""", re.S)
_DOUBLE_QUOTED_ESCAPE = re.compile(r"\\(.)", re.S)


def _unescape(m: re.Match[str]) -> str:
    """Inside double quotes a backslash escapes only ``"`` and itself; before anything else it stays."""
    c = m.group(1)
    return c if c in '"\\' else m.group(0)


def posix_split(command: str) -> list[str]:
    """``shlex.split(command, comments=False)``: the same words, and ValueError where it raises
    one (a quote not closed, a backslash at the end)."""
    words: list[str] = []
    word: list[str] = []  # its pieces; an empty quoted text ('' or "") is one, so it makes a word
    pos = 0
    for m in _PIECE.finditer(command):
        if m.start() != pos:
            raise ValueError("No closing quotation or no escaped character")
        pos = m.end()
        plain, escaped, single, double, space = m.groups()
        if space is not None:
            if word:
                words.append("".join(word))
                word = []
        elif plain is not None:
            word.append(plain)
        elif escaped is not None:
            word.append(escaped)
        elif single is not None:
            word.append(single)
        else:
            word.append(_DOUBLE_QUOTED_ESCAPE.sub(_unescape, double) if "\\" in double else double)
    if pos != len(command):
        raise ValueError("No closing quotation or no escaped character")
    if word:
        words.append("".join(word))
    return words


def shell_words(segment: str) -> list[str]:
    """The words of a shell command, as ``shlex.split`` reads them (or at spaces, where its
    quoting is broken)."""
    if not _QUOTING.search(segment):  # the runs between shlex's whitespace
        return [w for w in _SHELL_SPACE.split(segment) if w]
    try:
        return posix_split(segment)
    except ValueError:
        return segment.split()
