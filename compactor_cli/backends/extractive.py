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
from collections import Counter
from collections.abc import Callable

from ..errors import BackendError
from ..evidence.harness import without_injected
from . import Answer, SummaryRequest
from .facts import fact_items, gated, is_code, is_routine
from .messages import Item, Msg, clip, dedupe_key, plain_text, read_messages, sentences
from .sections import SECTIONS, parse_sections, render_sections, split_evidence

_PREFERENCE = gated(r"\b(i prefer|prefer|preference|i want|i'd like|i would like|i'd rather|i would rather|"
                    r"please (?:use|don't|do not|keep|make|avoid|always|never)|don't|do not|never|always|"
                    r"make sure|must|should not|shouldn't|i need|i only|avoid|instead of|no more than|at most|"
                    r"at least|hard requirement)\b", "adhimnps", re.I)
_STRONG_PREFERENCE = gated(r"\b(i prefer|i'd rather|i would rather|i want|i'd like|i would like|please|don't|"
                           r"do not|never|always|hard requirement|at most|no more than)\b", "adhinp", re.I)
_DECISION = gated(r"\b(i will|i'll|i've|"
                  r"i have (?:decided|updated|changed|created|fixed|booked|cancell?ed|added|removed)|"
                  r"let's|we will|we'll|decided|decision|going to|the plan is|i chose|i'm going|"
                  r"switch(?:ed)? to|we should|i recommend|has been (?:updated|changed|created|booked|cancell?ed)|"
                  r"is now|instead of|we go with)\b", "dghilstw", re.I)
_STRONG_DECISION = gated(r"\b(decided|decision|instead of|switch(?:ed)? to|the plan is|i chose|we go with|"
                         r"has been (?:updated|changed|created|booked|cancell?ed))\b", "dhistw", re.I)
_PENDING = gated(r"\b(todo|to do|next|remaining|still need|not yet|pending|follow[- ]up|later|then)\b", "flnprst", re.I)
_MUTATING_TOOL = re.compile(r"(?i)^(update|create|book|cancel|edit|write|delete|modify|send|transfer|apply|set|add|"
                            r"remove|patch|commit|submit|str_replace|insert)")
_STOP = frozenset("about after again also anything been before being both could does doing from have having here "  # noqa: SIM905
                  "into just know something whether which whose why how "
                  "like make more most much must need only other over please same should some such than that "
                  "their them then there these they this those through very want what when where which while "
                  "will with would your yours".split())
# an agent asking the user for something it needs (answered by the user's next turn)
_ASKS_FOR_INFO = gated(r"\b(?:could|can|would|will) you (?:please )?(?:provide|share|confirm|tell|give|send|"
                       r"let me know|specify|clarify)|\blet me know\b|\bplease (?:provide|confirm|share|specify)",
                       "clpw", re.I)
_POLITE = re.compile(r"(?i)\b(please|thanks|thank you|appreciate)\b")
_STATS = re.compile(r"^(\d+) earlier messages: (\d+) from the user, (\d+) tool results(?:; tools used: (.*))?$")


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


def _stats_line(msgs: list[Msg], previous: list[str]) -> str:
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
    msgs = read_messages(request.head)
    prompt_text, previous = split_previous_summary(request.system_text)
    old = {s: [line[2:].strip() for line in (previous or {}).get(s, "").splitlines() if line.startswith("- ")]
           for s in SECTIONS}
    n = max(1, len(msgs))

    def recency(pos: int) -> float:
        return 1 + pos / n

    sys_sents = [plain_text(s) for s in sentences(prompt_text)]
    system_context = [Item(clip(s, 300), (1, i), 10.0 - i) for i, s in enumerate(x for x in sys_sents if x)][:4]

    # the first request frames the task (it comes first, even at a tiny budget); the counts; the
    # latest request says where it stands
    overview = [Item(_stats_line(msgs, old["overview"]), (-1, 0), 90.0)]
    asked = [(pos, clip(" ".join(m.sentences[:2]), 260)) for pos, m in enumerate(msgs)
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
        found = [s for s in sentences(_asked(m.text)) if _PREFERENCE.search(s) and not is_code(s)
                 and not is_routine(s) and len(s) < 400]
        for s in found:
            strong = 2.0 if _STRONG_PREFERENCE.search(s) else 1.0
            prefs.append(Item(f"{m.speaker}: {clip(plain_text(s))}", (1, pos),
                              strong / len(found) ** 0.5 * recency(pos)))

    decisions = []
    for pos, m in enumerate(msgs):
        if m.role != "assistant":
            continue
        found = [s for s in m.sentences if not s.endswith("?") and _DECISION.search(s) and not is_code(s)]
        for s in found:
            strong = 2.0 if _STRONG_DECISION.search(s) else 1.0
            decisions.append(Item(f"Assistant: {clip(plain_text(s))}", (1, pos),
                                  strong / len(found) ** 0.5 * recency(pos)))
        for name, args in m.calls:
            if _MUTATING_TOOL.match(name):
                decisions.append(Item(f"Assistant called {name}({clip(args, 160)})", (1, pos), 1.5 * recency(pos)))

    pending = []
    users = [pos for pos, m in enumerate(msgs) if m.role in ("user", "developer") and m.text.strip()]
    if users and not _handled(msgs[users[-1] + 1:]):  # a request the head saw done is not pending
        latest = msgs[users[-1]]
        pending.append(Item(f"Latest request: {clip(' '.join(latest.sentences[:3]), 300)}", (1, users[-1]),
                            100.0))
    # an agent's "next, I will …" is pending only when no action followed it in the head: what it
    # said with or before its last tool call, it went on to do (or to drop)
    last_action = max((pos for pos, m in enumerate(msgs) if m.calls), default=-1)
    for pos, m in enumerate(msgs):
        if m.role == "assistant" and pos > last_action:
            for s in m.sentences:
                if not s.endswith("?") and _PENDING.search(s) and not is_code(s):
                    pending.append(Item(f"Assistant: {clip(plain_text(s))}", (1, pos), recency(pos)))

    # a question is open when the other side's next turn does not take it up (shares none of
    # its words) or never came; answered questions are not open
    following = _next_turns(msgs)
    questions = []
    for pos, m in enumerate(msgs):
        if m.role not in ("user", "assistant"):
            continue
        reply = following[pos]
        for s in sentences(_asked(m.text)) if m.role == "user" else m.sentences:
            if not s.endswith("?"):  # the cheap test first: only a question can be open
                continue
            if m.role == "assistant" and reply is not None and _ASKS_FOR_INFO.search(s):
                continue  # "Could you provide your user ID?": the user's next turn gave it
            if not is_code(s) and not _answered(s, reply):
                questions.append(Item(f"{m.speaker}: {clip(plain_text(s))}", (1, pos), 10.0 + recency(pos)))

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


def _handled(after: list[Msg]) -> bool:
    """The messages after a request show it done: the agent acted on it (a tool call), then
    answered (an assistant message without calls after its last one) with no question back
    (a confirmation asked for is still pending). The overview still says what was asked."""
    last_call = max((i for i, m in enumerate(after) if m.calls), default=-1)
    answers = [m.text.strip() for m in after[last_call + 1:]
               if m.role == "assistant" and not m.calls and m.text.strip()]
    return last_call >= 0 and bool(answers) and not answers[-1].endswith("?")


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


def _next_turns(msgs: list[Msg]) -> list[str | None]:
    """For each user or agent message, what the other side said next: the user's next turn, or
    what the agent wrote until the user spoke again (not its tool output, which mentions much
    and answers nothing by itself); None when the other side never spoke after it."""
    sides: list[tuple[str, list[str]]] = []
    said = 0  # characters in the current side's texts (a sum kept, not recounted per message)
    seg_of: list[int | None] = []
    for m in msgs:
        side = "user" if m.role == "user" else "agent" if m.role in ("assistant", "tool") else None
        if side is None:
            seg_of.append(None)
            continue
        if not sides or sides[-1][0] != side:
            sides.append((side, []))
            said = 0
        if m.role != "tool" and said < 4000:  # what was said, not tool output
            text = m.text[:4000]
            sides[-1][1].append(text)
            said += len(text)
        seg_of.append(len(sides) - 1)
    replies = ["\n".join(texts) for _, texts in sides[1:]] + [None]  # side k's reply: side k + 1's texts, joined once
    return [None if k is None else replies[k] for k in seg_of]


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
