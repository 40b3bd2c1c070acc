"""A shell command's words (evidence/shell_words.py) are ``shlex.split``'s: the same words, and a
ValueError (then the words at spaces) wherever shlex raises one, on every short text of the
characters either treats apart and on Hypothesis texts."""

from __future__ import annotations

import itertools
import shlex

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compactor_cli.evidence.shell_words import posix_split, shell_words

#: What shlex's POSIX mode treats apart: its whitespace, both quotes, the escape; then a plain
#: letter, white space it does not split at (U+000B), and the comment sign it is told to ignore.
ALPHABET = ["a", " ", "\t", "\n", "'", '"', "\\", "\x0b", "#"]


def _shlex(s: str) -> list[str] | str:
    try:
        return shlex.split(s, comments=False)
    except ValueError:
        return "ValueError"


def _ours(s: str) -> list[str] | str:
    try:
        return posix_split(s)
    except ValueError:
        return "ValueError"


def _every_text(longest: int) -> list[str]:
    return ["".join(t) for n in range(longest + 1) for t in itertools.product(ALPHABET, repeat=n)]


def test_every_text_of_four_characters_splits_as_shlex_splits_it() -> None:
    bad = [s for s in _every_text(4) if _ours(s) != _shlex(s)]
    assert not bad, bad[:5]


@pytest.mark.slow
def test_every_text_of_six_characters_splits_as_shlex_splits_it() -> None:
    bad = [s for s in _every_text(6) if _ours(s) != _shlex(s)]
    assert not bad, bad[:5]


@settings(deadline=None, max_examples=500)
@given(st.one_of(st.lists(st.sampled_from(ALPHABET + ["b", "\r", "$", "é", "\u3000", "\\\n", "''", '""']),
                          max_size=30).map("".join), st.text(max_size=40)))
@example("""grep -rn "it's \\"quoted\\" \\$HOME" 'a b'\\ c "" '' x\\""")
@example("echo 'unclosed")
@example('echo "trailing\\')
def test_hypothesis_texts_split_as_shlex_splits_them(s: str) -> None:
    assert _ours(s) == _shlex(s)


def test_broken_quoting_falls_back_to_the_words_at_spaces() -> None:
    assert shell_words("grep -n 'it''s here") == ["grep", "-n", "'it''s", "here"]
    assert shell_words("sed -i 's/a/b/' f.py") == ["sed", "-i", "s/a/b/", "f.py"]
