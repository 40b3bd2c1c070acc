"""The built-in offline summariser: picks sentences and facts from the head itself.

Deterministic and model-free. Each section is a ranked list of short items (facts such as
file paths, identifiers, numbers, errors and tool names; user sentences stating preferences;
assistant statements of decisions; open questions); the items are admitted by rank, round
robin across sections, until the rendered summary reaches the token budget."""

from __future__ import annotations

import re
from collections import Counter
from typing import Callable

from ..conversation import content_text
from ..errors import BackendError
from ..sections import SECTIONS, parse_sections, render_sections
from . import Answer, SummaryRequest

SCAN_CHARS = 20_000  # per message: the first and last SCAN_CHARS characters are read
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_PATH = re.compile(r"(?<![\w/.-])(?:~?/)?(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|js|ts|tsx|json|jsonl|md|txt|ya?ml|toml|"
                   r"rs|go|java|c|h|cpp|sh|cfg|ini|html|css|sql|csv|log|lock|ex|exs|rb)\b")
_IDENT = re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,10}\b|\b[a-z]+_[a-z]+_?\d+\b|\b[A-Z]{2,5}-\d+\b")
_NUMBER = re.compile(r"[$€£]\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)?\s?(?:%|ms|s|MB|GB|KB|MiB|GiB|USD|EUR|dollars|"
                     r"tokens|seconds|minutes|hours|days|items|lines|bags|passengers|tests?)\b|\b\d{4}-\d{2}-\d{2}\b")
_ERROR = re.compile(r"(?i)\b(error|exception|traceback|failed|failure|fatal|denied|not found)\b")
_PREFERENCE = re.compile(r"(?i)\b(i prefer|prefer|preference|i want|i'd like|i would like|i'd rather|please (?:use|don't|do not|"
                         r"keep|make|avoid|always|never)|don't|do not|never|always|make sure|must|should not|shouldn't|"
                         r"i need|i only|avoid|instead of|no more than|at most|at least)\b")
_DECISION = re.compile(r"(?i)\b(i will|i'll|i've|i have (?:decided|updated|changed|created|fixed|booked|cancell?ed|added|removed)|"
                       r"let's|we will|we'll|decided|decision|going to|the plan is|i chose|i'm going|switch(?:ed)? to|"
                       r"we should|i recommend|has been (?:updated|changed|created|booked|cancell?ed)|is now)\b")
_PENDING = re.compile(r"(?i)\b(todo|to do|next|remaining|still need|not yet|pending|follow[- ]up|later|then)\b")
_MUTATING_TOOL = re.compile(r"(?i)^(update|create|book|cancel|edit|write|delete|modify|send|transfer|apply|set|add|remove|"
                            r"patch|commit|submit|str_replace|insert)")
_POLITE = re.compile(r"(?i)\b(please|thanks|thank you|appreciate)\b")


def _scan(text: str) -> str:
    if len(text) <= 2 * SCAN_CHARS:
        return text
    return text[:SCAN_CHARS] + "\n" + text[-SCAN_CHARS:]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 2]


def _clip(s: str, n: int = 220) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1].rstrip() + "…"


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for it in items:
        key = it.lower()
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out


SOURCE_WEIGHT = {"user": 3.0, "developer": 3.0, "assistant": 2.0, "tool": 1.0}


def rank_facts(head: list[dict]) -> list[str]:
    """Paths, identifiers, numbers and error lines, most salient first.

    A fact weighs more when the user or the assistant said it, when it stands nearly alone in
    its message (one number in a sentence, not one of hundreds in a log dump: weight divided by
    the square root of the facts found in that message), when it recurs, and slightly when it
    is recent."""
    scores: dict[str, float] = {}
    order: dict[str, int] = {}
    n = max(1, len(head))
    for pos, m in enumerate(head):
        text = _scan(content_text(m.get("content")))
        if not text:
            continue
        found = ([f"File: {x}" for x in _PATH.findall(text)] + [f"ID: {x}" for x in _IDENT.findall(text)]
                 + [f"Number: {x.strip()}" for x in _NUMBER.findall(text)])
        if m.get("role") in ("tool", "assistant"):
            found += [f"Error: {_clip(line, 160)}" for line in text.splitlines() if _ERROR.search(line)][:3]
        if not found:
            continue
        unique = list(dict.fromkeys(found))  # ordered: a set's order changes with the hash seed
        weight = SOURCE_WEIGHT.get(m.get("role"), 1.0) / len(unique) ** 0.5 * (1 + 0.2 * pos / n)
        for fact in unique:
            scores[fact] = max(scores.get(fact, 0.0), weight) + (0.25 if fact in scores else 0.0)
            order.setdefault(fact, len(order))
    return sorted(scores, key=lambda f: (-scores[f], order[f]))


def _zip_longest(a: list[str], b: list[str]) -> list[tuple[str | None, str | None]]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else None, b[i] if i < len(b) else None) for i in range(n)]


def split_previous_summary(system_text: str) -> tuple[str, dict[str, str] | None]:
    """A system message written by an earlier round is (prompt text +) summary + note: split
    it so the earlier summary's items carry over instead of being read as a prompt."""
    at = system_text.find("## system_context")
    if at < 0:
        return system_text, None
    body = system_text[at:]
    note = body.find("\n\n[Compaction note")
    if note >= 0:
        body = body[:note]
    try:
        return system_text[:at].strip(), parse_sections(body)
    except BackendError:
        return system_text, None


def build_candidates(request: SummaryRequest) -> dict[str, list[str]]:
    """Every section's items, best first."""
    head = request.head
    user_texts, asst_texts, tool_texts = [], [], []
    tool_names: Counter = Counter()
    actions: list[str] = []
    for m in head:
        role = m.get("role")
        t = _scan(content_text(m.get("content")))
        if role in ("user", "developer"):
            user_texts.append(t)
        elif role == "assistant":
            asst_texts.append(t)
            for call in m.get("tool_calls") or ():
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                    tool_names[fn["name"]] += 1
                    if _MUTATING_TOOL.match(fn["name"]):
                        actions.append(f"Called {fn['name']}({_clip(str(fn.get('arguments') or ''), 160)})")
        elif role == "tool":
            tool_texts.append(t)

    prompt_text, previous = split_previous_summary(request.system_text)
    sys_sents = _sentences(prompt_text)[:4]
    system_context = [_clip(s, 300) for s in sys_sents] or ["(no system prompt)"]

    n_user = sum(1 for m in head if m.get("role") == "user")
    n_tool = sum(1 for m in head if m.get("role") == "tool")
    stats = f"{len(head)} earlier messages: {n_user} from the user, {n_tool} tool results"
    if tool_names:
        stats += "; tools used: " + ", ".join(f"{n} ×{c}" for n, c in tool_names.most_common(8))
    asked = _dedupe([_clip(" ".join(_sentences(t)[:2]), 260) for t in user_texts if t.strip()])
    if len(asked) > 2:  # the first request frames the task; the latest ones say where it stands
        asked = [asked[0]] + asked[:0:-1]
    overview = [stats] + [f"User asked: {a}" for a in asked]

    key_facts = rank_facts(head)

    prefs = _dedupe([_clip(s) for t in user_texts for s in _sentences(t) if _PREFERENCE.search(s)])
    decisions = _dedupe([_clip(s) for t in asst_texts for s in _sentences(t) if _DECISION.search(s)] + actions)
    decisions.reverse()  # the latest decisions matter most

    pending = []
    if user_texts:
        pending.append(f"Latest request: {_clip(' '.join(_sentences(user_texts[-1])[:3]), 300)}")
    pending += _dedupe([_clip(s) for t in reversed(asst_texts) for s in _sentences(t)
                        if _PENDING.search(s) and not s.endswith("?")])

    # a question is open when the other side never spoke after it: compare with the other side's
    # last position (one pass), not with the set of roles after each message (quadratic)
    last_at = {m.get("role"): i for i, m in enumerate(head) if m.get("role") in ("user", "assistant")}
    questions = []
    for i, m in enumerate(head):
        if m.get("role") not in ("user", "assistant"):
            continue
        other = "assistant" if m["role"] == "user" else "user"
        for s in _sentences(_scan(content_text(m.get("content")))):
            if s.endswith("?"):
                questions.append((last_at.get(other, -1) <= i, i, f"{m['role'].capitalize()}: {_clip(s)}"))
    questions.sort(key=lambda q: (not q[0], -q[1]))
    open_questions = _dedupe([q[2] for q in questions])

    words = [len(t.split()) for t in user_texts if t.strip()]
    tone = []
    if words:
        polite = sum(1 for t in user_texts if _POLITE.search(t))
        style = "brief" if sum(words) / len(words) < 25 else "detailed"
        tone.append(f"User writes {style} messages (about {sum(words) // len(words)} words)"
                    f"{', politely' if polite else ''}.")
        if any(ord(c) > 0x2FF for t in user_texts for c in t[:2000]):
            tone.append("User writes partly in a non-Latin script; answer in the user's language.")
    tone.append("Assistant acts as a tool-using agent." if tool_names else "Plain conversation without tools.")

    fresh = {"system_context": system_context, "overview": overview, "key_facts": key_facts,
             "user_preferences": prefs, "decisions": decisions, "pending_tasks": pending,
             "open_questions": open_questions, "tone_context": tone}
    if previous is None:
        return fresh
    # a later round: what the earlier summary kept competes with what is new, item by item
    merged = {}
    for section in SECTIONS:
        old = [line[2:].strip() for line in previous.get(section, "").splitlines() if line.startswith("- ")]
        new = fresh[section] if not (section == "system_context" and not sys_sents) else []
        merged[section] = _dedupe([x for pair in _zip_longest(new, old) for x in pair if x])
    return merged


def fit_to_budget(candidates: dict[str, list[str]], max_tokens: int, count: Callable[[str], int]) -> str:
    """Admit items round robin by rank (every section's best first) while the rendered summary
    stays within ``max_tokens``."""
    chosen: dict[str, list[str]] = {s: [] for s in SECTIONS}

    def render() -> str:
        return render_sections({s: "\n".join(f"- {x}" for x in items) for s, items in chosen.items()})

    used = count(render())
    depth = max((len(v) for v in candidates.values()), default=0)
    for rank in range(depth):
        for section in SECTIONS:
            items = candidates.get(section) or []
            if rank >= len(items):
                continue
            cost = count(f"- {items[rank]}\n") + (0 if chosen[section] else -count("(none)"))
            if used + cost > max_tokens:
                continue
            chosen[section].append(items[rank])
            used += cost
    text = render()
    while count(text) > max_tokens:  # token merges across lines can differ from the estimate
        longest = max(SECTIONS, key=lambda s: len(chosen[s]))
        if not chosen[longest]:
            break
        chosen[longest].pop()
        text = render()
    return text


class ExtractiveBackend:
    """Offline, deterministic summaries built from the head's own sentences and facts."""

    name = "extractive"
    model = None

    def __init__(self, count_tokens: Callable[[str], int]) -> None:
        self.count = count_tokens

    async def summarize(self, request: SummaryRequest) -> Answer:
        return Answer(self.summarize_sync(request))

    def summarize_sync(self, request: SummaryRequest) -> str:
        return fit_to_budget(build_candidates(request), request.max_tokens, self.count)
