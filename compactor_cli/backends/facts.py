"""What the offline summariser reads out of a head's messages (``messages.py``): the facts in
them (paths, URLs, identifiers, numbers with their unit: ``fact_scan.py`` finds them) with the
words around them, ranked by salience, and the error lines of tool output (code and routine
output are neither facts nor errors)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping
from copy import copy
from dataclasses import dataclass
from itertools import islice
from typing import cast

from .fact_scan import COMPILED, facts_in
from .messages import LIST_MARKUP, SENTENCE_BREAK, Item, Msg, clip

# an error line of tool output (not code that merely mentions an error)
_ERROR_LINE = (r"Traceback \(most recent call last\)|[\w.]*(?:Error|Exception)(?::|\s*$)|"
               r"error(?:\[\w+\])?:|ERROR\b|FAILED\b|FAIL:|fatal:|panic:|E\s{2,}\S|E[A-Z]{2,}:")
_ERROR_ANYWHERE = {r"No such file": ("No such file",), r"command not found": ("command not found",),
                   r"Permission denied": ("Permission denied",), r"Segmentation fault": ("Segmentation fault",),
                   r"[Nn]ot found\.?\s*$": ("ot found",), r"exit (?:code|status) [1-9]": ("exit ",)}


def gated(pattern: str, first: str, flags: int = 0) -> re.Pattern[str]:
    """``pattern`` behind a look-ahead for the characters ``first`` its matches can begin with
    (a class, under the same flags): at any other position the engine moves on after one test
    instead of trying each alternative there (issue 32: a list of words searched in every
    sentence and line). The same matches; ``tests/test_gated_patterns.py`` holds each to its
    plain form."""
    return re.compile(f"(?=[{first}])(?:{pattern})", flags)


class LineTest:
    r"""Whether a line (or a sentence) is of a kind: ``pattern.search(text)`` is not None, for a
    pattern of the form ``^\s*(?:START)|ANYWHERE|...``, in a fraction of its time (issue 32).
    A search of the whole pattern tries every alternative at every position of the text; here
    ``START`` is tried once, at the text's start, and each ``ANYWHERE`` alternative only where
    the text contains the strings its matches must contain (a plain substring test first).
    ``runs`` are alternatives of the form ``[CHARS]{N,}`` (``{CHARS: N}``, the characters taken
    literally), which need no string: the compiled part answers them in one pass (``has_run``),
    the pattern where it is not. ``pattern`` is kept as the reference ``tests/test_line_tests.py``
    holds this to."""

    def __init__(self, start: str, anywhere: Mapping[str, tuple[str, ...]], runs: Mapping[str, int] | None = None
                 ) -> None:
        runs = runs or {}
        run_patterns = {chars: "[" + "".join(map(re.escape, chars)) + f"]{{{n},}}" for chars, n in runs.items()}
        self._whole = r"^\s*(?:" + start + ")|" + "|".join([*anywhere, *run_patterns.values()])
        self._start = re.compile(r"\s*(?:" + start + ")")
        self._anywhere = [(needles, re.compile(rx)) for rx, needles in anywhere.items()]
        self._runs = [(chars, n, re.compile(run_patterns[chars])) for chars, n in runs.items()]

    @property
    def pattern(self) -> re.Pattern[str]:
        """The whole pattern, compiled when asked for (by the tests: a run never needs it)."""
        return re.compile(self._whole)

    def within(self, text: str) -> LineTest:
        """This test for the lines of ``text``: without the alternatives whose strings ``text``
        lacks, which none of its lines (its substrings) can hold (one search of the text for each,
        not one per line)."""
        kept = [(needles, rx) for needles, rx in self._anywhere if all(map(text.__contains__, needles))]
        if len(kept) == len(self._anywhere):
            return self
        narrowed = copy(self)
        narrowed._anywhere = kept
        return narrowed

    def __call__(self, text: str) -> bool:
        if self._start.match(text) is not None:
            return True
        for needles, rx in self._anywhere:  # loops, not any(all(...)): most texts are short lines
            for needle in needles:
                if needle not in text:
                    break
            else:
                if rx.search(text) is not None:
                    return True
        for chars, n, rx in self._runs:
            if COMPILED.has_run(text, chars, n) if COMPILED else rx.search(text) is not None:
                return True
        return False


is_error_line = LineTest(_ERROR_LINE, _ERROR_ANYWHERE)


# a short status line saying something went wrong ("Wrong flag!", "File does not exist.")
_FAILURE_WORDS = ("wrong", "invalid", "incorrect", "failed", "failure", "denied", "refused", "cannot", "can't",
                  "unable", "does not exist", "illegal", "not allowed", "does not add up", "mismatch", "not found",
                  "error")
_FAILURE = gated(r"\b(" + "|".join(_FAILURE_WORDS) + r")\b", "cdefimnruw", re.I)
_TAG = re.compile(r"</?[\w-]+>")
# routine tool output: never a fact, however many paths or numbers it shows — `ls` listings (long
# form or columns), installer and progress lines (pip, apt, npm, git, tqdm bars), bare headings
# of a test report ("ERRORS:", "=== FAILURES ===")
is_routine = LineTest(
    r"[dlcbps-][rwxsStT-]{9}[@+.]?\s+\d+\s+\S+\s+\S+\s+\d"
    r"|total \d+\s*$"
    r"|(?:[\w.@+-]+[/*@=|]?[ \t]{2,}){2,}[\w.@+-]+[/*@=|]?\s*$"
    r"|(?:Wall time|Chunk ID|Original token count|Process exited with code|Exit code|Duration|Elapsed)"
    r"(?::|\s)\s*[\w.]*\s*(?:seconds?|s|ms)?\s*$|Output:\s*$"
    r"|(?:Preparing (?:editable )?metadata|Building (?:editable|wheel)|Checking if build backend|"
    r"Installing build dependencies|Getting requirements to build|Created temporary directory)"
    r"|(?:Collecting|Downloading|Using cached|Requirement already satisfied|Installing collected packages|"
    r"Successfully (?:installed|built|uninstalled)|Building wheels? for|Created wheel|Stored in directory|"
    r"Attempting uninstall|Found existing installation|Uninstalling|Preparing metadata|Getting requirements|"
    r"Obtaining|Processing /|Looking in indexes|\[notice\]|WARNING: (?:Running pip|You are using pip)|"
    r"Get:\d+ |Hit:\d+ |Ign:\d+ |Reading package lists|Building dependency tree|Reading state information|"
    r"Unpacking |Setting up |Selecting previously unselected|Preparing to unpack|Fetched \d|"
    r"Receiving objects|Resolving deltas|remote: (?:Counting|Compressing|Enumerating|Total)|Cloning into|"
    r"added \d+ packages?|up to date, audited|npm (?:WARN|notice))"
    r"|[=\-_*# ]*(?:ERRORS?|FAILURES?|FAILED|WARNINGS?|PASSED|short test summary info)[=\-_*#: ]*$",
    {r"\d{1,3}%\s*\|[^|]*\|": ("%", "|"),  # tqdm
     r"\b\d+(?:\.\d+)?\s?[kKMG]i?B/s\b": ("B/s",), r"\beta \d+:\d\d": ("eta ",)},
    {"━█▉▊▋▌▍▎▏#=>": 8})  # progress bars
# a line of code (a numbered line of a file listing, a statement, a comment, markup), not prose or data
is_code = LineTest(r"\d+\s*[:→|]|\d+\s+\S|(?:def|class|import|from|return|raise|except|try|if|elif|else|"
                   r"for|while|with|async|await|const|let|var|function|fn|pub|case|catch|throw|assert)\b|"
                   r"(?:#|//)\s|<[/\w]",
                   {r";\s*$": (";",), r"\{:error": ("{:error",)})
SOURCE_WEIGHT = {"user": 3.0, "developer": 3.0, "assistant": 2.0, "tool": 1.0}


def _window(line: str, start: int, end: int, n: int = 150) -> str:
    """Up to ``n`` characters of ``line`` around [start, end), cut at word boundaries, marked with …"""
    if len(line) <= n:
        return " ".join(line.split())
    room = max(0, n - (end - start))
    a = max(0, start - room // 2)
    b = min(len(line), end + (room - (start - a)))
    a = max(0, b - n) if b == len(line) else a
    if a > 0:
        sp = line.find(" ", a, start)
        a = sp + 1 if sp >= 0 else a
    if b < len(line):
        sp = line.rfind(" ", end, b)
        b = sp if sp > end else b
    return ("…" if a > 0 else "") + " ".join(line[a:b].split()) + ("…" if b < len(line) else "")


# ---------------------------------------------------------------- facts

def _units(text: str, lines: bool, parts: list[str] | None = None) -> list[tuple[int, int, str]]:
    """Where a fact's context comes from: a tool result's lines, a user's or assistant's sentences
    (``parts``: the text's split at sentence ends, if made). Returns (start offset, end offset,
    text) of each unit."""
    out = []
    if lines:
        at = 0
        for line in text.split("\n"):
            out.append((at, at + len(line), line))
            at += len(line) + 1
        return out
    at = 0
    for part in SENTENCE_BREAK.split(text) if parts is None else parts:
        i = text.find(part, at)
        if i < 0:
            continue
        out.append((i, i + len(part), part))
        at = i + len(part)
    return out


def _failure_word(line: str) -> bool:
    """``_FAILURE.search(line)``, compiled where it is (backends/_facts.c ``has_word``)."""
    return COMPILED.has_word(line, _FAILURE_WORDS) if COMPILED else _FAILURE.search(line) is not None


#: What an error or failure line begins with or holds, whatever else it holds: each alternative
#: of ``_ERROR_LINE`` holds one of these strings or begins the line with "E" (``E\s{2,}\S``,
#: ``E[A-Z]{2,}:``), each of ``_ERROR_ANYWHERE`` its first needle. The compiled part lists the
#: lines that do, or are short and hold a failure word (``error_lines``: the rest need no test).
_ERROR_STARTS = "E"
_ERROR_NEEDLES = ("Traceback", "Error", "Exception", "error", "ERROR", "FAIL", "fatal:", "panic:",
                  *(needles[0] for needles in _ERROR_ANYWHERE.values()))
_FAILURE_MAX = 160  # characters: a longer line is no short status line


def _maybe_failures(units: list[tuple[int, int, str]], text: str) -> tuple[Iterable[int], LineTest]:
    """The indices of ``units`` (the lines of ``text``) that may be error lines, and the error
    test for those of them without tags: the lines the compiled part lists (one pass over the
    text, not a test of each line in Python), or all of them with the test narrowed to the text
    (a search of the text for each alternative's strings, not of each line)."""
    if COMPILED:
        return COMPILED.error_lines(text, _ERROR_STARTS, _ERROR_NEEDLES, _FAILURE_WORDS, _FAILURE_MAX), is_error_line
    return range(len(units)), is_error_line.within(text)  # for lines as they are: not one without its tags


def _failure_lines(units: list[tuple[int, int, str]], text: str) -> list[str]:
    """A tool result's error lines: an error message ("ValueError: …", "fatal: …", "EISDIR: …")
    or a short status line saying something went wrong ("Wrong flag!"); never a line of code.
    ``units``: the lines of ``text``."""
    out = []
    maybe, error_line = _maybe_failures(units, text)
    for k in maybe:
        line = units[k][2]
        tagged = "<" in line
        plain = (_TAG.sub("", line) if tagged else line).strip()
        # the rare error test first: most lines are neither, and the code and routine patterns
        # search a whole line (the same lines come out in either order)
        if not plain or not ((is_error_line if tagged else error_line)(plain)
                             or (len(plain) <= _FAILURE_MAX and _failure_word(plain))):
            continue
        if not (is_code(plain) or is_routine(plain)):
            out.append(plain)
    return out


_WORD = re.compile(r"[A-Za-z]{2,}")


def _words_at_least(text: str, n: int) -> bool:
    """Whether ``text`` holds ``n`` words (``_WORD``): the search stops at the ``n``-th."""
    return len(list(islice(_WORD.finditer(text), n))) >= n


CALL_WEIGHT = 1.5  # the arguments of a tool call: what the agent chose to look at or change


@dataclass
class _Source:
    pos: int  # the message
    weight: float
    speaker: str
    text: str
    units: list[tuple[int, int, str]]
    width: int  # characters of context shown around a fact


def _sources(msgs: list[Msg]) -> list[_Source]:
    """The texts facts are read from: each message's content (sentences, or lines of a tool
    result) and each tool call's arguments."""
    out = []
    for pos, msg in enumerate(msgs):
        if msg.text and msg.role in SOURCE_WEIGHT:
            tool = msg.role == "tool"
            units = _units(msg.text, tool, None if tool else msg.parts)
            out.append(_Source(pos, SOURCE_WEIGHT[msg.role], msg.speaker, msg.text, units, 110 if tool else 160))
        for name, args in msg.calls:
            if args and args != "{}":
                out.append(_Source(pos, CALL_WEIGHT, f"Assistant called {name}", args, [(0, len(args), args)], 110))
    return out


def fact_items(msgs: list[Msg], limit: int | None = None) -> list[Item]:
    """Key facts with their context, most salient first.

    A fact weighs more when the user or the assistant said it (or chose it as a tool call's
    argument); when words around it make a statement of it ("Saved the export to <path>", not a
    bare entry of a listing); when it stands nearly alone in its sentence or line and its
    message (not one of hundreds in a log dump); when its line is not routine (a line of the
    same shape, digits aside, recurring through the conversation, like "Compiling 4 files",
    weighs less); when it recurs; and slightly when it is recent. Each fact is shown once,
    where it weighs most, with the words around it (its sentence, or its line of tool output);
    facts sharing a sentence or line share an item. Error lines of tool output are items of
    their own; code lines are not errors, and paths or numbers inside listed code are not facts.
    At most ``limit`` fact items are made (more could not fit the budget anyway)."""
    n = max(1, len(msgs))
    # (source, facts: start, end, unit; their spans by unit, and the units' shapes)
    found: list[tuple[_Source, list[tuple[int, int, int]], dict[int, list[tuple[int, int]]], dict[int, str]]] = []
    shapes: Counter[str] = Counter()
    items: list[Item] = []
    for src in _sources(msgs):
        msg = msgs[src.pos]
        lines = msg.role == "tool" and src.speaker == msg.speaker
        if lines:
            items += [Item(f"{src.speaker}: {clip(line, 180)}", (1, src.pos), 1.5 * (1 + 0.2 * src.pos / n))
                      for line in _failure_lines(src.units, src.text)[:3]]
        facts = facts_in(src.text)
        if not facts:
            continue
        starts = [u[0] for u in src.units]
        located = []
        listed: dict[int, bool] = {}  # unit -> code or routine: one search per line, not per fact in it
        for a, b, _ in facts:
            k = bisect_right(starts, a) - 1
            if k < 0 or src.units[k][1] < b:
                continue
            if lines:
                skip = listed.get(k)
                if skip is None:
                    line = src.units[k][2]
                    skip = listed[k] = is_code(line) or is_routine(line)
                if skip:
                    continue  # a path or number in listed code is the code's; routine output states no fact
            located.append((a, b, k))
        if located:
            by_unit = _spans_by_unit(src, located)
            shape_of = {k: _shape(src.units[k][2], spans) for k, spans in by_unit.items()}
            shapes.update(shape_of.values())
            found.append((src, located, by_unit, shape_of))
    where: dict[str, tuple[float, int, int, int, int]] = {}  # fact -> (weight, source, start, end, unit)
    # recurrence (float bonuses in a Counter: a fact that does not recur reads 0)
    bonus = cast("dict[str, float]", Counter())
    # a tool call's arguments count for the facts nothing else states (a reservation looked up,
    # a file read whose path no output repeats): read them last, adding no weight to the others
    found.sort(key=lambda f: f[0].weight == CALL_WEIGHT)
    for si, (src, located, by_unit, shape_of) in enumerate(found):
        call = src.weight == CALL_WEIGHT
        per_unit = Counter(k for _, _, k in located)
        in_message = len({src.text[a:b] for a, b, _ in located})
        base = (src.weight * (1 + 0.2 * src.pos / n) / in_message ** 0.2
                * min(1.0, (2000 / len(src.text)) ** 0.25))
        unit_weight: dict[int, float] = {}
        for k, count in per_unit.items():
            # JSON keys are no prose
            prose = (2.0 if src.weight != CALL_WEIGHT and _words_at_least(_blanked(src.units[k][2], by_unit[k], " "), 2)
                     else 1.0)
            unit_weight[k] = base * prose / count ** 0.5 / shapes[shape_of[k]] ** 0.5
        if call:
            for a, b, k in located:
                where.setdefault(src.text[a:b], (unit_weight[k], si, a, b, k))
            continue
        for fact in dict.fromkeys(src.text[a:b] for a, b, _ in located):
            if fact in where:
                bonus[fact] += 0.25
        for a, b, k in located:
            fact = src.text[a:b]
            if fact not in where or unit_weight[k] > where[fact][0]:
                where[fact] = (unit_weight[k], si, a, b, k)
    ranked = sorted(where.items(), key=lambda kv: (-(kv[1][0] + bonus[kv[0]]), kv[1][1], kv[1][2]))
    shown: set[tuple[int, int]] = set()
    for fact, (weight, si, a, b, k) in ranked:
        if limit is not None and len(shown) >= limit:
            break
        if (si, k) in shown:
            continue
        shown.add((si, k))
        src = found[si][0]
        start, _, text = src.units[k]
        lead = len(text) - len(LIST_MARKUP.sub("", text)) if src.width > 110 else 0  # a sentence: without list markers
        snippet = _window(text[lead:], a - start - lead, b - start - lead, src.width)
        if src.width > 110:
            snippet = snippet.replace("**", "")  # and without emphasis
        items.append(Item(f"{src.speaker}: {snippet}", (1, src.pos), weight + bonus[fact]))
    return items


def _spans_by_unit(src: _Source, located: list[tuple[int, int, int]]) -> dict[int, list[tuple[int, int]]]:
    """unit -> its facts' spans within the unit, in the order found (one pass, not one per unit)."""
    by_unit: dict[int, list[tuple[int, int]]] = {}
    for a, b, k in located:
        start = src.units[k][0]
        by_unit.setdefault(k, []).append((a - start, b - start))
    return by_unit


_DIGITS = re.compile(r"\d+")


def _shape(line: str, spans: list[tuple[int, int]]) -> str:
    """A line with its facts and digits blanked: lines of one shape are routine output.

    The first 48 characters of the blanked line, its whitespace runs made one space, lowered and
    its digit runs made ``#``. Each step maps a prefix of a line to a prefix of the line's result
    (str.lower is per character but for a capital sigma, whose form depends on what follows), so
    a long line is shaped from its first ``_SHAPE_READ`` characters when they give 48 (issue 32:
    the whole of each long line was split, joined and lowered for 48 characters)."""
    blanked = _blanked(line, spans, "\x00")
    head = blanked[:_SHAPE_READ]
    if len(head) < len(blanked) and "Σ" not in head:
        shape = _DIGITS.sub("#", " ".join(head.split()).lower())
        if len(shape) >= 48:
            return shape[:48]
    return _DIGITS.sub("#", " ".join(blanked.split()).lower())[:48]


_SHAPE_READ = 96


def _blanked(text: str, spans: list[tuple[int, int]], blank: str) -> str:
    """``text`` with each span (non-overlapping, as a search finds them) replaced by ``blank``."""
    if not spans:
        return text
    parts, at = [], 0
    for a, b in sorted(spans):
        parts.append(text[at:a])
        at = b
    parts.append(text[at:])
    return blank.join(parts)
