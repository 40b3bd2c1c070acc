"""What can be kept of a JSON summary cut off at the token limit.

A small model at temperature 0 (Qwen2.5-Coder-0.5B on a 20,000-token Claude Code head) can fall
into a loop inside one field and write until max_tokens, even under a frequency penalty. The
answer is then not valid JSON, but the fields before the loop are complete and the looping field
is good up to where it starts to repeat. Those are kept; the repair turn then asks only for the
fields still missing, and its chat shows the kept fields, not the loop (a model shown its own
loop tends to continue it)."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]

from .sections import SECTIONS, Reading, _json_text, read_answer, section_of, strip_thinking

_WS = re.compile(r"[ \t\n\r]*")
#: a field this close to its maxLength was stopped by it (strip() may take a few characters off)
CAP_SLACK = 8
_SAYS = re.compile(r"\w")
_ENDED = re.compile(r"[.!?;:)\]`'\"*]\s*$|\n\s*$")
# a unit of text: a line, or a sentence inside one (split after . ! ? followed by a space)
_UNIT_BREAK = re.compile(r"(?<=[.!?;])(?=[ \t])|(?=\n)")


def _lenient_string(raw: str) -> str:
    """The text of a JSON string cut before its closing quote."""
    raw = re.sub(r"\\u[0-9a-fA-F]{0,3}$", "", raw)
    if (len(raw) - len(raw.rstrip("\\"))) % 2:
        raw = raw[:-1]
    try:
        return str(json.loads('"' + raw + '"', strict=False))
    except ValueError:
        return raw.replace("\\n", "\n").replace('\\"', '"')


def salvage_json(text: str) -> tuple[dict[str, str], str | None, str]:
    """(the fields read to their end, by section; the section whose text was cut off, or None;
    that text as far as it goes). Keys that name no section, and repeated ones, are skipped."""
    body = strip_thinking(text or "")
    i = body.find("{")
    fields: dict[str, str] = {}
    if i < 0:
        return fields, None, ""
    i += 1
    n = len(body)
    decoder = json.JSONDecoder(strict=False)
    while True:
        i = _WS.match(body, i).end()  # type: ignore[union-attr]
        if i >= n or body[i] != '"':
            break
        try:
            key, i = scanstring(body, i + 1, False)
        except ValueError:  # cut inside a key
            break
        i = _WS.match(body, i).end()  # type: ignore[union-attr]
        if i >= n or body[i] != ":":
            break
        i = _WS.match(body, i + 1).end()  # type: ignore[union-attr]
        name = section_of(key)
        if i >= n:
            return fields, (name if name not in fields else None), ""
        try:
            if body[i] == '"':
                value, i = scanstring(body, i + 1, False)
            else:
                raw, i = decoder.raw_decode(body, i)
                value = _json_text(raw)
        except ValueError:
            if body[i] == '"' and name is not None and name not in fields:
                return fields, name, _lenient_string(body[i + 1:])
            break
        if name is not None and name not in fields:
            fields[name] = str(value).strip()
        i = _WS.match(body, i).end()  # type: ignore[union-attr]
        if i < n and body[i] == ",":
            i += 1
            continue
        break
    return fields, None, ""


def _words(unit: str) -> tuple[str, ...]:
    return tuple(re.findall(r"\w+", unit.lower()))


def trim_loop(text: str, cut: bool = True) -> str:
    """``text`` up to where it starts repeating itself: the first line or sentence that was
    already written ends it. When ``cut`` (the model stopped mid-way), the last unit, which it
    did not finish, goes too."""
    units = _UNIT_BREAK.split(text)
    if cut and units:
        units.pop()
    kept: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for unit in units:
        words = _words(unit)
        if words and words in seen:
            break
        if words:
            seen.add(words)
        kept.append(unit)
    return "".join(kept).strip()


def drop_last_unit(text: str) -> str:
    """``text`` without its last line or sentence (to bring a kept field within the budget)."""
    units = _UNIT_BREAK.split(text.rstrip())
    return "".join(units[:-1]).strip()


def salvaged_reading(text: str) -> tuple[Reading, str | None] | None:
    """The sections a cut-off JSON answer holds, and the one that was cut (trimmed where it
    starts to repeat; None when nothing of it is left), or None when it holds none."""
    fields, partial, rest = salvage_json(text)
    if partial is not None:
        kept = trim_loop(rest)
        if kept:
            fields[partial] = kept
        else:
            partial = None
    if not fields:
        return None
    sections = {s: fields[s] for s in SECTIONS if s in fields}
    return Reading(sections, [s for s in SECTIONS if s not in sections], [], "json", None, list(fields)), partial


def trim_capped(text: str) -> str:
    """A field stopped by its maxLength: without the sentence it did not finish and without
    what repeats (the text as it is when nothing would be left)."""
    units = _UNIT_BREAK.split(text)
    cut = bool(units) and not _ENDED.search(units[-1])
    return trim_loop(text, cut=cut) or text


def read_bounded(text: str, cut: bool, cap: int | None) -> tuple[Reading, str | None, bool]:
    """An answer asked for as JSON: its reading, the field that was cut off at the token limit
    (None when none is left), and whether the reading was salvaged from a cut-off answer. A field
    that ran into its maxLength (``cap``) is trimmed to its last whole sentence."""
    reading = read_answer(text)
    cut_field, salvaged = None, False
    if cut and (reading.error or reading.form == "json" or not reading.sections):
        found = salvaged_reading(text)
        if found is not None:
            (reading, cut_field), salvaged = found, True
    if reading.form == "json":
        for name, body in list(reading.sections.items()):
            if cap and name != cut_field and len(body) >= cap - CAP_SLACK:
                body = trim_capped(body)
            # a field of punctuation alone (a 0.5B model's ",") says nothing: written as (none)
            reading.sections[name] = body if _SAYS.search(body) else ""
    return reading, cut_field, salvaged
