"""One conversation as compacted, for ``xcompact show``: each message with its tokens, tool
calls paired with their results, placeholders marked with the original they stand for (from
the dump's store), and each summary with the messages it replaced (from the archive).

The view is built from the internal dump, so it is the same for every format xcompact reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.conversation import ARCHIVE_KEY, COUNTER_KEY, ORIGINALS_KEY, call_parts, content_text
from ..model.tokens import REPLY_PRIMING, TokenCounter
from ..tiers.store import read_aliases, slot_key, tool_slots


@dataclass
class ShownCall:
    """A tool call of an assistant message, and where its result is."""

    id: str
    name: str
    arguments: str
    result_at: str | None = None  # anchor of the result message


@dataclass
class ShownMessage:
    anchor: str  # "m3" for messages[3], "r1-5" for the 5th message of archived round 1
    position: str  # what a person reads: "3", "round 1 · 5"
    role: str
    text: str
    tokens: int | None
    calls: list[ShownCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    call_at: str | None = None  # anchor of the assistant message that made the call
    placeholder: bool = False  # the content is a placeholder naming its tool-call ID
    store_key: str | None = None  # where its original is stored (what extract takes)
    original: str | None = None  # the original's text (None: not stored)
    original_tokens: int | None = None
    summary: bool = False  # the system message that carries a summary
    prompt: str = ""  # with a summary: the system prompt kept verbatim above it (``text`` is the summary)


@dataclass
class ShownRound:
    """One archived summary round: the messages its summary replaced."""

    number: int
    dropped: bool
    system: ShownMessage | None
    head: list[ShownMessage]
    dropped_ids: list[str] = field(default_factory=list)


@dataclass
class LostEvidence:
    """The evidence probes (``compactor_cli.evidence``) taken from what the compaction replaced
    that what the model is sent no longer holds."""

    lost: list[Any]  # evidence.probes.Probe: kind and text
    probes: int  # all the probes of the replaced part
    note: str = ""  # what limits the measure (originals not stored)
    setting: str | None = None  # the eval setting that made the compaction

    def __post_init__(self) -> None:
        from ..evidence.probes import KINDS

        self.lost = sorted(self.lost, key=lambda p: KINDS.index(p.kind))  # the essential kinds first


@dataclass
class ShownConversation:
    where: str
    format: str
    encoding: str | None
    messages: list[ShownMessage]
    rounds: list[ShownRound]
    evidence: LostEvidence | None = None

    @property
    def placeholders(self) -> list[ShownMessage]:
        return [m for m in self.messages + [h for r in self.rounds for h in r.head] if m.placeholder]

    @property
    def tokens(self) -> int | None:
        """The conversation's count as the report gives it: its messages and the reply priming."""
        counts = [m.tokens for m in self.messages]
        return None if any(c is None for c in counts) else REPLY_PRIMING + sum(c for c in counts if c is not None)


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else content_text(content)


def _calls(m: dict[str, Any]) -> list[ShownCall]:
    calls = []
    for call in m.get("tool_calls") or ():
        if not isinstance(call, dict):
            continue
        parts = call_parts(call)  # a function call or a custom one (Codex's apply_patch)
        name, args = parts if parts is not None else ("?", "")
        calls.append(ShownCall(id=str(call.get("id")), name=name or "?", arguments=args))
    return calls


def view_of(dump: dict[str, Any], where: str, fmt: str, counter: TokenCounter | None,
            encoding: str | None = None) -> ShownConversation:
    """The view of one parsed conversation (``dump``: the internal form ``parse_record`` gives)."""
    stored = dump.get(ORIGINALS_KEY)
    originals: dict[str, Any] = stored if isinstance(stored, dict) else {}
    aliases = read_aliases(dump)
    keys = {id(s.message): (s, slot_key(s, aliases)) for s in tool_slots(dump) if s.message is not None}

    def shown(m: dict[str, Any], anchor: str, position: str) -> ShownMessage:
        role = str(m.get("role"))
        msg = ShownMessage(anchor=anchor, position=position, role=role, text=_text(m.get("content")),
                           tokens=counter.message(m) if counter is not None else None, calls=_calls(m))
        if role == "tool":
            msg.tool_call_id = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
            slot, key = keys.get(id(m), (None, None))
            if slot is not None and slot.is_placeholder:
                msg.placeholder, msg.store_key = True, key
                original = originals.get(key) if key is not None else None
                if original is not None:
                    msg.original = _text(original)
                    msg.original_tokens = counter.content(original) if counter is not None else None
        return msg

    def paired(messages: list[ShownMessage]) -> None:
        """Each call learns where its result is, each result its call's name and place."""
        open_calls: dict[str, tuple[ShownMessage, ShownCall]] = {}
        for msg in messages:
            for call in msg.calls:
                open_calls[call.id] = (msg, call)
            if msg.role == "tool" and msg.tool_call_id in open_calls:
                caller, call = open_calls.pop(msg.tool_call_id)
                call.result_at, msg.call_at, msg.tool_name = msg.anchor, caller.anchor, call.name

    rounds = []
    for n, entry in enumerate(dump.get(ARCHIVE_KEY) or (), 1):
        number = entry.get("round") if isinstance(entry.get("round"), int) else n
        if entry.get("dropped"):
            rounds.append(ShownRound(number, True, None, [], [str(i) for i in entry.get("tool_call_ids") or ()]))
            continue
        system = entry.get("system")
        head = [shown(m, f"r{number}-{i}", f"round {number} · {i}") for i, m in enumerate(entry.get("head") or ())]
        paired(head)
        rounds.append(ShownRound(number, False, shown(system, f"r{number}-s", f"round {number} · system")
                                 if isinstance(system, dict) else None, head))
    messages = [shown(m, f"m{i}", str(i)) for i, m in enumerate(dump["messages"])]
    paired(messages)
    counter_value = dump.get(COUNTER_KEY)
    summarised = rounds or (isinstance(counter_value, dict) and (counter_value.get("summary_rounds") or 0) > 0)
    if summarised and messages and messages[0].role == "system":
        from ..tiers.cut import split_system

        rounds_done = counter_value.get("summary_rounds") if isinstance(counter_value, dict) else None
        prompt, summary = split_system(dump["messages"][0].get("content"), rounds_done or len(rounds) or 1)
        messages[0].summary = True
        if summary:
            messages[0].prompt, messages[0].text = _text(prompt), summary
    return ShownConversation(where, fmt, encoding, messages, rounds)


def lost_evidence(dump: dict[str, Any]) -> LostEvidence | None:
    """What a compacted record lost of the evidence of what its compaction replaced: the
    conversation before it (``restore``: the stored originals and the archive) against what the
    model is sent now, probed and scored as ``xcompact eval`` does. None for a record xcompact
    did not compact (nothing stored: nothing to compare with)."""
    if not dump.get(ORIGINALS_KEY) and not dump.get(ARCHIVE_KEY):
        return None
    from ..evidence.evaluate import lost_probes
    from ..tiers.restore import restore_details

    details = restore_details(dump)
    before = details.dump["messages"] if isinstance(details.dump, dict) else details.dump
    after = dump["messages"]
    if before == after:
        return None
    lost, probes = lost_probes(before, {"after": after}, after)
    note = (f"{details.missing} placeholders or summary rounds have no stored original (--originals drop, or "
            "another tool): what they replaced is not probed" if details.missing else "")
    return LostEvidence(lost, probes, note)


def _lost_text(ev: LostEvidence) -> list[str]:
    head = (f"== evidence lost: {len(ev.lost)} of the {ev.probes} probes taken from what the compaction replaced "
            "are no longer sent ==" if ev.probes else
            "== evidence lost: none probed (what the compaction replaced holds no task, words, file, error, "
            "command or decision a probe looks for) ==")
    lines = [head] + ([f"   ({ev.note})"] if ev.note else [])
    lines += [f"  - [{p.kind}] {p.text}" for p in ev.lost]
    return lines + [""]


def render_text(view: ShownConversation, width: int = 100) -> str:
    """A plain-text rendering: one block per message, placeholders and summaries marked."""
    lines = [_heading(view), ""]
    if view.evidence is not None:
        lines += _lost_text(view.evidence)
    for r in view.rounds:
        if r.dropped:
            lines.append(f"== summary round {r.number}: its messages were dropped (--originals drop) ==")
        else:
            lines.append(f"== summary round {r.number}: the {len(r.head)} messages it replaced "
                         f"(archived; restore gives them back) ==")
            lines += [_text_block(m, width) for m in ([r.system] if r.system else []) + r.head]
        lines.append("")
    if view.rounds:
        lines.append("== the conversation as compacted ==")
    lines += [_text_block(m, width) for m in view.messages]
    return "\n".join(lines) + "\n"


def _heading(view: ShownConversation) -> str:
    tokens = f" · {view.tokens:,} tokens ({view.encoding})" if view.tokens is not None else ""
    return (f"{view.where} · {view.format} · {len(view.messages)} messages{tokens} · "
            f"{len(view.placeholders)} placeholders · {len(view.rounds)} summary rounds")


def _text_block(m: ShownMessage, width: int) -> str:
    tags = [f"[{m.position}] {m.role}"]
    if m.tokens is not None:
        tags.append(f"{m.tokens:,} tokens")
    if m.summary:
        tags.append("SUMMARY")
    if m.tool_call_id is not None:
        tags.append(f"result of {m.tool_name or '?'} ({m.tool_call_id})")
    if m.placeholder:
        stored = (f"original stored under {m.store_key!r}, {m.original_tokens:,} tokens"
                  if m.original is not None and m.original_tokens is not None
                  else "original stored" if m.original is not None else "no original stored")
        tags.append(f"PLACEHOLDER ({stored})")
    body = [" · ".join(tags)]
    if m.prompt:
        body.append(f"    (the system prompt above the summary, kept verbatim: {len(m.prompt):,} characters)")
    if m.text:
        body += ["    " + line for line in m.text.splitlines()]
    for call in m.calls:  # a multi-line input (a custom tool's patch) stays inside the message's block
        first, *rest = f"-> {call.name}({call.arguments}) [{call.id}]".splitlines() or [""]
        body += ["    " + first] + ["       " + line for line in rest]
    return "\n".join(body)


def render_html(view: ShownConversation, version: str, back: str | None = None) -> str:
    """The page of ``view``; ``back``: a link to the page that lists it (the eval page)."""
    from .templating import environment

    return environment().get_template("conversation.html.j2").render(
        title=f"xcompact show: {view.where}", version=version, view=view, back=back)


def build_view(raw: bytes, where: str, source: str, line: int | None, input_format: str, history: str,
               encoding: str) -> ShownConversation:
    """The view of one record's bytes, with the evidence it lost; InvalidInputError naming
    ``where`` when it is not a conversation."""
    from ..errors import InvalidInputError
    from ..files.exact import risky_number
    from ..formats import parse_record
    from ..formats.base import conversation_model
    from ..model.tokens import Counters

    try:
        dump, codec = parse_record(raw, input_format, exact=risky_number(raw),
                                   source=source, line=line, history=history)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None
    fatal = [p for p in codec.problems(dump) if p.fatal]
    if fatal:
        raise InvalidInputError(f"{where}: {fatal[0]}")
    counter, chosen, _, _ = Counters(encoding).choose(conversation_model(dump, codec))
    view = view_of(dump, where, codec.format, counter, chosen)
    view.evidence = lost_evidence(dump)
    return view
