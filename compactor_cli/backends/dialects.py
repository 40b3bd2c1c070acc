"""The structured-output dialects OpenAI-compatible servers speak, and how their refusals read.

``json_schema`` (OpenAI, llama.cpp's llama-server, vLLM) and ``json_object`` with a ``schema``
(llama-cpp-python's grammar-constrained mode) ask for the eight sections as the fields of a JSON
schema; ``markdown`` asks for ``## `` headings. ``--structured auto`` walks LADDER down when a
server refuses one (backends/openai_backend.py)."""

from __future__ import annotations

import re
from typing import Any

from .sections import SECTIONS

SUMMARY_SCHEMA = {"type": "object", "properties": {s: {"type": "string"} for s in SECTIONS},
                  "required": list(SECTIONS), "additionalProperties": False}
#: The structured-output dialects, in the order ``--structured auto`` tries them.
LADDER = ("json_schema", "json_object", "markdown")
RESPONSE_FORMATS: dict[str, dict[str, Any]] = {
    "json_schema": {"type": "json_schema",
                    "json_schema": {"name": "conversation_summary", "strict": True, "schema": SUMMARY_SCHEMA}},
    # llama-cpp-python's documented JSON-schema mode: decoding constrained to the schema
    "json_object": {"type": "json_object", "schema": SUMMARY_SCHEMA},
}
MIN_FIELD_CHARS = 160  # the smallest maxLength of a field (json_object)
#: the largest: llama-cpp-python 0.3.36 writes maxLength N as N nested optional groups, and its
#: llama.cpp refuses a string field of more than about 1,000 of them, whereupon the server process
#: segfaults (measured: 1,000 taken, 1,012 kills it); 800 keeps a margin
MAX_FIELD_CHARS = 800
# statuses with which servers refuse a request they do not understand (llama-cpp-python: 500)
REJECT_STATUSES = (400, 415, 422, 500, 501)
NAMES_FORMAT = re.compile(r"(?i)response_format|json_schema|json_object|response format|\bschema\b")
WINDOW = re.compile(r"(?i)(?:context (?:window|length|size) (?:of|is)|maximum context length is|n_ctx\W{0,4}"
                    r"|context size \(?)\s*(\d{3,7})")
CONTEXT_ERROR = re.compile(r"(?i)context.{0,20}(length|window|size)|too many tokens|too long|maximum.{0,30}tokens|"
                           r"context_length_exceeded|exceeds? the")


def normalize_structured(value: str) -> str:
    """``json`` (the earlier name) is json_schema."""
    return "json_schema" if value == "json" else value


def field_chars(max_tokens: int, n_fields: int) -> int:
    """The maxLength of each field in a json_object request: twice its share of the answer (at
    about four characters a token), so that no field can take the whole answer; never more than
    a llama-cpp-python server survives (MAX_FIELD_CHARS)."""
    return min(MAX_FIELD_CHARS, max(MIN_FIELD_CHARS, max_tokens * 8 // max(1, n_fields)))


def field_cap(mode: str, max_tokens: int, fields: tuple[str, ...] = SECTIONS) -> int | None:
    return field_chars(max_tokens, len(fields)) if mode == "json_object" else None


def response_format(mode: str, fields: tuple[str, ...] = SECTIONS, max_tokens: int | None = None) -> dict[str, Any]:
    """The ``response_format`` of a JSON mode, asking for ``fields`` (all eight, or those a
    repair turn asks for). json_object (llama-cpp-python's grammar-constrained mode) bounds each
    field with maxLength when ``max_tokens`` is given: a small model copying the transcript or
    looping inside one field is then made to close it and go on to the next."""
    if mode == "json_object":
        string: dict[str, Any] = {"type": "string"}
        if max_tokens:
            string["maxLength"] = field_chars(max_tokens, len(fields))
        return {"type": "json_object", "schema": {"type": "object", "properties": dict.fromkeys(fields, string),
                                                  "required": list(fields), "additionalProperties": False}}
    if tuple(fields) == SECTIONS:
        return RESPONSE_FORMATS[mode]
    schema = {"type": "object", "properties": {s: {"type": "string"} for s in fields}, "required": list(fields),
              "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "missing_sections", "strict": True, "schema": schema}}


def is_json_mode(mode: str) -> bool:
    return mode != "markdown"


def window_of(reason: str) -> int | None:
    """The context window a server's error names (llama-cpp-python, llama-server, vLLM, OpenAI)."""
    m = WINDOW.search(reason)
    return int(m.group(1)) if m else None
