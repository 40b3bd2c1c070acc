"""What a cleared or capped tool result keeps of itself (``{preview:HEAD,TAIL}``, ``--preview``,
``--max-result-tokens``): its first and last lines and, between them, the lines that carry the
outcome, which go in first when not all fit."""

from __future__ import annotations

import re
from typing import Any

from ..model.conversation import PLACEHOLDER_TEMPLATE
from ..model.placeholders import PlaceholderTemplate, template

#: A preview's lines are clipped to this many characters, and the whole preview to PREVIEW_CHARS.
PREVIEW_LINE_CHARS = 240
PREVIEW_CHARS = 4000
MAX_OUTCOME_LINES = 8
_EXIT_LINE = re.compile(r"(?i)<returncode>|exit(?:ed with)? (?:code|status)|^\s*=+ .*\b(?:passed|failed|error)")


#: The preview a result over ``max_result_tokens`` keeps: its first and last lines.
CAP_PREVIEW = (10, 10)


def capped_template(placeholder: str | None) -> PlaceholderTemplate:
    """The template of a result capped by ``max_result_tokens``: the run's (xun's, or the
    user's) with a head and tail preview after it, unless it has one."""
    base = placeholder if placeholder is not None else PLACEHOLDER_TEMPLATE
    return template(base if "{preview" in base else base + "\n{preview:" + f"{CAP_PREVIEW[0]},{CAP_PREVIEW[1]}" + "}")


def result_preview(text: str, head: int, tail: int, max_chars: int | None = None) -> str:
    """What a placeholder keeps of a cleared result (``{preview:HEAD,TAIL}``): its first ``head``
    and last ``tail`` lines, and from the lines between them those that carry the outcome (exit
    codes, test summaries, the line closing a traceback, pytest E/FAILED, error: and fatal:
    lines), marked with how many were left out; lines clipped, the whole within PREVIEW_CHARS.
    When the lines do not all fit, the outcome goes in first, then the last lines, then the first."""
    from ..evidence.extract import error_lines

    limit = PREVIEW_CHARS if max_chars is None else max_chars
    lines = [_clip(ln) for ln in text.split("\n")]
    if len(lines) <= head + tail and sum(len(ln) + 1 for ln in lines) <= limit + 1:
        return "\n".join(lines)
    first, last = (lines[:head], lines[len(lines) - tail:] if tail else []) if len(lines) > head + tail \
        else (lines, [])
    middle = lines[head:len(lines) - tail] if len(lines) > head + tail else []
    errors = set(error_lines("\n".join(middle))) if middle else set()
    outcome = [ln for ln in middle if _EXIT_LINE.search(ln) or " ".join(ln.split()) in errors][-MAX_OUTCOME_LINES:]
    budget = limit - 80  # the marker's room
    outcome = _fit(outcome[::-1], budget)[::-1]  # the last outcome lines first
    budget -= sum(len(ln) + 1 for ln in outcome)
    last = _fit(last[::-1], budget)[::-1]
    budget -= sum(len(ln) + 1 for ln in last)
    first = _fit(first, budget)
    left_out = len(lines) - len(first) - len(outcome) - len(last)
    if not left_out:
        return "\n".join(first + last)
    marker = (f"[… {left_out} of {len(lines)} lines left out by xcompact"
              + ("; the lines that carry the outcome follow" if outcome else "") + " …]")
    return "\n".join(first + [marker] + outcome + last)


def _clip(line: str) -> str:
    return line if len(line) <= PREVIEW_LINE_CHARS else line[:PREVIEW_LINE_CHARS - 1] + "…"


def _fit(lines: list[str], budget: int) -> list[str]:
    """The leading lines of ``lines`` that fit in ``budget`` characters (a newline each)."""
    out: list[str] = []
    for ln in lines:
        budget -= len(ln) + 1
        if budget < 0:
            break
        out.append(ln)
    return out


def preview_source(content: Any) -> str:
    """The text a preview is taken from: a Codex ``{"output": …, "metadata": …}`` result's output
    (its lines, not one line of JSON) with its exit code first; any other result's text."""
    from ..evidence.extract import output_text

    return output_text(content)
