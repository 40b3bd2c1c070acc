"""The fact weighting's line shapes and word counts (backends/facts.py ``_shape``, ``_blanked``,
``_words_at_least``) give what their plain definitions give (issue 32: a long line is shaped from
its head, the words are counted up to the second), so a summary does not change by a byte: held
to the definitions on Hypothesis lines (long ones, capital sigmas, characters whose lower case is
longer, digit and whitespace runs across the cut) and on the fixtures' real lines."""

from __future__ import annotations

import re

from helpers import fixture_message_texts
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.backends import fact_scan, facts


def shape_by_definition(line: str, spans: list[tuple[int, int]]) -> str:
    for a, b in sorted(spans, reverse=True):
        line = line[:a] + "\x00" + line[b:]
    return re.sub(r"\d+", "#", " ".join(line.split()).lower())[:48]


_PIECES = list("aB \t\n\r\x0b\u00a0\u3000-./:") + ["Σ", "ΑΣ", "ΣΑ", "İ", "ß", "ﬁ", "12", "٣٤", "x" * 40, " " * 30,
                                                  "1" * 30, "word ", "Wörter "]


@st.composite
def _line_and_spans(draw):
    line = "".join(draw(st.lists(st.sampled_from(_PIECES), max_size=60)))
    cuts = sorted(set(draw(st.lists(st.integers(0, len(line)), max_size=8))))
    # non-overlapping, as a search finds them
    spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False) if a < b]
    return line, spans


@settings(max_examples=3000, deadline=None)
@given(_line_and_spans())
def test_a_line_shape_is_its_definition(case):
    line, spans = case
    assert facts._shape(line, spans) == shape_by_definition(line, spans)


@settings(max_examples=1000, deadline=None)
@given(_line_and_spans(), st.integers(1, 4))
def test_blanking_and_counting_words_are_their_definitions(case, n):
    line, spans = case
    rest = line
    for a, b in sorted(spans, reverse=True):
        rest = rest[:a] + " " + rest[b:]
    assert facts._blanked(line, spans, " ") == rest
    assert facts._words_at_least(rest, n) == (len(facts._WORD.findall(rest)) >= n)


def test_a_capital_sigma_at_the_cut_keeps_the_whole_lines_lower_case():
    """A capital sigma lowers to the final form at a word's end and to the medial one inside a
    word: a head cut just after it would end its word. Here it is the 48th character of the shape
    and the head's last."""
    line = " " * (facts._SHAPE_READ - 48) + "a" * 47 + "\u03a3" + "b" * 100
    assert facts._shape(line, []) == shape_by_definition(line, []) == "a" * 47 + "\u03c3"


def test_line_shapes_on_the_fixtures_real_lines():
    long_lines = 0
    for text in fixture_message_texts():
        for line in text.split("\n"):
            spans = [m.span() for m in fact_scan.fact_pattern().finditer(line)]
            assert facts._shape(line, spans) == shape_by_definition(line, spans), line[:200]
            long_lines += len(line) > facts._SHAPE_READ
    assert long_lines > 50
