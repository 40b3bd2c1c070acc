"""Checks of a model's summary beyond its shape: an answer whose sections repeat one another is no
summary (a 0.5B model wrote the same three sentences into all eight sections of a Claude Code
session, and the run reported SUMMARIZED). Such an answer is replaced by the offline extractive
sections of the same head, and the report item says so."""

from __future__ import annotations

import re

from ..backends.sections import EMPTY, SECTIONS, parse_sections

_WORD = re.compile(r"[a-z][a-z0-9_'-]{2,}")
_STOP = frozenset("the and for with that this from are was were has have had not but you your its into "  # noqa: SIM905
                  "will would can could should user assistant any all".split())
#: Two sections repeat each other when this share of the smaller one's words is in the other.
OVERLAP = 0.8
#: An answer is repetitive when at least this many sections repeat another.
MIN_SECTIONS = 3
MIN_WORDS = 5  # a section of fewer distinct words says too little to compare


def repeated_sections(summary: str) -> list[str]:
    """The sections that share most of their words with another section, when there are at least
    MIN_SECTIONS of them; else none."""
    try:
        sections = parse_sections(summary)
    except Exception:  # noqa: BLE001 - not readable: the shape check reports it, not this one
        return []
    words = {}
    for name, body in sections.items():
        if body.strip() == EMPTY:
            continue
        found = set(_WORD.findall(body.lower())) - _STOP
        if len(found) >= MIN_WORDS:
            words[name] = found
    names = list(words)
    involved: set[str] = set()
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if len(words[a] & words[b]) >= OVERLAP * min(len(words[a]), len(words[b])):
                involved |= {a, b}
    return [s for s in SECTIONS if s in involved] if len(involved) >= MIN_SECTIONS else []
