"""The checksum a resumed run proves its partial output by (journal.py): zlib's crc32 of every
byte written, folded with the processor's carry-less multiply where it has one (files/_crc.c,
three times as fast as the system zlib's tables), else zlib.crc32 itself. Same values either way.
And the SHA-1 that names lock, partial and journal files."""

from __future__ import annotations

import zlib
from collections.abc import Callable

from ..model.compiled import extension

try:  # CPython's own SHA-1 (built in): hashlib loads OpenSSL, 12 M instructions of start-up for short names
    from _sha1 import sha1 as sha1
except ImportError:  # a Python built without it
    from hashlib import sha1 as sha1

_CRC = extension("_crc", __package__)

#: crc32(data, value=0) -> zlib.crc32(data, value)
crc32: Callable[..., int] = _CRC.crc32 if _CRC is not None and _CRC.ACCELERATED else zlib.crc32
