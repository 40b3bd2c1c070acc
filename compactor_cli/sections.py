"""The structured summary: eight markdown sections, in a fixed order, within a token budget."""

from __future__ import annotations

import re

from .errors import BackendError

SECTIONS = ("system_context", "overview", "key_facts", "user_preferences", "decisions", "pending_tasks",
            "open_questions", "tone_context")
EMPTY = "(none)"
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def _section_name(heading: str) -> str:
    return re.sub(r"[\s\-]+", "_", heading.strip().strip("*_`").strip().lower())


def render_sections(sections: dict[str, str]) -> str:
    """Markdown with a ``## name`` heading per section, in order; empty sections say (none)."""
    return "\n\n".join(f"## {name}\n{(sections.get(name) or '').strip() or EMPTY}" for name in SECTIONS)


def parse_sections(text: str) -> dict[str, str]:
    """Split a model's answer into the eight sections. Headings may be any level and spelled
    "Key facts" or "key_facts". Raises BackendError naming what is missing or out of order."""
    if not text or not text.strip():
        raise BackendError("the summary is empty")
    found: dict[str, list[str]] = {}
    order: list[str] = []
    current: str | None = None
    for line in text.strip().splitlines():
        m = _HEADING.match(line)
        if m and _section_name(m.group(1)) in SECTIONS:
            current = _section_name(m.group(1))
            if current in found:
                raise BackendError(f"the summary repeats the section {current}")
            found[current] = []
            order.append(current)
        elif current is not None:
            found[current].append(line)
    missing = [s for s in SECTIONS if s not in found]
    if missing:
        raise BackendError(f"the summary lacks the section{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    if order != list(SECTIONS):
        raise BackendError("the summary's sections are not in the required order")
    return {name: "\n".join(lines).strip() for name, lines in found.items()}


def canonical_summary(text: str) -> str:
    """Parse and re-render, so every summary written has the same shape."""
    return render_sections(parse_sections(text))
