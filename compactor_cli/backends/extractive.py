"""The built-in offline summariser: picks sentences and facts from the head itself.

Deterministic and model-free. Each section is a list of short items, each carrying its context:
who said it (``User:``, ``Assistant:``, ``Tool <name>:``) and the words around it, so a fact is
"Tool get_reservation_details: "reservation_id": "H9ZU1C", "origin": "JFK"…" rather than a bare
"H9ZU1C". Facts are file paths, identifiers, numbers with their unit and error lines of tool
output (code is not an error); preferences are the user's sentences stating them; decisions
the assistant's statements and state-changing tool calls; open questions the questions asked
(unanswered first).

Items are ranked by salience and admitted round robin across sections until the rendered
summary reaches the token budget, the overview's first item before anything else (clipped to
fit when the budget is tiny); the admitted items are then listed in conversation order. A
later round merges the earlier summary's items with the new ones (older first) without
duplicates."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from ..errors import BackendError
from ..evidence.harness import harness_keys, is_harness, without_injected
from ..model.conversation import call_parts, content_text
from . import Answer, SummaryRequest
from .sections import SECTIONS, parse_sections, render_sections, split_evidence

SCAN_CHARS = 20_000  # per message: the first and last SCAN_CHARS characters are read
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_PATH = re.compile(r"(?<![\w/.~-])(?:~?/|\./)?(?:[\w.@+-]+/)+[\w.@+-]*[\w]|(?<![\w/.-])[\w.-]*\w\.(?:py|js|ts|tsx|jsx|"
                   r"json|jsonl|md|rst|txt|ya?ml|toml|rs|go|java|c|h|cc|cpp|hpp|cs|sh|bash|zsh|ps1|bat|cfg|ini|conf|env|"
                   r"html?|heex|eex|css|scss|sql|csv|tsv|log|lock|ex|exs|erl|rb|php|pl|lua|kt|swift|scala|dart|vue|proto|"
                   r"tf|xml|ipynb|pdf|png|jpe?g|gif|svg|webp|gz|tgz|bz2|xz|zip|tar|7z|img|iso|bin|exe|dll|so|dylib|pcap|"
                   r"pcapng|mpeg|mp4|m4v|avi|mov|mp3|wav|enc|pem|key|pub|crt|db|sqlite3?|parquet|traj|out)\b")
_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+[^\s<>\"'`)\].,;:]|(?<![\w.@-])(?:[a-z0-9-]+\.)+(?:com|io|org|net|dev|ai|co|"
                  r"edu|gov|app|cloud|local|internal)(?::\d+)?\b(?![.\w-])")
_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,5}$")
_IDENT = re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,10}\b|\b[a-z]+_[a-z]+_?\d+\b"
                    r"|\b[A-Z][A-Z0-9]{1,9}-\d+\b"
                    r"|\b[0-9a-f]{7,12}\b(?=[^\n]{0,40}\b(?:commit|sha|hash)\b)"
                    r"|\b(?:commit|sha|hash)\b[^\n]{0,20}?\b[0-9a-f]{7,40}\b")
_UNITS = (r"%|ms|s|sec|seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|KB|MB|GB|TB|KiB|MiB|GiB|"
          r"bytes|tokens|lines|items|tests?|files|rows|records|requests|users|errors|failures|passengers|bags|"
          r"flights|nights|people|points|calls|retries|workers|threads|cores|replicas|pods|nodes|servers|dollars|"
          r"USD|EUR|GBP|kg|km|miles")
_NUMBER = re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)?\s?(?:" + _UNITS + r")\b|\b\d{4}-\d{2}-\d{2}\b")
# an error line of tool output (not code that merely mentions an error)
_ERROR = re.compile(r"^\s*(?:Traceback \(most recent call last\)|[\w.]*(?:Error|Exception)(?::|\s*$)|"
                    r"error(?:\[\w+\])?:|ERROR\b|FAILED\b|FAIL:|fatal:|panic:|E\s{2,}\S|E[A-Z]{2,}:)|"
                    r"No such file|command not found|"
                    r"Permission denied|Segmentation fault|[Nn]ot found\.?\s*$|exit (?:code|status) [1-9]")
# a short status line saying something went wrong ("Wrong flag!", "File does not exist.")
_FAILURE = re.compile(r"(?i)\b(wrong|invalid|incorrect|failed|failure|denied|refused|cannot|can't|unable|"
                      r"does not exist|illegal|not allowed|does not add up|mismatch|not found|error)\b")
_TAG = re.compile(r"</?[\w-]+>")
# routine tool output: never a fact, however many paths or numbers it shows — `ls` listings (long
# form or columns), installer and progress lines (pip, apt, npm, git, tqdm bars), bare headings
# of a test report ("ERRORS:", "=== FAILURES ===")
_ROUTINE = re.compile(
    r"^\s*(?:[dlcbps-][rwxsStT-]{9}[@+.]?\s+\d+\s+\S+\s+\S+\s+\d"
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
    r"|[=\-_*# ]*(?:ERRORS?|FAILURES?|FAILED|WARNINGS?|PASSED|short test summary info)[=\-_*#: ]*$)"
    r"|\d{1,3}%\s*\|[^|]*\|"  # tqdm
    r"|[━█▉▊▋▌▍▎▏#=>]{8,}"  # progress bars
    r"|\b\d+(?:\.\d+)?\s?[kKMG]i?B/s\b|\beta \d+:\d\d")
# a line of code (a numbered line of a file listing, a statement, a comment, markup), not prose or data
_CODE = re.compile(r"^\s*(?:\d+\s*[:→|]|\d+\s+\S)|^\s*(?:def|class|import|from|return|raise|except|try|if|elif|else|"
                   r"for|while|with|async|await|const|let|var|function|fn|pub|case|catch|throw|assert)\b|;\s*$|"
                   r"^\s*(?:#|//)\s|\{:error|^\s*<[/\w]")
_PREFERENCE = re.compile(r"(?i)\b(i prefer|prefer|preference|i want|i'd like|i would like|i'd rather|i would rather|"
                         r"please (?:use|don't|do not|keep|make|avoid|always|never)|don't|do not|never|always|"
                         r"make sure|must|should not|shouldn't|i need|i only|avoid|instead of|no more than|at most|"
                         r"at least|hard requirement)\b")
_STRONG_PREFERENCE = re.compile(r"(?i)\b(i prefer|i'd rather|i would rather|i want|i'd like|i would like|please|don't|"
                                r"do not|never|always|hard requirement|at most|no more than)\b")
_DECISION = re.compile(r"(?i)\b(i will|i'll|i've|"
                       r"i have (?:decided|updated|changed|created|fixed|booked|cancell?ed|added|removed)|"
                       r"let's|we will|we'll|decided|decision|going to|the plan is|i chose|i'm going|"
                       r"switch(?:ed)? to|we should|i recommend|has been (?:updated|changed|created|booked|cancell?ed)|"
                       r"is now|instead of|we go with)\b")
_STRONG_DECISION = re.compile(r"(?i)\b(decided|decision|instead of|switch(?:ed)? to|the plan is|i chose|we go with|"
                              r"has been (?:updated|changed|created|booked|cancell?ed))\b")
_PENDING = re.compile(r"(?i)\b(todo|to do|next|remaining|still need|not yet|pending|follow[- ]up|later|then)\b")
_MUTATING_TOOL = re.compile(r"(?i)^(update|create|book|cancel|edit|write|delete|modify|send|transfer|apply|set|add|"
                            r"remove|patch|commit|submit|str_replace|insert)")
_STOP = frozenset("about after again also anything been before being both could does doing from have having here "  # noqa: SIM905
                  "into just know something whether which whose why how "
                  "like make more most much must need only other over please same should some such than that "
                  "their them then there these they this those through very want what when where which while "
                  "will with would your yours".split())
# an agent asking the user for something it needs (answered by the user's next turn)
_ASKS_FOR_INFO = re.compile(r"(?i)\b(?:could|can|would|will) you (?:please )?(?:provide|share|confirm|tell|give|send|"
                            r"let me know|specify|clarify)|\blet me know\b|\bplease (?:provide|confirm|share|specify)")
_POLITE = re.compile(r"(?i)\b(please|thanks|thank you|appreciate)\b")
_SPEAKER = re.compile(r"^(?:user asked|user|assistant(?: called)?|tool [\w.:-]+|latest request)\s*:\s*", re.I)
_STATS = re.compile(r"^(\d+) earlier messages: (\d+) from the user, (\d+) tool results(?:; tools used: (.*))?$")
_MARKER = re.compile(r"^(?:THOUGHT:|DISCUSSION\b:?)\s*", re.M)
_FENCED = re.compile(r"```[^\n]*\n.*?(?:```|\Z)", re.S)
_MARKUP = re.compile(r"^(?:#{1,6}\s+|[-*+•]\s+|\d+[.)]\s+|>\s*|`{3,}\w*\s*)+")
SOURCE_WEIGHT = {"user": 3.0, "developer": 3.0, "assistant": 2.0, "tool": 1.0}


@dataclass
class Item:
    """One line of a section: its text, where it comes from (for conversation order) and a rank
    score (higher is admitted first)."""

    text: str
    pos: tuple[int, int]  # (round: 0 for an earlier summary, 1 for this head; index in it)
    score: float


def _scan(text: str) -> str:
    if len(text) <= 2 * SCAN_CHARS:
        return text
    return text[:SCAN_CHARS] + "\n" + text[-SCAN_CHARS:]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 2]


def _clip(s: str, n: int = 220) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1].rstrip() + "…"


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


def dedupe_key(text: str) -> str:
    """Items that say the same thing share this key: without the speaker, markup, clipping
    marks and case; the first 60 characters (an item clipped in one round is its longer self)."""
    t = _SPEAKER.sub("", text.strip())
    t = " ".join(t.replace("…", " ").lower().split())
    return t[:60]


def _plain(sentence: str) -> str:
    return _MARKUP.sub("", sentence.strip())


@dataclass
class _Msg:
    role: str
    text: str
    speaker: str
    calls: list[tuple[str, str]]  # (name, arguments) of tool calls


def _messages(head: list[dict[str, Any]]) -> list[_Msg]:
    """Each message's fields read once: role, text, who speaks, tool calls."""
    names: dict[str, str] = {}
    out = []
    harness = harness_keys(head)
    for m in head:
        role = m.get("role")
        text = _scan(content_text(m.get("content")))
        if role == "user" and is_harness(text, harness):
            role = "harness"  # a reminder the harness repeats, or injected context: not the user speaking
        elif role == "user":
            text = without_injected(text)
        calls = []
        if role == "assistant":
            for call in m.get("tool_calls") or ():
                parts = call_parts(call)  # function calls and custom ones (Codex's apply_patch)
                if parts is not None:
                    calls.append(parts)
                    if isinstance(call.get("id"), str):
                        names[call["id"]] = parts[0]
        if calls and "```" in text:  # a text action's code block: the call carries the command
            text = _FENCED.sub(" ", text)
        if role == "assistant" and text.startswith(("THOUGHT:", "DISCUSSION")):  # a harness's format marker
            text = _MARKER.sub("", text)
        if role == "tool":
            # a string in a checked message, or None (no tool_call_id: no name)
            speaker = f"Tool {names.get(cast(str, m.get('tool_call_id')), 'result')}"
        else:
            speaker = "User" if role in ("user", "developer") else "Harness" if role == "harness" \
                else str(role).capitalize()
        out.append(_Msg(str(role), text, speaker, calls))
    return out


# ---------------------------------------------------------------- facts

def _is_path(p: str) -> bool:
    if p.startswith(("/", "~/", "./")) or p.count("/") >= 2:
        return len(p.strip("/.~")) > 2
    return bool(_EXT.search(p)) and not p.endswith("/")


_FACT = re.compile("|".join(f"(?P<{name}>{rx.pattern})" for name, rx in
                            (("url", _URL), ("path", _PATH), ("id", _IDENT), ("number", _NUMBER))))


def _facts_in(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of the URLs, paths, identifiers and numbers in ``text``, in one pass:
    where two could start, the first kind listed wins (a path inside a URL is the URL's)."""
    out = []
    for m in _FACT.finditer(text):
        kind = m.lastgroup or ""
        if kind == "path" and not _is_path(m.group()):
            continue
        out.append((m.start(), m.end(), "path" if kind == "url" else kind))
    return out


def _units(text: str, lines: bool) -> list[tuple[int, int, str]]:
    """Where a fact's context comes from: a tool result's lines, a user's or assistant's sentences.
    Returns (start offset, end offset, text) of each unit."""
    out = []
    if lines:
        at = 0
        for line in text.split("\n"):
            out.append((at, at + len(line), line))
            at += len(line) + 1
        return out
    at = 0
    for part in _SENTENCE.split(text):
        i = text.find(part, at)
        if i < 0:
            continue
        out.append((i, i + len(part), part))
        at = i + len(part)
    return out


def _failure_lines(units: list[tuple[int, int, str]]) -> list[str]:
    """A tool result's error lines: an error message ("ValueError: …", "fatal: …", "EISDIR: …")
    or a short status line saying something went wrong ("Wrong flag!"); never a line of code."""
    out = []
    for _, _, line in units:
        plain = _TAG.sub("", line).strip()
        if not plain or _CODE.search(plain) or _ROUTINE.search(plain):
            continue
        if _ERROR.search(plain) or (len(plain) <= 160 and _FAILURE.search(plain)):
            out.append(plain)
    return out


_WORD = re.compile(r"[A-Za-z]{2,}")
CALL_WEIGHT = 1.5  # the arguments of a tool call: what the agent chose to look at or change


@dataclass
class _Source:
    pos: int  # the message
    weight: float
    speaker: str
    text: str
    units: list[tuple[int, int, str]]
    width: int  # characters of context shown around a fact


def _sources(msgs: list[_Msg]) -> list[_Source]:
    """The texts facts are read from: each message's content (sentences, or lines of a tool
    result) and each tool call's arguments."""
    out = []
    for pos, msg in enumerate(msgs):
        if msg.text and msg.role in SOURCE_WEIGHT:
            tool = msg.role == "tool"
            out.append(_Source(pos, SOURCE_WEIGHT[msg.role], msg.speaker, msg.text, _units(msg.text, tool),
                               110 if tool else 160))
        for name, args in msg.calls:
            if args and args != "{}":
                out.append(_Source(pos, CALL_WEIGHT, f"Assistant called {name}", args, [(0, len(args), args)], 110))
    return out


def fact_items(msgs: list[_Msg], limit: int | None = None) -> list[Item]:
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
    found: list[tuple[_Source, list[tuple[int, int, int]]]] = []  # (source, facts: start, end, unit)
    shapes: Counter[str] = Counter()
    items: list[Item] = []
    for src in _sources(msgs):
        msg = msgs[src.pos]
        lines = msg.role == "tool" and src.speaker == msg.speaker
        if lines:
            items += [Item(f"{src.speaker}: {_clip(line, 180)}", (1, src.pos), 1.5 * (1 + 0.2 * src.pos / n))
                      for line in _failure_lines(src.units)[:3]]
        facts = _facts_in(src.text)
        if not facts:
            continue
        starts = [u[0] for u in src.units]
        located = []
        for a, b, _ in facts:
            k = bisect_right(starts, a) - 1
            if k < 0 or src.units[k][1] < b:
                continue
            if lines and (_CODE.search(src.units[k][2]) or _ROUTINE.search(src.units[k][2])):
                continue  # a path or number in listed code is the code's; routine output states no fact
            located.append((a, b, k))
        if located:
            found.append((src, located))
            for k in dict.fromkeys(k for _, _, k in located):
                u = src.units[k]
                shapes[_shape(u[2], [(a - u[0], b - u[0]) for a, b, kk in located if kk == k])] += 1
    where: dict[str, tuple[float, int, int, int, int]] = {}  # fact -> (weight, source, start, end, unit)
    # recurrence (float bonuses in a Counter: a fact that does not recur reads 0)
    bonus = cast("dict[str, float]", Counter())
    # a tool call's arguments count for the facts nothing else states (a reservation looked up,
    # a file read whose path no output repeats): read them last, adding no weight to the others
    found.sort(key=lambda f: f[0].weight == CALL_WEIGHT)
    for si, (src, located) in enumerate(found):
        call = src.weight == CALL_WEIGHT
        per_unit = Counter(k for _, _, k in located)
        in_message = len({src.text[a:b] for a, b, _ in located})
        base = (src.weight * (1 + 0.2 * src.pos / n) / in_message ** 0.2
                * min(1.0, (2000 / len(src.text)) ** 0.25))
        unit_weight: dict[int, float] = {}
        for k, count in per_unit.items():
            start, _end, text = src.units[k]
            spans = [(a - start, b - start) for a, b, kk in located if kk == k]
            rest = text
            for a, b in sorted(spans, reverse=True):
                rest = rest[:a] + " " + rest[b:]
            # JSON keys are no prose
            prose = 2.0 if src.weight != CALL_WEIGHT and len(_WORD.findall(rest)) >= 2 else 1.0
            unit_weight[k] = base * prose / count ** 0.5 / shapes[_shape(text, spans)] ** 0.5
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
        lead = len(text) - len(_MARKUP.sub("", text)) if src.width > 110 else 0  # a sentence: without list markers
        snippet = _window(text[lead:], a - start - lead, b - start - lead, src.width)
        if src.width > 110:
            snippet = snippet.replace("**", "")  # and without emphasis
        items.append(Item(f"{src.speaker}: {snippet}", (1, src.pos), weight + bonus[fact]))
    return items


def _shape(line: str, spans: list[tuple[int, int]]) -> str:
    """A line with its facts and digits blanked: lines of one shape are routine output."""
    for a, b in sorted(spans, reverse=True):
        line = line[:a] + "\x00" + line[b:]
    return re.sub(r"\d+", "#", " ".join(line.split()).lower())[:48]


# ---------------------------------------------------------------- the sections

def split_previous_summary(system_text: str) -> tuple[str, dict[str, str] | None]:
    """A system message written by an earlier round is (prompt text +) summary + note: split
    it so the earlier summary's items carry over instead of being read as a prompt."""
    at = system_text.find("## system_context")
    if at < 0:
        return system_text, None
    body = split_evidence(system_text[at:])[0]  # the evidence section is xcompact's own, carried over by the tier
    note = body.find("\n\n[Compaction note")
    if note >= 0:
        body = body[:note]
    try:
        return system_text[:at].strip(), parse_sections(body)
    except BackendError:
        return system_text, None


def _ranked(items: list[Item]) -> list[Item]:
    """Best first; the same text (by ``dedupe_key``) only once, in its best-ranked occurrence."""
    out, seen = [], set()
    for it in sorted(items, key=lambda it: (-it.score, it.pos)):
        key = dedupe_key(it.text)
        if key and key not in seen:
            seen.add(key)
            out.append(it)
    return out


def _stats_line(msgs: list[_Msg], previous: list[str]) -> str:
    n_user = sum(1 for m in msgs if m.role == "user")
    n_tool = sum(1 for m in msgs if m.role == "tool")
    total = len(msgs)
    tools: Counter[str] = Counter(name for m in msgs for name, _ in m.calls)
    for line in previous:  # an earlier round's counts add up with this one's
        m = _STATS.match(line)
        if m:
            total += int(m.group(1))
            n_user += int(m.group(2))
            n_tool += int(m.group(3))
            for name, count in re.findall(r"(\S+) ×(\d+)", m.group(4) or ""):
                tools[name] += int(count)
    stats = f"{total} earlier messages: {n_user} from the user, {n_tool} tool results"
    if tools:
        stats += "; tools used: " + ", ".join(f"{name} ×{c}" for name, c in tools.most_common(8))
    return stats


def build_candidates(request: SummaryRequest) -> dict[str, list[Item]]:
    """Every section's items, best first."""
    msgs = _messages(request.head)
    prompt_text, previous = split_previous_summary(request.system_text)
    old = {s: [line[2:].strip() for line in (previous or {}).get(s, "").splitlines() if line.startswith("- ")]
           for s in SECTIONS}
    n = max(1, len(msgs))

    def recency(pos: int) -> float:
        return 1 + pos / n

    sys_sents = [_plain(s) for s in _sentences(prompt_text)]
    system_context = [Item(_clip(s, 300), (1, i), 10.0 - i) for i, s in enumerate(x for x in sys_sents if x)][:4]

    # the first request frames the task (it comes first, even at a tiny budget); the counts; the
    # latest request says where it stands
    overview = [Item(_stats_line(msgs, old["overview"]), (-1, 0), 90.0)]
    asked = [(pos, _clip(" ".join(_sentences(m.text)[:2]), 260)) for pos, m in enumerate(msgs)
             if m.role in ("user", "developer") and m.text.strip()]
    for k, (pos, text) in enumerate(asked):
        score = 100.0 if k == 0 else 40.0 if k == len(asked) - 1 else 10.0 + recency(pos)
        overview.append(Item(f"User asked: {text}", (1, pos), score))

    limit = request.max_tokens // 3 + 1  # a bullet line costs at least 3 tokens: no more items can fit
    key_facts = fact_items(msgs, limit)

    prefs = []
    for pos, m in enumerate(msgs):
        if m.role != "user":  # things the user asked for (a developer message is the client's)
            continue
        found = [s for s in _sentences(_asked(m.text)) if _PREFERENCE.search(s) and not _CODE.search(s)
                 and not _ROUTINE.search(s) and len(s) < 400]
        for s in found:
            strong = 2.0 if _STRONG_PREFERENCE.search(s) else 1.0
            prefs.append(Item(f"{m.speaker}: {_clip(_plain(s))}", (1, pos), strong / len(found) ** 0.5 * recency(pos)))

    decisions = []
    for pos, m in enumerate(msgs):
        if m.role != "assistant":
            continue
        found = [s for s in _sentences(m.text) if _DECISION.search(s) and not _CODE.search(s) and not s.endswith("?")]
        for s in found:
            strong = 2.0 if _STRONG_DECISION.search(s) else 1.0
            decisions.append(Item(f"Assistant: {_clip(_plain(s))}", (1, pos),
                                  strong / len(found) ** 0.5 * recency(pos)))
        for name, args in m.calls:
            if _MUTATING_TOOL.match(name):
                decisions.append(Item(f"Assistant called {name}({_clip(args, 160)})", (1, pos), 1.5 * recency(pos)))

    pending = []
    users = [pos for pos, m in enumerate(msgs) if m.role in ("user", "developer") and m.text.strip()]
    if users:
        latest = msgs[users[-1]]
        pending.append(Item(f"Latest request: {_clip(' '.join(_sentences(latest.text)[:3]), 300)}", (1, users[-1]),
                            100.0))
    # an agent's "next, I will …" is pending only when no action followed it in the head: what it
    # said with or before its last tool call, it went on to do (or to drop)
    last_action = max((pos for pos, m in enumerate(msgs) if m.calls), default=-1)
    for pos, m in enumerate(msgs):
        if m.role == "assistant" and pos > last_action:
            for s in _sentences(m.text):
                if _PENDING.search(s) and not s.endswith("?") and not _CODE.search(s):
                    pending.append(Item(f"Assistant: {_clip(_plain(s))}", (1, pos), recency(pos)))

    # a question is open when the other side's next turn does not take it up (shares none of
    # its words) or never came; answered questions are not open
    following = _next_turns(msgs)
    questions = []
    for pos, m in enumerate(msgs):
        if m.role not in ("user", "assistant"):
            continue
        reply = following[pos]
        for s in _sentences(_asked(m.text) if m.role == "user" else m.text):
            if m.role == "assistant" and reply is not None and _ASKS_FOR_INFO.search(s):
                continue  # "Could you provide your user ID?": the user's next turn gave it
            if s.endswith("?") and not _CODE.search(s) and not _answered(s, reply):
                questions.append(Item(f"{m.speaker}: {_clip(_plain(s))}", (1, pos), 10.0 + recency(pos)))

    user_texts = [m.text for m in msgs if m.role in ("user", "developer") and m.text.strip()]
    tone = []
    if user_texts:
        words = [len(t.split()) for t in user_texts]
        polite = any(_POLITE.search(t) for t in user_texts)
        style = "brief" if sum(words) / len(words) < 25 else "detailed"
        tone.append(Item(f"User writes {style} messages (about {sum(words) // len(words)} words)"
                         f"{', politely' if polite else ''}.", (1, 0), 2.0))
        if _foreign_letters(user_texts):
            tone.append(Item("User writes partly in a non-Latin script; answer in the user's language.", (1, 1), 1.5))
    tools_used = any(m.calls for m in msgs)
    tone.append(Item("Assistant acts as a tool-using agent." if tools_used else "Plain conversation without tools.",
                     (1, 2), 1.0))

    fresh = {"system_context": system_context, "overview": overview, "key_facts": key_facts,
             "user_preferences": prefs, "decisions": decisions, "pending_tasks": pending,
             "open_questions": questions, "tone_context": tone}
    if previous is None:
        return {s: _ranked(items)[:limit] for s, items in fresh.items()}
    return {s: _ranked(_carry_over(s, fresh[s], old[s], bool(sys_sents)))[:limit] for s in SECTIONS}


def _asked(text: str) -> str:
    """A user turn without what the client injected into it."""
    return without_injected(text)


def _foreign_letters(texts: list[str]) -> bool:
    """The user writes in a script other than Latin: letters (not punctuation, symbols, dashes,
    ellipses or zero-width characters) of another script, at least 20 and a tenth of the letters."""
    foreign = letters = 0
    for t in texts:
        for c in t[:2000]:
            if c.isalpha():
                letters += 1
                if ord(c) > 0x24F and not unicodedata.name(c, "LATIN").startswith("LATIN"):
                    foreign += 1
    return foreign >= 20 and foreign * 10 >= letters


def _content_words(text: str) -> set[str]:
    return {w[:-1] if w.endswith("s") and len(w) > 4 else w
            for w in re.findall(r"[a-z][a-z0-9_-]{3,}", text.lower()) if w not in _STOP}


def _next_turns(msgs: list[_Msg]) -> list[str | None]:
    """For each user or agent message, what the other side said next: the user's next turn, or
    what the agent wrote until the user spoke again (not its tool output, which mentions much
    and answers nothing by itself); None when the other side never spoke after it."""
    sides: list[tuple[str, list[str]]] = []
    seg_of: list[int | None] = []
    for m in msgs:
        side = "user" if m.role == "user" else "agent" if m.role in ("assistant", "tool") else None
        if side is None:
            seg_of.append(None)
            continue
        if not sides or sides[-1][0] != side:
            sides.append((side, []))
        if m.role != "tool" and sum(len(t) for t in sides[-1][1]) < 4000:  # what was said, not tool output
            sides[-1][1].append(m.text[:4000])
        seg_of.append(len(sides) - 1)
    return [None if k is None or k + 1 >= len(sides) else "\n".join(sides[k + 1][1]) for k in seg_of]


def _answered(question: str, reply: str | None) -> bool:
    """The reply takes the question up: it shares most of its content words ("Which cabins are
    available?" -> "Economy and business cabins are available"); a word or two in common, as any
    two turns of one session have, is not an answer."""
    if reply is None:
        return False
    words = _content_words(question)
    if not words:
        return True  # "Anything else?": nothing to keep open
    return len(words & _content_words(reply)) > len(words) // 2


def _carry_over(section: str, new: list[Item], old: list[str], has_prompt: bool) -> list[Item]:
    """A later round: the earlier summary's items (older, so listed first) compete with the new
    ones, item by item; what the new head restates replaces its old copy."""
    if section == "system_context" and has_prompt:
        old = []
    if section == "overview":  # the counts were added up into the new stats line
        old = [x for x in old if not _STATS.match(x)]
    if section == "pending_tasks" and any(it.text.startswith("Latest request:") for it in new):
        old = [x for x in old if not x.startswith("Latest request:")]
    if section == "tone_context":  # the style is measured again on the new head
        kinds = {tuple(it.text.split(" ")[:2]) for it in new}
        old = [x for x in old if tuple(x.split(" ")[:2]) not in kinds]
    top = max((it.score for it in new), default=1.0)
    new_keys = {dedupe_key(it.text) for it in new}
    # old item k ranks between the new items k and k + 1
    ranks = sorted(new, key=lambda it: -it.score)
    carried = []
    for k, text in enumerate(old):
        if dedupe_key(text) in new_keys:
            continue
        below = ranks[k].score if k < len(ranks) else 0.0
        carried.append(Item(text, (0, k), below - 1e-6 if k < len(ranks) else top * 1e-3 / (k + 1)))
    return new + carried


# ---------------------------------------------------------------- fitting the budget

def _render(chosen: dict[str, list[Item]]) -> str:
    return render_sections({s: "\n".join(f"- {it.text}" for it in sorted(items, key=lambda it: it.pos))
                            for s, items in chosen.items()})


def _fit_item(text: str, room: int, count: Callable[[str], int]) -> str | None:
    """``text`` cut (at a word, with …) to cost at most ``room`` tokens as a bullet line, or None."""
    words = text.split()
    lo, hi, best = 1, len(words), None
    while lo <= hi:
        mid = (lo + hi) // 2
        cand = " ".join(words[:mid]) + ("…" if mid < len(words) else "")
        if count(f"- {cand}\n") <= room:
            best, lo = cand, mid + 1
        else:
            hi = mid - 1
    return best


def fit_to_budget(candidates: dict[str, list[Item]], max_tokens: int, count: Callable[[str], int]) -> str:
    """Admit items round robin by rank (every section's best first), the overview's first
    before anything, while the rendered summary stays within ``max_tokens``; list them in
    conversation order."""
    chosen: dict[str, list[Item]] = {s: [] for s in SECTIONS}
    used = count(_render(chosen))
    none_cost = count("(none)")
    overview: list[Item] | list[None] = candidates.get("overview") or [None]
    first = overview[0]
    if first is not None:  # what the conversation was is never dropped: clipped to fit if need be
        room = max_tokens - used + none_cost
        text = first.text if count(f"- {first.text}\n") <= room else _fit_item(first.text, room, count)
        if text:
            chosen["overview"].append(Item(text, first.pos, first.score))
            used = count(_render(chosen))
    depth = max((len(v) for v in candidates.values()), default=0)
    for rank in range(depth):
        for section in SECTIONS:
            items = candidates.get(section) or []
            if rank >= len(items) or (section == "overview" and rank == 0):
                continue
            cost = count(f"- {items[rank].text}\n") + (0 if chosen[section] else -none_cost)
            if used + cost > max_tokens:
                continue
            chosen[section].append(items[rank])
            used += cost
    text = _render(chosen)
    while count(text) > max_tokens:  # token merges across lines can differ from the estimate
        longest = max(SECTIONS, key=lambda s: len(chosen[s]))
        if not chosen[longest]:
            break
        worst = min(chosen[longest], key=lambda it: it.score)
        chosen[longest].remove(worst)
        text = _render(chosen)
    return text


class ExtractiveBackend:
    """Offline, deterministic summaries built from the head's own sentences and facts."""

    name = "extractive"
    model = None

    def __init__(self, count_tokens: Callable[[str], int]) -> None:
        self.count = count_tokens

    async def summarize(self, request: SummaryRequest) -> Answer:
        return Answer(self.summarize_sync(request))

    async def aclose(self) -> None:
        """Nothing to close: no connections, no cache."""

    def summarize_sync(self, request: SummaryRequest) -> str:
        return fit_to_budget(build_candidates(request), request.max_tokens, self.count)
