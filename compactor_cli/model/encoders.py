"""The encoders behind TokenCounter: exact, offline, and quick to start.

tiktoken is the reference (it is OpenAI's own tokenizer, and Meta's and Qwen's constructions
are tiktoken-rank BPE); quicktok-v1 ships the four vocabularies and an encoder about five times
faster, whose ids equal tiktoken's wherever both read the characters alike. Three counters, one
count:

- **By pieces** (model/_pieces.c, model/pieces.py), first: the text split with the encoding's
  pattern by hand, each distinct piece merged once on quicktok's ranks by tiktoken's algorithm
  and remembered. It takes texts of ASCII and of the characters of PIECE_RANGES (qwen: ASCII
  only, for its NFC) and needs nothing built but the ranks' table (milliseconds).
- **tiktoken** on quicktok's ranks under the encoding's published pattern, built on first need
  (0.1-0.3 s), for the texts the pieces leave; once a run has counted SWITCH_CHARS characters so,
  **quicktok** takes every such text inside AGREED_RANGES (building it takes 0.3-0.8 s, more than a
  whole small run, so a small run never pays for it). Texts outside them stay with
  tiktoken: quicktok's Unicode tables are newer than tiktoken's, and letters added in recent
  Unicode versions count differently (U+323B0 followed by "'s": 6 tokens in tiktoken, 5 in
  quicktok).

So a count never depends on which counter made it, and always equals tiktoken's. Where the ranks
cannot be read as expected (a quicktok release with another file layout) or tiktoken cannot build
the encoder, quicktok counts everything the pieces leave.
"""

from __future__ import annotations

import os
import re
import struct
import unicodedata
from collections.abc import Callable
from importlib.util import find_spec
from typing import Any

from .compiled import extension
from .pieces import SCRIPT_BLOCKS, SYMBOL_BLOCKS, class_table, piece_counter

#: Characters the reference encoder counts before quicktok is built: about 0.2 s of
#: tiktoken's encoding, less than quicktok's build (0.3-0.8 s), so a small run never pays for
#: the build and a large one pays at most that much more than building quicktok first.
SWITCH_CHARS = 2 * 2**20

#: Our name -> (quicktok's name, its .vocab file, the pre-tokenisation pattern, NFC first).
#: cl100k_base and o200k_base: tiktoken_ext.openai_public; llama3: Meta's Llama 3 tokenizer.py;
#: qwen: Qwen2's tokenizer (Hugging Face), which normalises to NFC before splitting.
SPECS: dict[str, tuple[str, str, str, bool]] = {
    "cl100k_base": ("cl100k_base", "cl100k.vocab",
                    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
                    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""", False),
    "o200k_base": ("o200k_base", "o200k.vocab", "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
    ]), False),
    "llama3": ("llama3", "llama3.vocab",
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+", False),
    "qwen": ("qwen3", "qwen3.vocab",
             r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+", True),
}

#: Texts both encoders read alike: made only of characters assigned by Unicode 10 (older than any
#: table in play: Python 3.10's unicodedata is Unicode 13) in blocks without later additions that
#: are letters, marks or digits, whose NFC is fixed (the normalisation stability policy), so
#: tiktoken's tables, quicktok's and this Python's unicodedata agree on them. Emoji and
#: other symbols are never letters, marks or digits, so new ones do not matter. Any other text
#: (CJK extensions, scripts with characters added since, unassigned code points, lone
#: surrogates) is counted by tiktoken, the reference. U+0295 (ʕ) is left out: a recent Unicode
#: made it Lo from Ll (the ``regex`` module's tables have it so, tiktoken's and Python 3.11's
#: not yet), and o200k splits "ʕEa" by it.
AGREED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0294), (0x0296, 0x0377), (0x037A, 0x037F), (0x0384, 0x038A), (0x038C, 0x038C),
    (0x038E, 0x03A1), (0x03A3, 0x04FF), (0x2000, 0x2064), (0x2066, 0x206F), (0x20A0, 0x20BF),
    (0x2190, 0x23FF), (0x2500, 0x27BF), (0x3000, 0x303F), (0x3041, 0x3096), (0x3099, 0x30FF),
    (0x4E00, 0x9FEA), (0xAC00, 0xD7A3), (0xFF01, 0xFF60), (0x1F300, 0x1F64F), (0x1F680, 0x1F6C5))
_BOTH_AGREE: list[re.Pattern[str]] = []


def both_agree(s: str) -> bool:
    """``s`` is made of AGREED_RANGES only. The pattern is compiled on first need (2 ms: a run
    counting no text outside PIECE_RANGES never needs it)."""
    if not _BOTH_AGREE:
        _BOTH_AGREE.append(re.compile("[" + "".join(re.escape(chr(lo)) + ("" if lo == hi else "-" + re.escape(chr(hi)))
                                                    for lo, hi in AGREED_RANGES) + "]*"))
    return _BOTH_AGREE[0].fullmatch(s) is not None

#: The characters model/_pieces.c's split reads (model/pieces.py).
PIECE_RANGES = tuple(sorted(AGREED_RANGES + SYMBOL_BLOCKS + SCRIPT_BLOCKS))

_quicktok: dict[str, Any] = {}
_encoders: dict[str, Encoder] = {}


def quicktok_tokenizer(name: str) -> Any:
    """quicktok's tokenizer for one of SPECS, built once per process."""
    found = _quicktok.get(name)
    if found is None:
        import quicktok

        found = _quicktok[name] = quicktok.get_encoding(SPECS[name][0])
    return found


#: encoders' parse of a .vocab file compiled (model/_vocab.c), or None (compiled.py).
_VOCAB = extension("_vocab")


def read_ranks(path: str) -> dict[bytes, int] | None:
    """The ranks in a quicktok .vocab file (u32 count, then per token: u16 length, the bytes,
    u32 rank), or None when the file does not read exactly so (every byte used, ranks 0..n-1)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return _VOCAB.ranks(data) if _VOCAB is not None else parse_ranks(data)


def parse_ranks(data: bytes) -> dict[bytes, int] | None:
    """read_ranks of the file's bytes, in Python (what model/_vocab.c does faster)."""
    if len(data) < 4:
        return None
    (n,) = struct.unpack_from("<I", data, 0)
    ranks: dict[bytes, int] = {}
    off, end = 4, len(data)
    u16, u32 = struct.Struct("<H").unpack_from, struct.Struct("<I").unpack_from
    try:
        for _ in range(n):
            (length,) = u16(data, off)
            start = off + 2
            off = start + length
            ranks[data[start:off]] = u32(data, off)[0]
            off += 4
    except struct.error:
        return None
    if off != end or len(ranks) != n or min(ranks.values(), default=0) != 0 or max(ranks.values(), default=-1) != n - 1:
        return None
    return ranks


def vocab_path(name: str) -> str | None:
    """The .vocab file quicktok ships for ``name``, or None when quicktok is not installed."""
    spec = find_spec("quicktok")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "data", SPECS[name][1])


def reference_encoding(name: str) -> Any:
    """tiktoken's Encoding of quicktok's ranks under ``name``'s pattern, or None when it cannot be
    made exactly so."""
    path = vocab_path(name)
    ranks = read_ranks(path) if path is not None else None
    if ranks is None:
        return None
    try:
        import tiktoken
    except ImportError:
        return None
    return tiktoken.Encoding(f"xcompact-{name}", pat_str=SPECS[name][2], mergeable_ranks=ranks, special_tokens={})


def reference_encoder(name: str) -> Callable[[str], list[int]] | None:
    """tiktoken's BPE on quicktok's ranks for ``name`` (NFC first for qwen), or None when it
    cannot be made exactly so."""
    encoding = reference_encoding(name)
    if encoding is None:
        return None
    encode: Callable[[str], list[int]] = encoding.encode_ordinary
    if not SPECS[name][3]:
        return encode
    normalize = unicodedata.normalize
    return lambda s: encode(normalize("NFC", s))


class Encoder:
    """Counts tokens of texts in one encoding (see the module's docstring): ``count``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._left = SWITCH_CHARS
        #: Counts by pieces where it can (model/pieces.py): texts of ASCII or of its table's
        #: characters (qwen: ASCII only, for its NFC). tiktoken is built only for what it leaves.
        path = vocab_path(name)
        self._pieces = piece_counter(name, path) if path is not None else None
        self._table_given = name == "qwen"
        self._reference: Callable[[str], list[int]] | None = None
        self._built = False
        self._quick: Callable[[str], int] | None = None
        self.count: Callable[[str], int] = self._count_before_switch
        if self._pieces is None and self._reference_encoder() is None:
            self.count = self._fast()  # tiktoken cannot be built: quicktok counts from the start

    def _reference_encoder(self) -> Callable[[str], list[int]] | None:
        """tiktoken's encode, built on first use (0.1 s), or None where it cannot be built."""
        if not self._built:
            self._built = True
            try:
                self._reference = reference_encoder(self.name)
            except Exception:  # noqa: BLE001  tiktoken could not build it: quicktok counts instead
                self._reference = None
        return self._reference

    def _by_pieces(self, s: str) -> int | None:
        """The count by pieces (model/_pieces.c), or None where it gives none."""
        assert self._pieces is not None
        n: int | None = self._pieces.count(s)
        if n is None and not self._table_given and not s.isascii():
            self._pieces.set_table(class_table(PIECE_RANGES))
            self._table_given = True
            n = self._pieces.count(s)
        return n

    def _count_before_switch(self, s: str) -> int:
        if self._pieces is not None:
            n = self._by_pieces(s)
            if n is not None:
                return n
        reference = self._reference_encoder()
        if reference is None:  # tiktoken cannot be built: quicktok counts what the pieces leave
            self._quick = self._fast()
            self.count = self._count_after_switch
            return self._quick(s)
        if s.isascii() or both_agree(s):
            self._left -= len(s)
            if self._left < 0:
                self._quick = self._fast()
                self.count = self._count_after_switch
                return self._quick(s)
        return len(reference(s))  # tiktoken's encode_ordinary cleans lone surrogates itself

    def _count_after_switch(self, s: str) -> int:
        if self._pieces is not None:
            n = self._by_pieces(s)
            if n is not None:
                return n
        reference = self._reference
        if reference is None or s.isascii() or both_agree(s):
            quick = self._quick
            assert quick is not None
            return quick(s)
        return len(reference(s))

    def _fast(self) -> Callable[[str], int]:
        count: Callable[[str], int] = quicktok_tokenizer(self.name).count

        def encode_len(s: str) -> int:
            try:
                return count(s)
            except TypeError:  # a lone surrogate: not a str pybind11 can pass on
                return count(_clean(s))

        return encode_len


def encoder(name: str) -> Encoder:
    """The process's encoder for ``name`` (one of SPECS); an unknown name is a ValueError."""
    found = _encoders.get(name)
    if found is None:
        if name not in SPECS:
            raise ValueError(f"unknown encoding {name!r}")
        found = _encoders[name] = Encoder(name)
    return found


def _clean(s: str) -> str:
    """A lone surrogate cannot be UTF-8: replaced as tiktoken does (U+FFFD)."""
    return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
