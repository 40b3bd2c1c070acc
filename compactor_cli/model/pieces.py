"""Counting tokens by pre-tokenised pieces (model/_pieces.c): its counter, and the table of
character classes its split reads.

The split needs, for each character of a text, the classes the encodings' patterns test (letter,
number, White_Space, CR/LF, and o200k's upper and lower letter classes, marks in both). The
table gives them from this Python's unicodedata only where they cannot differ from the regex
engine's own tables whatever either's Unicode version: the encoders' AGREED_RANGES, blocks of
symbols only (emoji, arrows, the variation selectors), whose new characters are never letters,
marks or numbers, and SCRIPT_BLOCKS. A text with any other character is counted as before
(encoders.Encoder).
"""

from __future__ import annotations

import unicodedata
from itertools import repeat
from typing import Any

from .compiled import extension

_PIECES = extension("_pieces")
#: Our encoding names -> the split's kinds (model/_pieces.c).
KINDS = {"cl100k_base": 0, "o200k_base": 1, "llama3": 2, "qwen": 3}
#: Blocks of symbols only, besides the encoders' AGREED_RANGES (those of the real runs' texts
#: outside them: Codex's emoji, U+FE0F and the keycap U+20E3); unassigned code points there are
#: symbols to the split either way. The marks (U+20D0-U+20F0, U+FE00-U+FE0F) were all assigned by
#: Unicode 5.1.
SYMBOL_BLOCKS: tuple[tuple[int, int], ...] = (
    (0x20D0, 0x20F0), (0x2B00, 0x2BFF), (0xFE00, 0xFE0F), (0x1F1E6, 0x1F1FF), (0x1F650, 0x1F67F), (0x1F6C6, 0x1F6FF),
    (0x1F700, 0x1F8FF), (0x1F900, 0x1F9FF), (0x1FA00, 0x1FAFF))
#: Blocks read alike by every table in play although they hold letters and marks: Devanagari,
#: whose characters were all assigned by Unicode 7.0 (every Python this runs on has Unicode 13 or
#: newer) and whose categories have not changed since (this Python's and the newest tables, the
#: ``regex`` module's, agree: tests/test_pieces_compiled.py); and the noncharacters U+FDD0-U+FDEF
#: and U+FFFE-U+FFFF, unassigned (Cn) for ever by Unicode's stability policy. Without them a text
#: with one Hindi word, or a U+FFFF, built tiktoken in every process that met one (0.1-0.15 s).
SCRIPT_BLOCKS: tuple[tuple[int, int], ...] = ((0x0900, 0x097F), (0xFDD0, 0xFDEF), (0xFFFE, 0xFFFF))
LETTER, NUMBER, SPACE, NEWLINE, UPPER, LOWER, KNOWN = 1, 2, 4, 8, 16, 32, 64
#: Unicode's White_Space property (what the regex engine's \s is; str.isspace also takes U+001C-U+001F).
WHITE_SPACE = frozenset([*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
                         0x202F, 0x205F, 0x3000])
_CATEGORY_CLASSES = {"Lu": LETTER | UPPER, "Lt": LETTER | UPPER, "Ll": LETTER | LOWER,
                     "Lm": LETTER | UPPER | LOWER, "Lo": LETTER | UPPER | LOWER,
                     "Mn": UPPER | LOWER, "Mc": UPPER | LOWER, "Me": UPPER | LOWER,
                     "Nd": NUMBER, "Nl": NUMBER, "No": NUMBER}
_tables: dict[tuple[tuple[int, int], ...], bytes] = {}


def class_table(ranges: tuple[tuple[int, int], ...]) -> bytes:
    """Each code point's classes for the split (KNOWN for those of ``ranges``, 0 for any other,
    which the split leaves to the caller). Built once per process, when the first text beyond
    ASCII is counted (about 7 ms)."""
    found = _tables.get(ranges)
    if found is None:
        table = bytearray(max(hi for _, hi in ranges) + 1)
        known = {category: KNOWN | bits for category, bits in _CATEGORY_CLASSES.items()}.get
        for lo, hi in ranges:  # map, not a generator: 7 ms for the table instead of 28
            table[lo:hi + 1] = bytes(map(known, map(unicodedata.category, map(chr, range(lo, hi + 1))),
                                         repeat(KNOWN)))
        for cp in WHITE_SPACE:
            table[cp] |= SPACE
        for cp in (0x0A, 0x0D):
            table[cp] |= NEWLINE
        found = _tables[ranges] = bytes(table)
    return found


def piece_counter(name: str, vocab_path: str) -> Any:
    """model/_pieces.c's Counter for encoding ``name`` on the ranks of the .vocab file at
    ``vocab_path``, or None: not built, or the file unreadable or not read exactly."""
    if _PIECES is None:
        return None
    try:
        with open(vocab_path, "rb") as fh:
            return _PIECES.Counter(KINDS[name], fh.read())
    except (OSError, ValueError):
        return None
