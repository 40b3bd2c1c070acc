"""The structured summary: eight markdown sections, in a fixed order, within a token budget.

Reading a model's answer is tolerant, because real models (small local ones above all) rarely
answer to the letter: headings at any level (``## Key Facts``), bold (``**Key facts**``),
numbered (``1. Overview``), plain labels (``Key facts:``) or inline labels (``**Overview:**
text``); snake case, title case, spaces or hyphens, and close variants ("Decisions taken", "User
preferences and constraints"); a preamble before the first section; the whole answer inside a
code fence; a reasoning model's ``<think>`` block; a JSON object (structured output). Sections
are put back into the canonical order.

What cannot be read is reported, never guessed: a section that is missing or given twice is
named in ``Reading.missing`` / ``Reading.repeated`` (the openai backend asks the model to repair
it), and ``parse_sections`` raises on it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import BackendError

SECTIONS = ("system_context", "overview", "key_facts", "user_preferences", "decisions", "pending_tasks",
            "open_questions", "tone_context")
EMPTY = "(none)"

# Heading texts read as each section (after normalising: lower case, words only). A heading may
# also *start* with one of the multi-word names ("user preferences and constraints").
_ALIASES: dict[str, tuple[str, ...]] = {
    "system_context": ("system context", "system prompt", "system prompt context", "context", "background",
                       "setting", "system"),
    "overview": ("overview", "conversation overview", "task overview", "overview of the conversation"),
    "key_facts": ("key facts", "facts", "important facts", "key information", "key details", "key points"),
    "user_preferences": ("user preferences", "preferences", "user constraints", "constraints",
                         "preferences and constraints", "user preferences and constraints"),
    "decisions": ("decisions", "decisions taken", "decisions made", "key decisions", "decision"),
    "pending_tasks": ("pending tasks", "pending", "pending work", "next steps", "todo", "to do", "remaining tasks",
                      "remaining work", "open tasks"),
    "open_questions": ("open questions", "questions", "unresolved questions", "open issues"),
    "tone_context": ("tone context", "tone", "tone and style", "style", "communication style",
                     "tone of the conversation"),
}
_BY_NAME = {alias: name for name, aliases in _ALIASES.items() for alias in aliases + (name.replace("_", " "),)}
_PREFIXES = sorted((a for a in _BY_NAME if " " in a), key=len, reverse=True)

_THINK = re.compile(r"^\s*<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.S | re.I)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]\s)")
_NUMBERING = r"(?:\d{1,2}|[ivx]{1,4}|[a-h])[.)]"
# heading styles, in order of preference when an answer mixes them
_STYLES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("atx", re.compile(r"^ {0,3}#{1,6}[ \t]+(?P<t>.+?)[ \t]*#*[ \t]*$")),
    ("bold", re.compile(r"^ {0,3}(?:" + _NUMBERING + r"[ \t]*)?(?P<m>\*\*|__)(?P<t>[^*_\s][^*_]*?)(?P=m)"
                        r"[ \t]*:?[ \t]*$", re.I)),
    ("numbered", re.compile(r"^ {0,3}" + _NUMBERING + r"[ \t]+(?P<t>[A-Za-z][\w &/-]{1,60}?)[ \t]*:?[ \t]*$", re.I)),
    ("label", re.compile(r"^ {0,3}(?P<t>[A-Za-z][\w &/-]{1,50}?)[ \t]*:[ \t]*$")),
    ("inline", re.compile(r"^ {0,3}(?:(?P<m>\*\*|__)(?P<t>[A-Za-z][\w &/-]{1,50}?)(?::(?P=m)|(?P=m)[ \t]*:)"
                          r"|(?P<t2>[A-Z][\w &/-]{1,50}?):)[ \t]+(?P<rest>\S.*)$")),
)
_WHOLE_LINE = ("bold", "numbered", "label")  # styles that may name a section the main style lacks


def section_of(title: str) -> str | None:
    """The section a heading (or a JSON key) names, or None."""
    t = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", title)  # camelCase keys
    t = re.sub(r"[*_`#]+", " ", t).strip()
    t = re.sub(r"^" + _NUMBERING + r"\s*", "", t, flags=re.I)
    t = re.sub(r"^section\s+\d+\s*[:.-]?\s*", "", t, flags=re.I)
    words = re.findall(r"[a-z]+", t.lower().replace("&", " and "))
    if not words or len(words) > 7:
        return None
    phrase = " ".join(words)
    if phrase in _BY_NAME:
        return _BY_NAME[phrase]
    for prefix in _PREFIXES:
        if phrase.startswith(prefix + " "):
            return _BY_NAME[prefix]
    return None


@dataclass
class Reading:
    """What could be read from an answer: the sections found (canonical order), the ones
    missing or given more than once, the form read, and why nothing could be read."""

    sections: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=lambda: list(SECTIONS))
    repeated: list[str] = field(default_factory=list)
    form: str = "markdown"  # markdown | json
    error: str | None = None  # nothing could be read at all (empty, not JSON)
    order: list[str] = field(default_factory=list)  # the sections as the answer gave them

    @property
    def complete(self) -> bool:
        return not self.missing and not self.repeated and self.error is None


def _finish(found: dict[str, list[str]], repeated: list[str], form: str) -> Reading:
    sections = {s: "\n".join(found[s]).strip() for s in SECTIONS if s in found}
    return Reading(sections, [s for s in SECTIONS if s not in found], list(dict.fromkeys(repeated)), form,
                   order=list(found))


def strip_thinking(text: str) -> str:
    """Without a leading <think>…</think> block (reasoning models served by llama.cpp, Ollama, vLLM)."""
    return _THINK.sub("", text, count=1)


def _candidates(lines: list[str], use_fences: bool) -> list[tuple[int, str, str, str]]:
    """(line index, style, section, inline rest) of every line that could be a section heading."""
    out = []
    fence: str | None = None
    for i, line in enumerate(lines):
        f = _FENCE.match(line)
        if use_fences and f:
            if fence is None:
                fence = f.group(1)[0]
            elif f.group(1)[0] == fence and not f.group(2):
                fence = None
            continue
        if fence is not None or _LIST_ITEM.match(line):
            continue
        for style, rx in _STYLES:
            m = rx.match(line)
            if not m:
                continue
            title = m.group("t") or (m.groupdict().get("t2") or "")
            name = section_of(title)
            if name is not None:
                out.append((i, style, name, (m.groupdict().get("rest") or "").strip()))
                break
            if style == "atx":  # an unknown markdown heading is content, not another style's heading
                break
    return out


def _read_markdown(text: str) -> Reading:
    lines = text.strip().splitlines()
    cands = _candidates(lines, use_fences=True)
    if not cands:  # the whole summary inside a code fence (```markdown ... ```): read through it
        lines = [line for line in lines if not _FENCE.match(line)]
        cands = _candidates(lines, use_fences=False)
    if not cands:
        return Reading()
    by_style: dict[str, set[str]] = {}
    for _, style, name, _ in cands:
        by_style.setdefault(style, set()).add(name)
    main = max((s for s, _ in _STYLES if s in by_style), key=lambda s: len(by_style[s]))
    heads = {i: (name, rest) for i, style, name, rest in cands if style == main}
    # a whole-line heading of another style for a section the main style lacks, given once
    extra: dict[str, list[int]] = {}
    for i, style, name, _ in cands:
        if style != main and style in _WHOLE_LINE and name not in by_style[main]:
            extra.setdefault(name, []).append(i)
    for name, where in extra.items():
        if len(where) == 1:
            heads[where[0]] = (name, "")
    found: dict[str, list[str]] = {}
    repeated: list[str] = []
    current: str | None = None
    for i, line in enumerate(lines):
        if i in heads:
            name, rest = heads[i]
            if name in found:
                repeated.append(name)
                current = None  # a second copy is not read into the first
                continue
            current = name
            found[name] = [rest] if rest else []
        elif current is not None:
            found[current].append(line)
    return _finish(found, repeated, "markdown")


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return "\n".join(f"- {_json_text(v)}" for v in value if _json_text(v))
    if isinstance(value, dict):
        return "\n".join(f"- {k}: {_json_text(v)}" for k, v in value.items() if _json_text(v))
    return str(value)


def _read_json(text: str) -> Reading:
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        return Reading(form="json", error="the answer is not a JSON object")
    try:
        obj = orjson.loads(text[start:end + 1]) if end > start else None
    except orjson.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict):
        return Reading(form="json", error="the answer is not a valid JSON object (cut off?)")
    if len(obj) == 1 and isinstance(next(iter(obj.values())), dict):  # {"summary": {...}}
        inner = next(iter(obj.values()))
        if any(section_of(k) for k in inner):
            obj = inner
    found: dict[str, list[str]] = {}
    repeated = []
    for key, value in obj.items():
        name = section_of(str(key))
        if name is None:
            continue
        if name in found:
            repeated.append(name)
            continue
        found[name] = [_json_text(value)]
    return _finish(found, repeated, "json")


def read_answer(text: str) -> Reading:
    """Read a model's answer (markdown or JSON) without raising."""
    body = strip_thinking(text or "").strip()
    if not body:
        return Reading(error="the summary is empty")
    unfenced = re.sub(r"^(`{3,}|~{3,})\s*[\w+-]*\s*\n", "", body)
    if unfenced.lstrip().startswith("{"):
        reading = _read_json(unfenced)
        if reading.sections:
            return reading
        markdown = _read_markdown(body)
        return markdown if markdown.sections else reading
    reading = _read_markdown(body)
    if not reading.sections and "{" in body:
        as_json = _read_json(body)
        if as_json.sections:
            return as_json
    return reading


def _plural(names: list[str]) -> str:
    return f"section{'s' if len(names) > 1 else ''} {', '.join(names)}"


def describe_problems(reading: Reading) -> list[str]:
    """What is wrong with a reading, one phrase each ("the summary lacks the section tone_context")."""
    if reading.error is not None:
        return [reading.error]
    problems = []
    if reading.missing:
        problems.append(f"the summary lacks the {_plural(reading.missing)}")
    if reading.repeated:
        problems.append(f"the summary repeats the {_plural(reading.repeated)}")
    return problems


def _safe_body(body: str) -> str:
    """A section's text cannot open another section: a markdown heading naming one becomes bold,
    and a code fence left open is closed (else it would hide the headings after it)."""
    out = []
    fence: str | None = None
    for line in body.splitlines():
        f = _FENCE.match(line)
        if f:
            if fence is None:
                fence = f.group(1)
            elif f.group(1)[0] == fence[0] and not f.group(2):
                fence = None
        m = _STYLES[0][1].match(line) if fence is None else None
        out.append(f"**{m.group('t').strip('*_ ')}**" if m and section_of(m.group("t")) else line)
    if fence is not None:
        out.append(fence)
    return "\n".join(out)


def render_sections(sections: dict[str, str]) -> str:
    """Markdown with a ``## name`` heading per section, in order; empty sections say (none)."""
    return "\n\n".join(f"## {name}\n{_safe_body((sections.get(name) or '').strip()) or EMPTY}" for name in SECTIONS)


def parse_sections(text: str) -> dict[str, str]:
    """The eight sections of an answer, in the canonical order. Headings may be written in any
    of the forms ``read_answer`` accepts. Raises BackendError naming what is missing or repeated."""
    reading = read_answer(text)
    problems = describe_problems(reading)
    if problems:
        raise BackendError("; ".join(problems))
    return {name: reading.sections[name] for name in SECTIONS}


def canonical_summary(text: str) -> str:
    """Parse and re-render, so every summary written has the same shape."""
    return render_sections(parse_sections(text))


#: The ninth section, written by xcompact itself (never by a model) after the eight: the run's
#: files, errors, tests and commands (compactor_cli.evidence), so no summariser has to remember them.
EVIDENCE_HEADING = "## evidence\n"


def split_evidence(summary: str) -> tuple[str, str | None]:
    """(the eight sections, the evidence section's body or None) of a summary xcompact wrote; a
    compaction note after the summary stays with the eight."""
    at = summary.find("\n\n" + EVIDENCE_HEADING)
    if at < 0:
        return summary, None
    rest = summary[at + 2 + len(EVIDENCE_HEADING):]
    note = rest.find("\n\n[Compaction note")
    body, tail = (rest, "") if note < 0 else (rest[:note], rest[note:])
    return summary[:at] + tail, body


def with_evidence(summary: str, body: str) -> str:
    """The summary with the evidence section after its eight sections (none when ``body`` is empty)."""
    return summary + "\n\n" + EVIDENCE_HEADING + body if body else summary
