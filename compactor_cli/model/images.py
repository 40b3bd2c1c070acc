"""Image parts: what they are (MIME type, size) and what they cost in tokens.

A model is not sent an image's base64 text: vendors bill images by their pixels. OpenAI (chat
``image_url``, Responses ``input_image``): 85 tokens at ``detail: low``, else the image is
scaled to fit 2048x2048 and its short side to 768, and costs 85 + 170 per 512-pixel tile.
Anthropic (``image`` blocks): about width x height / 750 tokens, after scaling the long side to
1,568 pixels. The size comes from the image's header (PNG, JPEG, GIF, WebP), read from the
first bytes of its base64 data; an image whose size cannot be read (a URL, another format)
counts as a 1024x1024 one.
"""

from __future__ import annotations

import binascii
import math
import re
import struct
from typing import Any

IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
_DATA_URL = re.compile(r"data:([\w.+/-]+);base64,", re.I)
_UNKNOWN = (1024, 1024)


def is_image_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES


def _source(part: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(MIME type, base64 data, detail) of an image part, each None when it has none."""
    t = part.get("type")
    if t == "image":  # Anthropic
        src = part.get("source")
        if isinstance(src, dict) and src.get("type") == "base64" and isinstance(src.get("data"), str):
            mime = src.get("media_type")
            return (mime if isinstance(mime, str) else None), src["data"], None
        return None, None, None
    url: Any = part.get("image_url")
    detail = part.get("detail")
    if isinstance(url, dict):
        detail = url.get("detail", detail)
        url = url.get("url")
    if not isinstance(url, str):
        return None, None, detail if isinstance(detail, str) else None
    m = _DATA_URL.match(url)
    if m is None:
        return None, None, detail if isinstance(detail, str) else None
    return m.group(1).lower(), url[m.end():], detail if isinstance(detail, str) else None


def _header(data: str, n: int = 64 * 1024) -> bytes:
    import base64  # only a run with images reads their headers

    chunk = data[: n - n % 4]
    try:
        return base64.b64decode(chunk + "=" * (-len(chunk) % 4), validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from an image's first bytes, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        w, h = struct.unpack(">II", head[16:24])
        return (w, h) if w and h else None
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        w, h = struct.unpack("<HH", head[6:10])
        return (w, h) if w and h else None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and len(head) >= 30:
        kind = head[12:16]
        if kind == b"VP8X":
            return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
        if kind == b"VP8 " and len(head) >= 30:
            w, h = struct.unpack("<HH", head[26:30])
            return (w & 0x3FFF, h & 0x3FFF) if w and h else None
        if kind == b"VP8L" and len(head) >= 25:
            bits = int.from_bytes(head[21:25], "little")
            return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
        return None
    if head[:2] == b"\xff\xd8":  # JPEG: the first start-of-frame marker
        i = 2
        while i + 9 <= len(head):
            if head[i] != 0xFF:
                i += 1
                continue
            marker = head[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = int.from_bytes(head[i + 2:i + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                h, w = struct.unpack(">HH", head[i + 5:i + 9])
                return (w, h) if w and h else None
            i += 2 + length
    return None


def image_tokens(part: dict[str, Any]) -> int:
    """What a model is billed for an image part, by its vendor's published formula."""
    _, data, detail = _source(part)
    size = image_size(_header(data)) if data else None
    width, height = size or _UNKNOWN
    w, h = float(width), float(height)
    if part.get("type") == "image":  # Anthropic
        scale = min(1.0, 1568 / max(w, h))
        return max(1, math.ceil((w * scale) * (h * scale) / 750))
    if detail == "low":
        return 85
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def image_label(part: dict[str, Any]) -> str:
    """``image/png, ~34 KB`` (what a placeholder says of the image it stands for)."""
    mime, data, _ = _source(part)
    kind = mime or ("image URL" if part.get("type") != "image" else "image")
    if data is None:
        return kind
    return f"{kind}, ~{max(1, round(len(data) * 3 / 4 / 1024))} KB"
