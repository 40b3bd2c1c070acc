"""Reading a tokenizer's .vocab file compiled (model/_vocab.c, issue 32) gives exactly what the
Python reading gives: the same ranks for quicktok's four real files, and the same None for every
file that does not read exactly so (cut short, a byte too many, a count that lies, a token twice,
ranks that are not 0..n-1), on generated files too."""

from __future__ import annotations

import os
import struct
from importlib.util import find_spec

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.model import encoders
from compactor_cli.model.encoders import SPECS, parse_ranks


def _compiled(data: bytes) -> dict[bytes, int] | None:
    assert encoders._VOCAB is not None
    return encoders._VOCAB.ranks(data)  # type: ignore[no-any-return]


def vocab(tokens: list[tuple[bytes, int]], count: int | None = None) -> bytes:
    out = [struct.pack("<I", len(tokens) if count is None else count)]
    for token, rank in tokens:
        out.append(struct.pack("<H", len(token)) + token + struct.pack("<I", rank))
    return b"".join(out)


def test_the_compiled_reading_is_built() -> None:
    assert encoders._VOCAB is not None, (
        "compactor_cli.model._vocab is not in the installed package: the wheel was built without a C "
        "compiler, or XCOMPACT_PURE_PYTHON is set")


def _real_files() -> list[str]:
    spec = find_spec("quicktok")
    assert spec is not None and spec.submodule_search_locations
    root = os.path.join(next(iter(spec.submodule_search_locations)), "data")
    return [os.path.join(root, spec_[1]) for spec_ in SPECS.values()]


@pytest.mark.parametrize("path", _real_files(), ids=os.path.basename)
def test_quicktoks_real_vocabularies(path: str) -> None:
    with open(path, "rb") as fh:
        data = fh.read()
    found = _compiled(data)
    assert found is not None and found == parse_ranks(data) and len(found) > 50_000
    assert list(found.items())[:50] == list(parse_ranks(data).items())[:50]  # type: ignore[union-attr]
    for cut in (3, 4, 5, 6, len(data) // 2, len(data) - 1):
        assert _compiled(data[:cut]) is None and parse_ranks(data[:cut]) is None
    assert _compiled(data + b"\0") is None and parse_ranks(data + b"\0") is None


@pytest.mark.parametrize("data", [
    b"", b"\0\0\0", vocab([]), vocab([(b"a", 0)]), vocab([(b"a", 1)]), vocab([(b"a", 0), (b"a", 1)]),
    vocab([(b"a", 0), (b"b", 0)]), vocab([(b"a", 0), (b"b", 2)]), vocab([(b"", 0)]), vocab([(b"a", 0)], count=2),
    vocab([(b"a", 0), (b"b", 1)], count=1), vocab([(b"x" * 70_000, 0)][:0]), vocab([(b"b", 1), (b"a", 0)]),
    vocab([(b"a", 2**32 - 1)]), vocab([(b"a", 0)], count=2**32 - 1),
    vocab([(b"a", 1), (b"b", 1)]), vocab([(b"a", 2), (b"b", 1), (b"c", 2)]),  # n-1 the largest, 0 missing
], ids=repr)
def test_files_that_do_or_do_not_read_exactly_so(data: bytes) -> None:
    assert _compiled(data) == parse_ranks(data)


tokens = st.lists(st.tuples(st.binary(max_size=6), st.integers(0, 12) | st.integers(0, 3)), max_size=10)


@settings(max_examples=400)
@given(tokens, st.one_of(st.none(), st.integers(0, 14)), st.integers(0, 8), st.binary(max_size=3))
def test_on_generated_files(toks: list[tuple[bytes, int]], count: int | None, cut: int, tail: bytes) -> None:
    data = vocab(toks, count)
    for variant in (data, data[:max(0, len(data) - cut)], data + tail):
        assert _compiled(variant) == parse_ranks(variant)


@given(st.lists(st.binary(min_size=1, max_size=5), unique=True, max_size=12), st.randoms())
def test_on_generated_vocabularies_that_read(toks: list[bytes], rnd: object) -> None:
    ranks = list(range(len(toks)))
    rnd.shuffle(ranks)  # type: ignore[attr-defined]
    data = vocab(list(zip(toks, ranks, strict=True)))
    assert _compiled(data) == parse_ranks(data) == dict(zip(toks, ranks, strict=True))
