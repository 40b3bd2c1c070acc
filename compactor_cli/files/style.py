"""The serialisation style of a record, so that restore gives back the input's bytes.

xcompact writes a record it rewrites in its own form (a compact orjson line, or a document
indented by two spaces). A record that came in another common form — Python's ``json.dumps``
default (``", "`` and ``": "``), with or without ``ensure_ascii``, an indented document, a
``JSON.stringify`` line — has its style recorded in ``xcompact.style`` of the rewritten record::

    {"separators": [", ", ": "], "ensure_ascii": false, "indent": null, "end": "\\n"}

(the arguments of ``json.dumps``, and the bytes after the value: the line's end, or a
document's trailing white space). Restore, once everything is given back and the bookkeeping
goes, writes the record with that style: the input's bytes for every input those writers made.
The style is read cheaply, from the separators after the first key and the first value and from
whether the bytes are all ASCII; it is not proved by writing the record again.
"""

from __future__ import annotations

import re
from typing import Any

from ..model.checks import style_problem
from ..model.conversation import STYLE_FIELD as STYLE_FIELD
from .exact import json_exact

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SPECIAL = re.compile(rb'[":,]')
_SPACE = b" \t\r\n"
#: A \\u escape of a character beyond ASCII (what ensure_ascii writes).
_NON_ASCII_ESCAPE = re.compile(rb"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})")
_MAX_INDENT = 16


def _default(form: str) -> dict[str, Any]:
    """The style xcompact writes records of ``form`` in (records.dump_bytes)."""
    if form == "jsonl":
        return {"separators": [",", ":"], "ensure_ascii": False, "indent": None, "end": "\n"}
    return {"separators": [",", ": "], "ensure_ascii": False, "indent": 2, "end": "\n"}


def _after(raw: bytes, pos: int) -> bytes:
    """The separator at ``pos`` (its comma or colon with the spaces and tabs around it up to the next token)."""
    end = pos + 1
    while end < len(raw) and raw[end] in b" \t":
        end += 1
    start = pos
    while start > 0 and raw[start - 1] in b" \t":
        start -= 1
    return raw[start:end]


def detect_style(raw: bytes, form: str) -> dict[str, Any] | None:
    """The style ``raw`` (one record: a JSONL line with its end, or a whole document) was written
    in, or None when it is xcompact's own for ``form`` or cannot be told."""
    if raw.startswith(b"\xef\xbb\xbf"):  # a byte-order mark: read past, and not written back
        raw = raw[3:]
    body = raw.rstrip(_SPACE)
    if body[:1] in (b" ", b"\t", b"\r", b"\n"):  # leading white space: not a style json.dumps writes
        return None
    if not body or body[:1] not in b"{[":
        return None
    trail = raw[len(body):]
    indent: int | str | None = None
    if body[1:2] in (b"\n", b"\r"):
        if form == "jsonl" or b"\r" in body[1:3]:
            return None
        j = 2
        while j < len(body) and body[j] in b" \t":
            j += 1
        text = body[2:j].decode()
        if not text or len(text) > _MAX_INDENT:
            return None
        indent = len(text) if set(text) == {" "} else text
    item = key = None
    pos = 1
    while pos < len(body) and (item is None or key is None):
        m = _SPECIAL.search(body, pos)
        if m is None:
            break
        pos = m.start()
        c = body[pos:pos + 1]
        if c == b'"':
            s = _STRING.match(body, pos)
            if s is None:
                return None
            pos = s.end()
            continue
        if c == b":" and key is None:
            key = _after(body, pos).decode()
        elif c == b"," and item is None:
            item = _after(body, pos).decode()
        pos += 1
    if key is None and item is None:
        return None  # nothing to tell the style by: {"messages":[]}
    if key is None:
        key = ": " if item == ", " or indent is not None else ":"
    if item is None:
        item = ", " if key == ": " and indent is None else ","
    default = _default(form)
    layout = {"separators": [item, key], "indent": indent}
    own_layout = all(default[k] == v for k, v in layout.items())
    # all ASCII: ensure_ascii when it escapes a character beyond ASCII, or (either would do) when
    # the layout is not xcompact's own anyway (json.dumps' default); never for raw UTF-8. The
    # layout first, then a substring test: the pattern would otherwise scan the whole record for
    # an escape (a sixth of what a rewritten tau-bench record cost, issue 32)
    ascii_ = raw.isascii() and (not own_layout or (b"\\u" in body and _NON_ASCII_ESCAPE.search(body) is not None))
    end = ("\r\n" if trail.endswith(b"\r\n") else "\n") if form == "jsonl" else trail.decode()
    style = {"separators": [item, key], "ensure_ascii": ascii_, "indent": indent, "end": end}
    if style == default or style_problem(style, form) is not None:
        return None
    return style


def dump_styled(obj: Any, style: dict[str, Any], form: str) -> bytes | None:
    """``obj`` written in ``style`` (integers of any size and every ExactFloat as read), or None
    when the style does not suit the record (a lone surrogate without ensure_ascii, a line end
    that is no line end for JSONL, nesting Python's json cannot write): then xcompact's own form."""
    if style_problem(style, form) is not None:
        return None
    try:
        item, key = style["separators"]
        out = json_exact(obj, separators=(item, key), ensure_ascii=style["ensure_ascii"], indent=style["indent"])
        end: str = style["end"]
        return (out + end).encode("utf-8")
    except (UnicodeEncodeError, RecursionError, ValueError, TypeError):
        return None
