"""The --resume checksum (files/checksum.py): the compiled crc32 (files/_crc.c, folded with
PCLMULQDQ) gives zlib.crc32's value for every buffer and start value, at every length around
its 64- and 16-byte steps, from any alignment, and chained as a growing output chains it."""

from __future__ import annotations

import os
import platform
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor_cli.files import checksum

_CRC = checksum._CRC


def _has_pclmul() -> bool:
    try:
        with open("/proc/cpuinfo") as fh:
            return any(line.startswith("flags") and " pclmulqdq" in line and " sse4_1" in line for line in fh)
    except OSError:
        return False


def test_the_folded_crc_is_built_and_used_where_the_processor_has_it() -> None:
    assert _CRC is not None, ("compactor_cli.files._crc is not in the installed package: the wheel was built "
                              "without a C compiler, or XCOMPACT_PURE_PYTHON is set")
    if platform.machine() in ("x86_64", "AMD64") and _has_pclmul():
        assert _CRC.ACCELERATED and checksum.crc32 is _CRC.crc32
    else:
        assert checksum.crc32 is zlib.crc32


_LENGTHS = sorted({n + d for n in (0, 16, 32, 48, 64, 80, 128, 192, 256, 1024, 4096, 65536) for d in (-1, 0, 1)
                   if n + d >= 0} | {15, 17, 63, 65, 79, 95, 111, 127, 129, 143, 1000, 65535, 65537, 1 << 20})


@pytest.mark.parametrize("n", _LENGTHS)
def test_every_length_around_the_steps(n: int) -> None:
    data = os.urandom(n)
    for value in (0, 1, 0xFFFFFFFF, 0x12345678, zlib.crc32(b"seed")):
        assert _CRC.crc32(data, value) == zlib.crc32(data, value), (n, value)
    assert _CRC.crc32(data) == zlib.crc32(data)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=700), st.integers(0, 0xFFFFFFFF), st.integers(0, 31))
def test_any_bytes_any_start_any_alignment(data: bytes, value: int, skip: int) -> None:
    view = memoryview(bytes(skip) + data)[skip:]  # the same bytes starting at another address
    assert _CRC.crc32(view, value) == zlib.crc32(data, value)
    assert _CRC.crc32(bytearray(data), value) == zlib.crc32(data, value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=12))
def test_chained_as_an_output_grows(pieces: list[bytes]) -> None:
    crc = 0
    for piece in pieces:
        crc = _CRC.crc32(piece, crc)
    assert crc == zlib.crc32(b"".join(pieces))


def test_start_values_beyond_32_bits_are_taken_as_zlib_takes_them() -> None:
    data = os.urandom(200)
    for value in (-1, 1 << 32, (1 << 40) + 7):
        assert _CRC.crc32(data, value) == zlib.crc32(data, value)


def test_what_is_not_bytes_is_refused_as_zlib_refuses_it() -> None:
    for bad in ("text", 3, None):
        with pytest.raises(TypeError):
            zlib.crc32(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            _CRC.crc32(bad)
