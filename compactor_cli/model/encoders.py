"""The encoders behind TokenCounter: exact, offline, and quick to start.

quicktok-v1 ships the four vocabularies and the fastest encoder, but building its tokenizer is
0.4-1 s of C++ that holds the GIL (o200k_base the longest): more than a whole small run. tiktoken
builds a BPE encoder on the same ranks in a fraction of that and encodes at about a quarter of
quicktok's speed. So each encoding starts with tiktoken's BPE on quicktok's own ranks (read from
the .vocab file quicktok ships) under the encoding's published pattern, and moves to quicktok once
it has encoded SWITCH_CHARS characters, where quicktok's build has paid for itself. Both give the
same ids (tests/test_encodings.py compares each with tiktoken's official constructors and with
the other), so a count never depends on which encoder made it. Where the ranks cannot be read
as expected (a quicktok release with another file layout) or tiktoken is missing, quicktok is
built at once: slower to start, never a different count.
"""

from __future__ import annotations

import os
import struct
import unicodedata
from collections.abc import Callable
from importlib.util import find_spec
from typing import Any

#: Characters encoded with the quick-to-build encoder before quicktok is built: about 0.2 s of
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

_quicktok: dict[str, Any] = {}
_encoders: dict[str, Encoder] = {}


def quicktok_tokenizer(name: str) -> Any:
    """quicktok's tokenizer for one of SPECS, built once per process."""
    found = _quicktok.get(name)
    if found is None:
        import quicktok

        found = _quicktok[name] = quicktok.get_encoding(SPECS[name][0])
    return found


def read_ranks(path: str) -> dict[bytes, int] | None:
    """The ranks in a quicktok .vocab file (u32 count, then per token: u16 length, the bytes,
    u32 rank), or None when the file does not read exactly so (every byte used, ranks 0..n-1)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
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


def _quick_to_build(name: str) -> Callable[[str], list[int]] | None:
    """tiktoken's BPE on quicktok's ranks for ``name``, or None when it cannot be made exactly so."""
    spec = find_spec("quicktok")
    if spec is None or not spec.submodule_search_locations:
        return None
    _, vocab, pattern, nfc = SPECS[name]
    ranks = read_ranks(os.path.join(next(iter(spec.submodule_search_locations)), "data", vocab))
    if ranks is None:
        return None
    try:
        import tiktoken
    except ImportError:
        return None
    encode = tiktoken.Encoding(f"xcompact-{name}", pat_str=pattern, mergeable_ranks=ranks,
                               special_tokens={}).encode_ordinary
    if not nfc:
        return encode
    normalize = unicodedata.normalize
    return lambda s: encode(normalize("NFC", s))


class Encoder:
    """Counts tokens of texts in one encoding; ``count`` starts quick-to-build and becomes
    quicktok's after SWITCH_CHARS characters (see the module's docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._left = SWITCH_CHARS
        try:
            self._warm = _quick_to_build(name)
        except Exception:  # noqa: BLE001  tiktoken could not build it: quicktok counts from the start
            self._warm = None
        self.count: Callable[[str], int] = self._fast() if self._warm is None else self._count_warm

    def _count_warm(self, s: str) -> int:
        warm = self._warm
        if warm is None:  # another thread switched meanwhile
            return self.count(s)
        self._left -= len(s)
        if self._left < 0:
            self.count = self._fast()
            self._warm = None  # let the quick-to-build encoder go
            return self.count(s)
        return len(warm(s))  # tiktoken's encode_ordinary cleans lone surrogates itself

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
