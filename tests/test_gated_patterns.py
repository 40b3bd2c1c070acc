"""The summariser's word patterns behind a look-ahead (``facts.gated``, issue 32) find exactly
what the plain patterns find: the look-ahead's class matches exactly the characters, under the
pattern's flags (case folding, Unicode's dotless i and long s included), that the pattern's
alternatives can begin with, checked over every code point; and Hypothesis and the fixtures'
real texts compare the matches themselves."""

from __future__ import annotations

import re

import pytest
from helpers import fixture_message_texts
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.backends import extractive, facts

GATED = {
    "failure": facts._FAILURE,
    "preference": extractive._PREFERENCE,
    "strong preference": extractive._STRONG_PREFERENCE,
    "decision": extractive._DECISION,
    "strong decision": extractive._STRONG_DECISION,
    "pending": extractive._PENDING,
    "asks for info": extractive._ASKS_FOR_INFO,
}
_FORM = re.compile(r"\(\?=\[(?P<first>[^\]]+)\]\)\(\?:(?P<body>.*)\)", re.S)
EVERY_CHAR = "".join(map(chr, range(0x110000)))


def _parts(gated: re.Pattern[str]) -> tuple[str, str]:
    m = _FORM.fullmatch(gated.pattern)
    assert m, f"not the form gated() makes: {gated.pattern[:60]}"
    return m["first"], m["body"]


def _split_top(body: str) -> list[str]:
    """``body``'s alternatives at its own level (not inside a group or a class)."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = body.index("]", i + 1) + 1
            continue
        depth += (c == "(") - (c == ")")
        if c == "|" and depth == 0:
            out.append(body[start:i])
            start = i + 1
        i += 1
    return out + [body[start:]]


def _first_letters(body: str) -> set[str]:
    """The letters ``body``'s matches can begin with (after the zero-width ``\\b``); a form this
    does not know fails the test rather than passing unread."""
    letters: set[str] = set()
    for alt in _split_top(body):
        alt = alt.removeprefix(r"\b")
        if alt.startswith("("):
            depth, i = 0, 0
            while True:
                depth += (alt[i] == "(") - (alt[i] == ")")
                if depth == 0:
                    break
                i += 1
            assert alt[i + 1:i + 2] not in ("?", "*", "{"), f"an optional group first: {alt[:40]}"
            letters |= _first_letters(alt[1:i].removeprefix("?:"))
        else:
            assert alt[:1].isalpha(), f"an alternative that starts with no letter: {alt[:40]}"
            letters.add(alt[0])
    return letters


@pytest.mark.parametrize("name", GATED)
def test_the_gate_admits_exactly_the_characters_a_match_can_begin_with(name):
    gated = GATED[name]
    first, body = _parts(gated)
    letters = _first_letters(body)
    assert set(first) == letters
    # under the pattern's flags, over every code point: a class of the letters is what they match
    gate = re.compile(f"[{first}]", gated.flags)
    alternatives = re.compile("|".join(sorted(letters)), gated.flags)
    admitted = [m.start() for m in gate.finditer(EVERY_CHAR)]
    assert admitted == [m.start() for m in alternatives.finditer(EVERY_CHAR)]
    assert "ı" in [EVERY_CHAR[i] for i in admitted] or "i" not in letters  # re's own case folding, not str.lower
    # and a gate one letter short would turn a match away
    for letter in first:
        short = re.compile(f"[{first.replace(letter, '')}]", gated.flags)
        assert [m.start() for m in short.finditer(EVERY_CHAR)] != admitted


_ALPHABET = st.sampled_from(list("abcdefghilmnoprstuwyIWDNPTK'-. \n\t?") + ["ı", "İ", "K", "ſ", "é", "_", "1", "don't",
                                                                              "i will", "not found", "let me know"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(_ALPHABET, max_size=60).map("".join))
def test_gated_patterns_find_what_the_plain_ones_find(text):
    for gated in GATED.values():
        plain = re.compile(_parts(gated)[1], gated.flags)
        assert [m.span() for m in gated.finditer(text)] == [m.span() for m in plain.finditer(text)]


def test_gated_patterns_on_the_fixtures_real_texts():
    plains = {name: re.compile(_parts(g)[1], g.flags) for name, g in GATED.items()}
    texts = 0
    for text in fixture_message_texts():
        if not text:
            continue
        texts += 1
        for name, gated in GATED.items():
            assert [x.span() for x in gated.finditer(text)] == [x.span() for x in plains[name].finditer(text)], name
    assert texts > 400  # the OpenAI-form fixtures
