"""Compressed inputs and outputs, chosen by the name's last suffix: ``.gz`` (gzip), ``.zst``
(Zstandard), ``.bz2`` (bzip2), ``.xz`` (xz). Everything is streamed both ways.

- Reading decodes frame after frame (a gzip member, a zstd frame, a bz2 or xz stream), so a
  file made of concatenated frames (``cat a.gz b.gz``, or an output a resumed run continued)
  reads as one stream. Data that ends inside a frame is an error, never a silent short read
  (zstandard's own stream reader returns what it has), and so is data that is not the codec's.
- Writing ends a frame at every checkpoint (only when something was written since the last),
  so the file on disk is always complete frames up to the checkpointed length: a resumed run
  truncates to it and starts a new frame, and the decompressed bytes are the uninterrupted
  run's. The compressed bytes of a small (one-frame) output are deterministic (no mtime, no
  name in the gzip header).

``zstandard`` is imported only when a ``.zst`` name is met, so start-up stays fast.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol

from ..errors import InvalidInputError

#: suffix -> codec name
CODECS = {".gz": "gzip", ".zst": "zstd", ".bz2": "bzip2", ".xz": "xz"}
SUFFIXES = tuple(CODECS)
#: Compressed bytes read at a time.
READ_CHUNK = 1 << 16
#: Decompressed bytes one decode call may give (gzip, bzip2, xz); a zstd decoder is fed
#: ZSTD_SLICE compressed bytes at a time, which expand to at most 16 MiB (a ratio a bomb reaches,
#: no real file). So a few KB that expand to gigabytes are decoded a bounded slice at a time,
#: and the record-size limit stops the line or document they form.
OUT_CHUNK = 1 << 20
ZSTD_SLICE = 512
#: The record-size limit: the longest JSONL line, JSON document or the lines of a Claude Code or
#: Codex file (four times it, since the whole file is one record) xcompact reads; larger is an
#: error naming the file and the line. 256 MiB is eight times the largest request an LLM API
#: takes (32 MB), so no real transcript line reaches it, and memory stays bounded by it whatever
#: the input (a device, a file with no newline, a decompression bomb). XCOMPACT_MAX_RECORD_BYTES
#: sets another limit.
DEFAULT_MAX_RECORD_BYTES = 256 << 20
LIMIT_VARIABLE = "XCOMPACT_MAX_RECORD_BYTES"
_FRAME = {"gzip": "member", "zstd": "frame", "bzip2": "stream", "xz": "stream"}


class CorruptInput(InvalidInputError):
    """Compressed data that cannot be decoded: truncated, damaged, or not the codec's at all."""


class RecordTooLarge(InvalidInputError):
    """A line or a document over the record-size limit (its reader says which line)."""


def max_record_bytes() -> int:
    """The record-size limit: XCOMPACT_MAX_RECORD_BYTES, else DEFAULT_MAX_RECORD_BYTES."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_RECORD_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        from ..errors import UsageError

        raise UsageError(f"{LIMIT_VARIABLE} must be a positive number of bytes (the record-size limit), "
                         f"got {text[:40]!r}")
    return value


def size_text(n: int) -> str:
    """``n`` bytes as a user reads a limit: "256 MiB", "1 GiB", "1000 bytes"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def too_large(what: str, limit: int, kind: str = "the record-size limit") -> RecordTooLarge:
    """The one line for a record over the limit (``what``: "line 3", "the JSON document"...)."""
    return RecordTooLarge(f"{what} is longer than {size_text(limit)}, {kind} (no transcript line is that long; "
                          f"set {LIMIT_VARIABLE} to raise it); the rest of the file is not read")


def codec_of(path: str | None) -> str | None:
    """The codec a name's suffix says (None: plain). stdin ("-") is always plain."""
    if not path or path == "-":
        return None
    return CODECS.get(os.path.splitext(path)[1].lower())


def plain_name(path: str) -> str:
    """The name without its compression suffix: what says JSONL or JSON (``x.jsonl.gz`` -> ``x.jsonl``)."""
    stem, suffix = os.path.splitext(path)
    return stem if suffix.lower() in CODECS else path


def _zstd() -> Any:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a declared dependency
        raise InvalidInputError("reading or writing .zst needs the zstandard package: pip install zstandard") from None
    return zstandard


class _Decoder(Protocol):
    eof: bool
    unused_data: bytes

    def decompress(self, data: bytes) -> bytes: ...


def _decoder_factory(codec: str) -> Callable[[], _Decoder]:
    if codec == "gzip":
        import zlib

        return lambda: zlib.decompressobj(wbits=31)  # type: ignore[return-value]
    if codec == "bzip2":
        import bz2

        return bz2.BZ2Decompressor  # type: ignore[return-value]
    if codec == "xz":
        import lzma

        return lzma.LZMADecompressor  # type: ignore[return-value]
    zstd = _zstd()
    dctx = zstd.ZstdDecompressor()
    return dctx.decompressobj  # type: ignore[no-any-return]


def _errors(codec: str) -> tuple[type[BaseException], ...]:
    """What a decoder raises for bad data (bz2's is OSError); zstandard's only for .zst."""
    import lzma
    import zlib

    found: list[type[BaseException]] = [zlib.error, lzma.LZMAError, EOFError, OSError, ValueError]
    if codec == "zstd":
        found.append(_zstd().ZstdError)
    return tuple(found)


class DecodedReader(io.RawIOBase):
    """The decompressed bytes of ``fh``, frame after frame; wrapped in a BufferedReader by
    ``open_decoded`` (readline, iteration, read1)."""

    def __init__(self, fh: BinaryIO, codec: str, own: bool = True) -> None:
        super().__init__()
        self.fh, self.codec, self.own = fh, codec, own
        self._new = _decoder_factory(codec)
        self._dec: _Decoder | None = None
        self._pending = memoryview(b"")
        self._tail = b""  # compressed bytes after the frame that just ended
        self.decoded = 0  # decompressed bytes handed out (for messages)
        self._errors = _errors(codec)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._pending:
            if not self._fill():
                return 0
        n = min(len(b), len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        self.decoded += n
        return n

    def _fill(self) -> bool:
        """Decode the next slice (at most OUT_CHUNK bytes, or a ZSTD_SLICE of input); False at
        the end of the data."""
        while True:
            dec = self._dec
            if dec is not None and not dec.eof and self.codec in ("bzip2", "xz") and not dec.needs_input:  # type: ignore[attr-defined]
                data = b""  # output the decoder holds back
            else:
                data, self._tail = (self._tail, b"") if self._tail else (self.fh.read(READ_CHUNK), b"")
                if not data:
                    if dec is not None and not dec.eof and self.codec == "gzip":
                        out = dec.decompress(b"", OUT_CHUNK)  # type: ignore[call-arg]  # a match cut by OUT_CHUNK
                        if out or dec.eof:
                            self._pending = memoryview(out)
                            return True
                    if dec is not None and not dec.eof:
                        raise CorruptInput(f"the {self.codec} data is truncated: it ends inside a "
                                           f"{_FRAME[self.codec]}, after {self.decoded} decompressed bytes")
                    return False
                if dec is None or dec.eof:
                    if dec is not None:
                        data = data.lstrip(b"\0")  # zero padding after a complete frame (tape-style): skipped
                        if not data:
                            continue
                    dec = self._dec = self._new()
            rest = b""
            try:
                if self.codec == "zstd":
                    data, rest = data[:ZSTD_SLICE], data[ZSTD_SLICE:]
                    out = dec.decompress(data)
                else:
                    out = dec.decompress(data, OUT_CHUNK)  # type: ignore[call-arg]
                    if self.codec == "gzip":
                        rest = dec.unconsumed_tail  # type: ignore[attr-defined]
            except self._errors as exc:
                detail = str(exc).rsplit(": ", 1)[-1]  # zlib: "Error -3 while decompressing data: ..."
                raise CorruptInput(f"not valid {self.codec} data ({detail}), after {self.decoded} decompressed "
                                   "bytes") from None
            self._tail = (dec.unused_data + rest) if dec.eof else rest
            self._pending = memoryview(out)
            return True

    def close(self) -> None:
        if not self.closed and self.own:
            self.fh.close()
        super().close()


def open_decoded(fh: BinaryIO, codec: str, own: bool = True) -> BinaryIO:
    """A buffered reader of the decompressed bytes of ``fh`` (not seekable: a resumed run reads
    from the start and skips to its offset, which is in decompressed bytes)."""
    return io.BufferedReader(DecodedReader(fh, codec, own), buffer_size=1 << 16)


# ---------------------------------------------------------------- writing


class Encoder(Protocol):
    def compress(self, data: bytes) -> bytes: ...
    def flush(self) -> bytes: ...


def new_encoder(codec: str) -> Encoder:
    """One frame's compressor; ``flush()`` ends the frame (a new encoder starts the next)."""
    if codec == "gzip":
        import zlib

        return zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip's default level; header without mtime or name
    if codec == "bzip2":
        import bz2

        return bz2.BZ2Compressor(9)
    if codec == "xz":
        import lzma

        return lzma.LZMACompressor(lzma.FORMAT_XZ, preset=6)
    zstd = _zstd()
    return zstd.ZstdCompressor(level=3, write_checksum=True).compressobj()  # type: ignore[no-any-return]


def compress_bytes(data: bytes, codec: str) -> bytes:
    """One whole frame (a Ray part, a small file written at once)."""
    enc = new_encoder(codec)
    return enc.compress(data) + enc.flush()


def decompress_bytes(data: bytes, codec: str, limit: int | None = None) -> bytes:
    """Every frame of ``data``, decoded; CorruptInput when it is truncated or damaged,
    RecordTooLarge when it decodes to more than ``limit`` bytes."""
    with open_decoded(io.BytesIO(data), codec) as fh:
        if limit is None:
            return fh.read()
        out = fh.read(limit + 1)
    if len(out) > limit:
        raise too_large(f"the decompressed {codec} data", limit)
    return out
