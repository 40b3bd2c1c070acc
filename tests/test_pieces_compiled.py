"""Counting by pre-tokenised pieces (model/_pieces.c and _bpe.c, issue 32) gives tiktoken's counts:
its pieces are the ones the encoding's pattern makes (as the ``regex`` engine finds them), and its
merge of each piece makes tiktoken's tokens, for each encoding, on generated texts dense in the
characters the patterns treat specially, on pieces long enough for the heap-ordered merge, on
every character of the table in contexts, and on the fixtures' real runs; its memo stays bounded
and right when it starts over; a vocabulary that does not read exactly is refused."""

from __future__ import annotations

import itertools
import string
import unicodedata
from typing import Any

import pytest
import regex  # tiktoken's own dependency: the patterns as a regex engine reads them, piece by piece
from helpers import fixture_records
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compactor_cli.model import encoders, pieces

NAMES = ("cl100k_base", "o200k_base", "llama3", "qwen")


def test_the_compiled_pieces_are_built() -> None:
    assert pieces._PIECES is not None, (
        "compactor_cli.model._pieces is not in the installed package: the wheel was built without a C "
        "compiler, or XCOMPACT_PURE_PYTHON is set")


@pytest.fixture(scope="module")
def refs() -> dict[str, Any]:
    """name -> (tiktoken's Encoding on quicktok's ranks, a Counter with the class table)."""
    out = {}
    for name in NAMES:
        out[name] = (encoders.reference_encoding(name), _counter(name))
        if name != "qwen":
            out[name][1].set_table(pieces.class_table(encoders.PIECE_RANGES))
    return out


def _counter(name: str) -> Any:
    path = encoders.vocab_path(name)
    assert path is not None
    counter = pieces.piece_counter(name, path)
    assert counter is not None
    return counter


def _reference_ids(encoding: Any, name: str, s: str) -> list[int]:
    return encoding.encode_ordinary(unicodedata.normalize("NFC", s) if name == "qwen" else encoders._clean(s))


PATTERNS = {name: regex.compile(encoders.SPECS[name][2]) for name in NAMES}


def _check(refs: dict[str, Any], s: str) -> None:
    for name, (encoding, counter) in refs.items():
        want = _reference_ids(encoding, name, s)
        split = counter.pieces(s)
        if split is None:  # a character the table leaves to the caller (qwen: anything but ASCII)
            assert not s.isascii() and counter.count(s) is None
            continue
        assert "".join(split) == s and all(split), name
        assert split == PATTERNS[name].findall(s), name
        assert [i for p in split for i in counter.tokens(p.encode())] == want, (name, split)
        assert counter.count(s) == len(want) == counter.count(s), name  # cold, then from the memo


#: What the patterns treat apart: contractions' letters in both cases and U+017F (long s, which
#: folds to s), CR, LF and other White_Space (U+000B, U+0085, U+00A0, U+2028, U+3000) beside what
#: str.isspace takes and the regex engine does not (U+001C-U+001F), digits and other numbers,
#: upper, lower, title-case, modifier and other letters, marks (letters to o200k, not to the
#: others), o200k's slash, and characters outside the table (a lone surrogate, a new letter).
SPECIAL = list("'sSdDmMtTlLvVeErRxX09 \t\r\n\x0b\x0c\x1c\x1f/!.-_\x00\x7f") + [
    "\u017f", "\x85", "\xa0", "\u2028", "\u3000", "\u2003", "\xb2", "\xbd", "\u2167", "\u0663",
    "\xe9", "\xc9", "\u01c4", "\u01c5", "\u02b0", "\xaa", "\u4e2d", "\uac00", "\u0301", "\u0483", "\u0627",
    "\u03a3", "\u03c2", "\u2014", "\u2713", "\U0001F600", "\ud800", "\U000323B0", "\u0e01", "\uFF21",
    "\u0915", "\u093e", "\u094d", "\u0966", "\u0964", "\u0971", "\uffff", "\ufdd0"]  # the last eight: SCRIPT_BLOCKS
special_texts = st.text(alphabet=st.sampled_from(SPECIAL), max_size=40)


@settings(deadline=None, max_examples=400)
@given(st.one_of(special_texts, st.text(max_size=30), st.lists(st.sampled_from(
    ["'s", "'LL", " 'Ve", "HELLO", "World", "\u01c5ab", " ", "  ", "\r\n", "\n\n", "123456", "//", " !", "e\u0301"]),
    max_size=12).map("".join)))
@example("  x\n\n  y  \t\r\n  ")
@example("I'm HELLO's 'LL 'ſ 1234567 abc/def//\n\n/ é e\u0301 中文字 한국어")
@example("'\u017ft 'Sa")  # U+017F folds to s: the contraction ends before the t
@example("\u4e2dAb x\u0301A")  # o200k: a letter of both classes, then capitals: two pieces
def test_the_pieces_are_tiktokens_token_for_token(refs: dict[str, Any], s: str) -> None:
    _check(refs, s)


CONTEXTS = ["{}", "a{}", "{}a", "'{}", "{}'s", " {}", "{} ", "A{}b", "{}{}", "1{}", "\n{}", "{}\n", "x'{}",
            "ab{}c", "AB{}", "{}AB", "{}ab", " {}a", "{}  x", "'{}{}"]


_CATEGORIES = ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
               "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn")


def test_the_script_blocks_have_their_newest_categories_and_no_white_space() -> None:
    """SCRIPT_BLOCKS' characters have in this Python's unicodedata the category the newest
    tables give them (the ``regex`` module's, newer than tiktoken's), so a split reading this
    Python's table reads them as any regex engine between the two does; the noncharacters are
    unassigned in both."""
    newest = {k: regex.compile(r"\p{gc=" + k + "}") for k in _CATEGORIES}
    for lo, hi in pieces.SCRIPT_BLOCKS:
        for cp in range(lo, hi + 1):
            c = chr(cp)
            assert [k for k, p in newest.items() if p.match(c)] == [unicodedata.category(c)], hex(cp)
            assert not regex.match(r"\s", c) and not c.isspace(), hex(cp)
    table = pieces.class_table(encoders.PIECE_RANGES)
    for cp in [*range(0xFDD0, 0xFDF0), 0xFFFE, 0xFFFF]:
        assert unicodedata.category(chr(cp)) == "Cn" and table[cp] == pieces.KNOWN, hex(cp)


@example("\u092a\u0939\u0932\u0947 \u0938\u0947, \u0967\u0968\u0969 \u0915\u094d\u0937\n\uffff\ufdd0x")
@given(st.text(alphabet=st.one_of(st.characters(min_codepoint=0x0900, max_codepoint=0x097F),
                                  st.sampled_from(SPECIAL)), max_size=30))
@settings(deadline=None, max_examples=200)
def test_devanagari_texts_are_tiktokens_token_for_token(refs: dict[str, Any], s: str) -> None:
    _check(refs, s)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES[:3])
def test_every_character_of_the_table_is_read_as_tiktoken_reads_it(refs: dict[str, Any], name: str) -> None:
    """Each code point of PIECE_RANGES in twenty contexts (its classes and its case folding each
    decide some piece's end there)."""
    encoding, counter = refs[name]
    bad = []
    for lo, hi in encoders.PIECE_RANGES:
        for cp in range(lo, hi + 1):
            for context in CONTEXTS:
                s = context.format(chr(cp), chr(cp))
                if counter.count(s) != len(encoding.encode_ordinary(s)):
                    bad.append((hex(cp), context))
    assert not bad, f"{len(bad)} texts counted otherwise, e.g. {bad[:5]}"


def _texts() -> list[str]:
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for _, record in fixture_records():
        walk(record)
    return list(dict.fromkeys(out))


def test_the_fixtures_texts_are_counted_as_tiktoken_counts_them(refs: dict[str, Any]) -> None:
    texts = _texts()
    assert sum(map(len, texts)) > 1_000_000
    for name in NAMES:
        encoding, counter = refs[name]
        enc = encoders.Encoder(name)
        bad = [s[:60] for s in texts if enc.count(s) != len(_reference_ids(encoding, name, s))]
        assert not bad, f"{name}: {len(bad)} of {len(texts)} texts, e.g. {bad[:3]}"
        by_pieces = sum(len(s) for s in texts if counter.count(s) is not None)
        assert by_pieces > 0.5 * sum(map(len, texts)), name  # most of it is counted here, not by the fallback


def test_the_memo_starts_over_when_full_and_counts_stay_right(refs: dict[str, Any]) -> None:
    encoding, _ = refs["cl100k_base"]
    counter = _counter("cl100k_base")
    words = ("".join(w) for w in itertools.product(string.ascii_lowercase, repeat=4))
    text = " ".join(itertools.islice(words, 600_000))  # 600,000 distinct pieces (" abcd")
    want = len(encoding.encode_ordinary(text))
    assert counter.count(text) == want
    assert 0 < counter.remembered() <= 2**19
    assert counter.count(text) == want


#: Bytes the merge meets: ASCII, UTF-8 of several lengths, bytes no text makes.
piece_bytes = st.lists(st.sampled_from([b"a", b"b", b"e", b"t", b"h", b" ", b"=", b"-", b"0", b"\n",
                                        "é".encode(), "中".encode(), "😀".encode(), b"\xff", b"\x80", b"\x00"]),
                       min_size=1, max_size=200).map(b"".join)


@settings(deadline=None, max_examples=300)
@given(piece_bytes, st.sampled_from(NAMES))
@example(b"ab" * 100, "cl100k_base")
@example(b"=" * 129, "o200k_base")
def test_the_merge_is_tiktokens_short_and_long(refs: dict[str, Any], piece: bytes, name: str) -> None:
    encoding, counter = refs[name]
    assert counter.tokens(piece) == encoding._core_bpe.encode_single_piece(piece)


@pytest.mark.parametrize("n", [129, 1_000, 100_000])
def test_long_pieces_merge_in_n_log_n_as_tiktoken_does(refs: dict[str, Any], n: int) -> None:
    encoding, counter = refs["cl100k_base"]
    for s in ("a" * n, "=-" * (n // 2), "ab" * (n // 2), ("the" * n)[:n]):
        assert counter.count(s) == len(encoding.encode_ordinary(s)), (n, s[:6])


def test_a_vocabulary_that_does_not_read_exactly_is_refused(tmp_path: Any) -> None:
    path = encoders.vocab_path("cl100k_base")
    assert path is not None
    good = open(path, "rb").read()
    first = 4 + 2 + int.from_bytes(good[4:6], "little")  # the first token's rank
    second = first + 4 + 2 + int.from_bytes(good[first + 4:first + 6], "little") + 4  # the second token's end
    entry = good[4:first + 4]
    token_twice = good[:4] + entry + good[4:first] + good[second - 4:second]  # token 1's bytes, token 2's rank
    rank_twice = good[:4] + entry + good[first + 4:second - 4] + good[first:first + 4]  # token 2's bytes, token 1's rank
    for name, data in (("truncated", good[:-3]), ("extra", good + b"\0"), ("empty", b""),
                       ("count", (5).to_bytes(4, "little") + good[4:]),
                       ("rank", good[:first] + (2**31).to_bytes(4, "little") + good[first + 4:]),
                       ("token twice", token_twice + good[second:]), ("rank twice", rank_twice + good[second:])):
        (tmp_path / name).write_bytes(data)
        assert pieces.piece_counter("cl100k_base", str(tmp_path / name)) is None, name
    assert pieces.piece_counter("cl100k_base", str(tmp_path / "missing")) is None
    with pytest.raises(ValueError):
        pieces._PIECES.Counter(4, good)
    counter = pieces._PIECES.Counter(0, good)
    with pytest.raises(RuntimeError):
        counter.__init__(0, good)  # made once: its table is not rebuilt under a running count
    with pytest.raises(TypeError):
        counter.set_table(bytearray(10))
    with pytest.raises(TypeError):
        counter.count(b"bytes")
    with pytest.raises(TypeError):
        pieces._PIECES.Counter.__new__(pieces._PIECES.Counter).count("no vocabulary")


def test_a_collection_during_pieces_that_counts_on_the_same_counter_changes_nothing(refs: dict[str, Any]) -> None:
    """pieces() allocates: a __del__ the collector runs there may count on the same counter (found
    by an attack: it overwrote the classes pieces() was reading). It gets None, and pieces() its
    own split."""
    import gc

    counter = _counter("cl100k_base")
    s = "hello world, it's 12345 " * 4
    inner: list[Any] = []

    class Bomb:
        def __del__(self) -> None:
            inner.append(counter.count("1" * 100_000))
            counter.set_table(pieces.class_table(encoders.PIECE_RANGES))  # allowed at any time

    threshold, split, want = gc.get_threshold(), counter.pieces, PATTERNS["cl100k_base"].findall(s)
    try:
        for _ in range(20):
            bomb = Bomb()
            bomb.me = bomb  # type: ignore[attr-defined]
            del bomb
            keep = [[] for _ in range(200)]  # no free list: pieces()' own list is a new allocation
            gc.set_threshold(1, 1, 1)
            got = split(s)  # the collection runs inside, at its first allocation
            gc.set_threshold(*threshold)
            assert got == want
            del keep
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert inner and None in inner
    assert counter.count("1" * 100_000) == len(refs["cl100k_base"][0].encode_ordinary("1" * 100_000))


def test_texts_counted_by_pieces_do_not_bring_quicktok_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """quicktok is built (0.3-0.8 s) only for what the pieces leave: here, nothing."""
    monkeypatch.setattr(encoders, "SWITCH_CHARS", 1_000)
    enc = encoders.Encoder("o200k_base")
    for i in range(200):
        enc.count(f"line {i} of a plain text, é and — too " * 3)
    assert enc.count == enc._count_before_switch and enc._quick is None
