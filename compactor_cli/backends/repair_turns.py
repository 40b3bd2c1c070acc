"""Checking a model's answer and the turns that repair it or merge partial summaries.

The final answer is read tolerantly (sections.read_answer). A JSON answer cut off at the token
limit keeps what it holds (salvage.py); when sections are still missing, repair turns in a JSON
mode ask only for them, constrained to them, and show the model the sections kept (never a loop);
any other problem (a section repeated, over the budget, a markdown answer) gets one turn in the
same chat saying exactly what is wrong. Only then does the summary fail. A mixin of
OpenAIBackend, which supplies the model calls (``_complete``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import UnusableAnswerError
from .dialects import field_cap, is_json_mode
from .salvage import drop_last_unit, read_bounded
from .sections import SECTIONS, Reading, describe_problems, read_answer, render_sections, strip_thinking

OUTPUT_MARGIN = 256  # tokens kept free beside prompt and answer for the server's own framing
#: repair turns that ask only for the fields still missing, each of which must add one
MISSING_TURNS = 2
ROOM_PER_FIELD = 40  # tokens a field asked for in a repair turn needs at least
REPAIR_OMITTED = ("(The transcript you summarised above is left out of this turn so that the conversation "
                  "fits the model's context window.)")
MERGE_NOTE = ("The conversation was too long to read at once. Below are summaries of its consecutive parts, "
              "oldest first, between <partial_summaries> tags; merge them into one summary.")


@dataclass
class Exchange:
    """One model call whose answer may go on: the user message it answered, the answer, and why
    the model stopped (``length``: cut off at max_tokens)."""

    user: str
    text: str
    finish: str | None


@dataclass
class Tally:
    """A summary's bookkeeping across its calls, kept when it fails too."""

    calls: int = 0
    repaired: bool = False
    looped: bool = False  # an answer ran to the token limit: later requests discourage repetition
    #: the server's ``usage`` of the answers, summed (prompt_tokens, completion_tokens, cached_tokens);
    #: empty while no answer carried one
    usage: dict[str, int] = field(default_factory=dict)

    def add_usage(self, usage: Any) -> None:
        """Add one answer's ``usage`` (the OpenAI client's object, or None when the server sent none)."""
        if usage is None:
            return
        details = getattr(usage, "prompt_tokens_details", None)
        for key, value in (("prompt_tokens", getattr(usage, "prompt_tokens", None)),
                           ("completion_tokens", getattr(usage, "completion_tokens", None)),
                           ("cached_tokens", getattr(details, "cached_tokens", None) if details else None)):
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = self.usage.get(key, 0) + value


def quote_data(text: str) -> str:
    """Nothing inside quoted data can close the tags around it."""
    return text.replace("</", "<\\/")


class RepairTurns:
    """What OpenAIBackend does with answers once it has them."""

    count: Callable[[str], int]
    input_tokens: int

    async def _complete(self, messages: list[dict[str, Any]], max_tokens: int, mode: str, tally: Tally,
                        fields: tuple[str, ...] = SECTIONS) -> tuple[str, str | None]:
        raise NotImplementedError

    def _problems(self, reading: Reading, finish: str | None, max_tokens: int) -> list[str]:
        """What keeps a reading from being the summary, one phrase each. An answer cut off at
        max_tokens loses its last section (its text stops mid-way): that section counts as missing."""
        cut = finish == "length"
        if cut and reading.order and reading.form == "markdown":
            last = reading.order[-1]
            reading.sections.pop(last, None)
            reading.missing = [s for s in SECTIONS if s not in reading.sections]
            reading.order = reading.order[:-1]
        problems = describe_problems(reading)
        if cut:
            problems.insert(0, "the answer was cut off at the token limit")
        if reading.sections:
            n = self.count(render_sections(reading.sections))
            if n > max_tokens:
                problems.append(f"the summary has {n} tokens, over the limit of {max_tokens}")
        return problems

    def _repair_message(self, reading: Reading, problems: list[str], max_tokens: int, mode: str) -> str:
        said = "; ".join(p.replace("the summary", "your summary").replace("the answer", "your answer")
                         for p in problems)
        head = f"Your summary cannot be used yet: {said}."
        if is_json_mode(mode):
            return (f"{head} Answer again with the whole summary as one JSON object with exactly the eight fields "
                    f"{', '.join(SECTIONS)}; '(none)' in a field with nothing to say; at most {max_tokens} tokens "
                    "in total.")
        room = max_tokens - self.count(render_sections(reading.sections)) if reading.sections else 0
        only_missing = (reading.missing and reading.sections and len(problems) == 1 and not reading.repeated
                        and room >= 40 * len(reading.missing))
        if only_missing:
            heads = ", ".join(f"'## {s}'" for s in reading.missing)
            return (f"{head} Write only the missing section{'s' if len(reading.missing) > 1 else ''} now, each under "
                    f"its heading ({heads}), in at most {room} tokens; write '(none)' under a section with nothing "
                    "to say. The sections you wrote stay as they are.")
        return (f"{head} Write the whole summary again: exactly these eight sections, each under a '## ' heading, in "
                f"this order: {', '.join(SECTIONS)}; '(none)' under a section with nothing to say; at most "
                f"{max_tokens} tokens in total.")

    def _read(self, text: str, finish: str | None, mode: str, max_tokens: int, out_tokens: int,
              asked: tuple[str, ...] = SECTIONS) -> tuple[Reading, bool]:
        """The answer's reading, and whether it was salvaged: a JSON answer cut off at the token
        limit keeps its complete fields and the cut one up to where it loops, trimmed so that
        the sections still missing have room (salvage.py)."""
        if not is_json_mode(mode):
            return read_answer(text), False
        reading, cut_field, salvaged = read_bounded(text, finish == "length", field_cap(mode, out_tokens, asked))
        if not salvaged:
            return reading, False
        missing = [s for s in asked if s not in reading.sections]
        limit = max_tokens - ROOM_PER_FIELD * len(missing)
        while cut_field is not None and self.count(render_sections(reading.sections)) > limit:
            shorter = drop_last_unit(reading.sections[cut_field])
            if shorter:
                reading.sections[cut_field] = shorter
            else:
                del reading.sections[cut_field]
                reading.order.remove(cut_field)
                cut_field = None
        reading.missing = [s for s in SECTIONS if s not in reading.sections]
        return reading, True

    async def _fill_missing(self, kept: Reading, user: str, system: str, max_tokens: int, mode: str,
                            tally: Tally) -> dict[str, str]:
        """Repair turns that ask only for the fields still missing (JSON modes), constrained to
        those fields. The chat shows the fields kept, never a loop that was cut off."""
        sections = dict(kept.sections)
        for _ in range(MISSING_TURNS):
            missing = tuple(s for s in SECTIONS if s not in sections)
            room = max_tokens - self.count(render_sections(sections))
            if not missing or room < ROOM_PER_FIELD * len(missing):
                break
            shown = orjson.dumps({s: sections[s] for s in SECTIONS if s in sections}).decode()
            names = ", ".join(missing)
            ask = (f"Your summary cannot be used yet: it lacks the field{'s' if len(missing) > 1 else ''} {names}. "
                   f"Answer with one JSON object holding only {'those fields' if len(missing) > 1 else 'that field'} "
                   f"({names}), in at most {room} tokens; '(none)' in a field with nothing to say. The fields "
                   "you wrote stay as they are.")
            out_tokens = room + 10 * len(missing) + 10
            need = sum(self.count(t) + 4 for t in (system, user, shown, ask)) + out_tokens + OUTPUT_MARGIN
            messages = chat(system, user if need <= self.input_tokens else REPAIR_OMITTED) + [
                {"role": "assistant", "content": shown}, {"role": "user", "content": ask}]
            tally.repaired = True
            text, finish = await self._complete(messages, out_tokens, mode, tally, missing)
            got, _ = self._read(text, finish, mode, room + 10 * len(missing), out_tokens, missing)
            new = {s: got.sections[s] for s in missing if s in got.sections}
            if not new:
                break
            sections.update(new)
        final = Reading({s: sections[s] for s in SECTIONS if s in sections},
                        [s for s in SECTIONS if s not in sections], [], "json", None, list(sections))
        problems = self._problems(final, None, max_tokens)
        if problems:
            raise UnusableAnswerError("; ".join(problems) + " (after a repair turn)")
        return final.sections

    async def _settle(self, ex: Exchange, system: str, max_tokens: int, out_tokens: int, mode: str,
                      tally: Tally) -> dict[str, str]:
        """The final answer's sections, after repair turns when needed: in a JSON mode, turns
        asking only for the fields missing; otherwise one turn in the same chat."""
        first, salvaged = self._read(ex.text, ex.finish, mode, max_tokens, out_tokens)
        problems = self._problems(first, None if salvaged else ex.finish, max_tokens)
        if not problems:
            return first.sections
        if is_json_mode(mode) and first.sections and problems == describe_problems(first) and not first.repeated:
            return await self._fill_missing(first, ex.user, system, max_tokens, mode, tally)
        repair = self._repair_message(first, problems, max_tokens, mode)
        user = ex.user
        need = sum(self.count(t) + 4 for t in (system, user, ex.text, repair)) + out_tokens + OUTPUT_MARGIN
        if need > self.input_tokens:
            user = REPAIR_OMITTED
        messages = chat(system, user) + [{"role": "assistant", "content": ex.text},
                                          {"role": "user", "content": repair}]
        tally.repaired = True
        text, finish = await self._complete(messages, out_tokens, mode, tally)
        second = read_answer(text)
        cut = finish == "length"
        merged = _combine(first, second, cut)
        problems = self._problems(merged, None, max_tokens)
        if problems and cut:
            problems.insert(0, "the repair answer was cut off at the token limit")
        if problems:
            raise UnusableAnswerError("; ".join(problems) + " (after a repair turn)")
        return merged.sections

    async def _merge(self, partials: list[Exchange], system: str, budget: int, out_tokens: int, mode: str,
                     tally: Tally) -> list[Exchange]:
        """Merge neighbouring partial summaries in groups that fit the budget (one level)."""
        cap = field_cap(mode, out_tokens)
        blocks = [f"### part {i + 1}\n" + quote_data(_partial_text(p, cap)) for i, p in enumerate(partials)]
        groups: list[list[int]] = [[]]
        used = 0
        for i, b in enumerate(blocks):
            n = self.count(b) + 1
            if groups[-1] and used + n > budget:
                groups.append([])
                used = 0
            groups[-1].append(i)
            used += n
        if len(groups) == len(partials) and len(partials) > 1:  # no two fit together: pair them anyway
            groups = [list(range(i, min(i + 2, len(partials)))) for i in range(0, len(partials), 2)]
        merged = []
        for g in groups:
            if len(g) == 1:  # alone in its group: goes up a level as it is
                merged.append(partials[g[0]])
                continue
            user = MERGE_NOTE + "\n<partial_summaries>\n" + "\n\n".join(blocks[i] for i in g) + "\n</partial_summaries>"
            text, finish = await self._complete(chat(system, user), out_tokens, mode, tally)
            merged.append(Exchange(user, text, finish))
        return merged


def chat(system: str, user: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _partial_text(ex: Exchange, cap: int | None) -> str:
    """A partial summary as the merge reads it: a JSON answer as markdown sections (cut off in a
    loop: what comes before it), a markdown answer as the model wrote it (without a reasoning
    block)."""
    reading, _, _ = read_bounded(ex.text, ex.finish == "length", cap)
    if reading.form == "json" and reading.sections:
        return "\n\n".join(f"## {s}\n{reading.sections[s]}" for s in SECTIONS if s in reading.sections)
    return strip_thinking(ex.text)


def _combine(first: Reading, second: Reading, second_cut: bool) -> Reading:
    """The answer after a repair turn: the sections of the repair answer replace or complete
    those of the first (a model may rewrite everything or send only what was missing). A repair
    answer cut off at max_tokens contributes no text for its last section."""
    extra = dict(second.sections)
    if second_cut and second.order and second.form == "markdown":
        extra.pop(second.order[-1], None)
    sections = {**first.sections, **extra}
    ordered = {s: sections[s] for s in SECTIONS if s in sections}
    repeated = list(dict.fromkeys(second.repeated + [s for s in first.repeated if s not in extra]))
    error = None if ordered else (second.error or first.error)
    return Reading(ordered, [s for s in SECTIONS if s not in ordered], repeated, second.form, error, list(ordered))
