"""What every format adapter shares: the codec a record is read with, problems, provenance.

A *codec* is what reading one record gives besides the internal dump: it knows the record's
format, keeps the parsed native record (the pipeline's lossless check compares the input bytes
with it) and writes a compacted internal dump back as a native record (``to_native``).

The internal dump is the OpenAI chat-completions ``dumps()`` form the tiers work on. Request
formats (``openai``, ``anthropic``, ``responses``) map both ways *exactly*: every internal
message that came from a native message, block or item remembers it under ``xcompact_native``
(a JSON string, so the estimated length and the token counts, which look at ``content``,
``text`` and ``reasoning`` values, never count it twice), and the dump remembers the native
record's top-level layout under ``xcompact_format``. The tiers never look at either key; they
copy messages they keep and replace only tool contents and the leading system message, which is
exactly what ``to_native`` needs to write the native record back.

Log formats (``claude-code``, ``codex``, ``swe-agent``, ``mini-swe-agent``, ``sharegpt``) are read
into a plain OpenAI dump (lossy, documented per format, with a ``source`` key saying where every
message came from); they are written as OpenAI dumps.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..errors import InvalidInputError
from ..files.exact import ExactReader, dumps_exact, risky_number
from ..model.checks import check_conversation
from ..model.conversation import Problem
from ..model.exact_numbers import orjson_default
from ..model.format_names import FILE_LEVEL, FORMATS, LOG_FORMATS, REQUEST_FORMATS  # noqa: F401  (read from here too)

#: Message key holding the native form of an internal message (a JSON string).
MSG_KEY = "xcompact_native"
#: Internal dump key holding the native record's layout (never written into a native record).
DUMP_KEY = "xcompact_format"
#: Dump key of a log conversion's provenance.
SOURCE_KEY = "source"
#: Keys xcompact owns in any dump (bookkeeping): they stay at the top level of a native record.
OWNED_KEYS = ("tokens_used", "compacted_tool_results", "summarized_messages", "compaction_counter", "xcompact")



def jdump(obj: Any) -> str:
    """Compact JSON text of ``obj`` (keys in their order, non-ASCII kept)."""
    try:
        return orjson.dumps(obj, default=orjson_default).decode()
    except orjson.JSONEncodeError as exc:
        if "64-bit" not in str(exc):
            raise
        return dumps_exact(obj, "jsonl").decode()[:-1]  # an integer beyond 64 bits, written exactly


def jload(text: str) -> Any:
    """JSON text (a tool call's arguments) -> value; a number a double does not hold is read
    exactly (an ExactFloat, written back as it was)."""
    raw = text.encode("utf-8", "surrogatepass")
    if not risky_number(raw):
        return orjson.loads(text)
    try:
        orjson.loads(text)  # orjson's verdict on what is JSON
    except orjson.JSONDecodeError as exc:
        if "number is infinity" not in exc.msg:
            raise
    return ExactReader().loads(raw)


class Dropped:
    """Input fields a log reader has no place for, counted by name (``conversations[].weight``),
    so a reading never drops one silently: ``finish`` adds one note naming them (the report's
    ``conversion_notes``) and ``source.dropped_fields`` ({name: count}); ``convert`` prints one
    warning line per file from them. Fields a format documents as the log's own bookkeeping
    (ids, timestamps, the working directory...; docs/formats.md) are passed as ``known``."""

    MAX_NAMED = 8

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def check(self, obj: Any, where: str, known: frozenset[str] | set[str] | tuple[str, ...]) -> None:
        """Count each key of ``obj`` not in ``known`` as ``where`` + key (a null value loses nothing)."""
        if isinstance(obj, dict):
            for k, v in obj.items():
                if k not in known and v is not None:
                    self.add(f"{where}{k}")

    def finish(self, src: dict, notes: list[str]) -> None:
        if not self.counts:
            return
        src["dropped_fields"] = dict(sorted(self.counts.items()))
        notes.append(dropped_note(self.counts))


def dropped_note(counts: dict[str, int], what: str = "input fields not carried over") -> str:
    """"N input fields not carried over: name (n), ..." (the most frequent first, at most MAX_NAMED)."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    named = ", ".join(f"{k[:60]} ({n})" for k, n in ranked[:Dropped.MAX_NAMED])
    more = f" and {len(ranked) - Dropped.MAX_NAMED} more" if len(ranked) > Dropped.MAX_NAMED else ""
    return f"{sum(counts.values())} {what}: {named}{more}"


DROPPED_NOTE = " input fields not carried over: "
_NAMED = re.compile(r"(?:^|, )(.+?) \(\d+\)(?=, |$| and \d+ more$)")


def dropped_names(note: str) -> list[str]:
    """The field names a ``dropped_note`` names ([] for any other note): what a run says once
    per file."""
    at = note.find(DROPPED_NOTE)
    if at < 0 or not note[:at].isdigit():
        return []
    return _NAMED.findall(note[at + len(DROPPED_NOTE):])


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            int: "integer", float: "number"}.get(type(v), type(v).__name__)


def fail(message: str, pointer: str = "") -> InvalidInputError:
    return InvalidInputError(message, pointer)


class Codec:
    """How one record was read and how it is written back.

    ``format``: the format's name; ``lossy``: the record cannot be written back in its own
    format (a log): the internal OpenAI dump is written, changed or not; ``original``: the
    parsed native record; ``notes``: what the reading could not carry over (lossy formats)."""

    format = "openai"
    lossy = False

    def __init__(self, original: Any, notes: list[str] | None = None) -> None:
        self.original = original
        self.notes: list[str] = notes or []

    def to_native(self, dump: dict) -> Any:  # pragma: no cover - every codec defines it
        raise NotImplementedError

    def problems(self, dump: dict) -> list[Problem]:
        """Fatal shape errors first, then structural warnings (as check_conversation)."""
        return check_conversation(dump)


class LogCodec(Codec):
    """A log read into an OpenAI dump: written as that dump (``lossy``)."""

    lossy = True

    def __init__(self, fmt: str, original: Any, notes: list[str] | None = None) -> None:
        super().__init__(original, notes)
        self.format = fmt

    def to_native(self, dump: dict) -> Any:
        return dump


def conversation_model(dump: dict, codec: Codec) -> str | None:
    """The model a record or its format names, or None: an OpenAI dump's or a request's
    ``model`` (Responses, Anthropic), a Codex rollout's ``turn_context`` model (the last one), a
    Claude Code log's assistant ``message.model``, a SWE-agent trajectory's
    ``replay_config.agent.model.name``, a mini-swe-agent trajectory's ``info.config.model.model_name``."""
    model = dump.get("model")
    if isinstance(model, str) and model:
        return model
    source = dump.get("source")
    models = source.get("models") if isinstance(source, dict) else None
    if isinstance(models, list) and models and isinstance(models[-1], str):
        return models[-1]
    original = codec.original
    if isinstance(original, dict):
        model = original.get("model")
        if isinstance(model, str) and model:
            return model
        replay = original.get("replay_config")  # a SWE-agent trajectory: its run's config, often as JSON text
        if isinstance(replay, str) and replay.lstrip().startswith("{"):
            import json

            try:
                replay = json.loads(replay)
            except ValueError:
                replay = None
        agent = replay.get("agent") if isinstance(replay, dict) else None
        amodel = agent.get("model") if isinstance(agent, dict) else None
        name = amodel.get("name") if isinstance(amodel, dict) else None
        if isinstance(name, str) and name:
            return name
        info = original.get("info")
        config = info.get("config") if isinstance(info, dict) else None
        mconf = config.get("model") if isinstance(config, dict) else None
        name = mconf.get("model_name") if isinstance(mconf, dict) else None
        return name if isinstance(name, str) and name else None
    if isinstance(original, list):  # a log's events, (line, object) pairs: the latest model it names
        for entry in reversed(original):
            if isinstance(entry, tuple) and len(entry) == 2:
                entry = entry[1]
            msg = entry.get("message") if isinstance(entry, dict) else None
            model = msg.get("model") if isinstance(msg, dict) else None
            if isinstance(model, str) and model and not model.startswith("<"):  # "<synthetic>"
                return model
    return None
