"""Run one operation over records: parse, check, transform, measure, serialise.

Everything here takes and returns plain data (bytes in, bytes and a report item out), so the
runner can drive it serially, concurrently (model calls) or from worker processes and get the
same bytes either way. Transforms are plain functions, or coroutines for the tiers that may
wait on a model.

Bytes are exact: a record the command does not change is written as it was read, byte for
byte; a record that is rewritten goes through the lossless parser when the fast one would lose
a value (integers beyond 64 bits), and is refused, unchanged, when rewriting would drop one
(a repeated key) or cannot be done (nesting deeper than 255 levels).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ..commands.base import WRITE_STYLE, Transform
from ..commands.registry import command_of
from ..commands.settings import Settings
from ..errors import BackendError, InvalidInputError
from ..files.exact import duplicated_keys, risky_number
from ..files.records import NeedsExactParse, Record, dump_bytes, lossless_problems
from ..files.style import STYLE_FIELD, detect_style, dump_styled
from ..formats import Codec, parse_record, wrong_format_hint
from ..formats.base import conversation_model
from ..model.conversation import (
    ARCHIVE_KEY,
    META_KEY,
    ORIGINALS_KEY,
    begin_record,
    end_record,
    estimated_message_length,
    prescan,
)
from ..model.hints import hint_for
from ..model.tokens import Counters, MemoTokens, TokenCounter, counting_with
from ..status import Status
from ..tiers.result import TierResult
from .report import ReportItem

#: Warnings listed per item in the report; the count is always exact.
MAX_WARNINGS_LISTED = 20


@dataclass
class Outcome:
    """The result of one record: bytes to write (``None``: nothing) and its report item."""

    out: bytes | None
    item: ReportItem
    warnings: list[str]
    error: str | None = None


Result = TierResult


def _with_style(rec: Record, dump: dict, new: dict) -> dict:
    """``new`` recording the serialisation style of the input (files/style.py) when it carries
    bookkeeping restore reads and the input's style is not xcompact's own: the style the input
    recorded already (an earlier pass), else the one of its bytes."""
    if not any(k in new for k in (META_KEY, ORIGINALS_KEY, ARCHIVE_KEY)):
        return new  # nothing to restore from: no bookkeeping of ours added
    meta = dump.get(META_KEY)
    style = meta.get(STYLE_FIELD) if isinstance(meta, dict) and STYLE_FIELD in meta else detect_style(rec.raw, rec.form)
    new_meta = new.get(META_KEY)
    if style is None or not isinstance(new_meta, (dict, type(None))) or (new_meta or {}).get(STYLE_FIELD) == style:
        return new
    return {**new, META_KEY: {**(new_meta or {}), STYLE_FIELD: style}}


def with_model(written: Any, dump: dict, codec: Codec) -> Any:
    """A log's written dump naming the model its reader found (a Claude Code log's
    ``message.model``, a trajectory's config, a Codex ``turn_context``) as ``model``, so a later
    pass (or ``compact --check`` over outputs) counts it in the encoding this run chose."""
    if not isinstance(written, dict) or "model" in written:
        return written
    model = conversation_model(dump, codec)
    return {**written, "model": model} if model else written




class _NeedsExact(Exception):
    """The fast parse lost (or could not hold) a value of a record: redo it losslessly."""


def _prepare(rec: Record, settings: Settings, exact: bool) -> tuple[dict, Codec, list[str]]:
    """(dump, the codec that reads and writes the record's format, warnings), or InvalidInputError.
    The codec keeps the input's shape too: a bare list that now carries originals becomes an
    object that remembers it was a list, so restore can give the list back."""
    try:
        dump, codec = parse_record(rec.raw, settings.input_format, exact, rec.source, rec.line,
                                   history=settings.claude_code_history)
    except NeedsExactParse:  # a number beyond a double's range: only the exact reader holds it
        raise _NeedsExact from None
    except InvalidInputError as exc:
        hint = hint_for(rec.raw, str(exc))
        if hint:
            raise InvalidInputError(f"{exc}; {hint}") from None
        raise
    problems = codec.problems(dump)
    fatal = [p for p in problems if p.fatal or settings.strict]
    if fatal:
        p = fatal[0]
        more = f" (+{len(fatal) - 1} more)" if len(fatal) > 1 else ""
        hint = "; run without --strict to compact it anyway" if not p.fatal else ""
        wrong = wrong_format_hint(codec.original, settings.input_format) if not codec.lossy and p.fatal else None
        if wrong:  # --from anthropic on OpenAI messages: say so, not the first shape error it causes
            first = InvalidInputError(p.message, p.pointer)
            raise InvalidInputError(f"{wrong} (read as {settings.input_format}: {first}{more})")
        raise InvalidInputError(p.message + more + hint, p.pointer)
    return dump, codec, [str(p) for p in problems]


def _lossless(rec: Record, original: Any, exact: bool) -> list[str]:
    """Before a changed record is written: the repeated keys that rewriting would collapse.
    Raises _NeedsExact when the fast parse lost a number, InvalidInputError when the record cannot
    be written at all."""
    if exact:
        return duplicated_keys(rec.raw)
    needs_exact, duplicates = lossless_problems(rec.raw, original)
    if needs_exact and not duplicates:
        raise _NeedsExact
    return duplicates


def _duplicates_error(duplicates: list[str]) -> InvalidInputError:
    more = f" (and {len(duplicates) - 1} more keys)" if len(duplicates) > 1 else ""
    return InvalidInputError(f"the key {duplicates[0]!r} appears twice in one object{more}; rewriting would drop "
                             "one of its values: remove the duplicate and run again")


def _choose(counters: Counters | None, dump: dict, codec: Codec) -> tuple[TokenCounter | None, str, str, bool]:
    """The counter for this record (``--encoding auto``: from the model it names), its encoding,
    how it was chosen, and whether its counts are an approximation (a model without a public
    tokenizer)."""
    if counters is None:
        return None, "", "", False
    return counters.choose(conversation_model(dump, codec))


def _finish(rec: Record, settings: Settings, chosen: tuple[TokenCounter | None, str, str, bool], dump: dict,
            codec: Codec, warnings: list[str], result: Result, exact: bool) -> Outcome:
    counter, encoding, encoding_source, approximate = chosen
    new, status, fields = result
    changed = new is not dump
    if "warning" in fields:
        warnings = warnings + [fields.pop("warning")]
    write_style = fields.pop(WRITE_STYLE, None)
    item = ReportItem(source=rec.source, line=rec.line, status=status.value, format=codec.format)
    if codec.notes:  # what reading a log could not carry over
        item["conversion_notes"] = codec.notes
    before, after = dump["messages"], new["messages"]
    item["messages_before"] = len(before)
    item["messages_after"] = len(after)
    if "length_before" not in fields:
        scan = prescan(before)
        item["length_before"] = scan.length if scan is not None else estimated_message_length(before)
        item["length_after"] = estimated_message_length(after) if changed else item["length_before"]
    item.update(fields)  # type: ignore[typeddict-item]  # a tier's details are report keys too
    if "tokens_before" in fields:
        pass  # the transform counted them already
    elif counter is not None and not changed:
        item["tokens_before"] = item["tokens_after"] = counter.conversation(before)  # once: no memo needed
    elif counter is not None:
        memo = MemoTokens(counter)
        item["tokens_before"] = memo.conversation(before)
        item["tokens_after"] = memo.conversation(after)
    else:
        item["tokens_before"] = item["tokens_after"] = None
    if counter is not None:  # which vocabulary counted this conversation, and why
        item["encoding"] = encoding
        item["encoding_source"] = encoding_source
        if approximate:
            item["encoding_approximate"] = True
    if warnings:
        item["warnings"] = warnings[:MAX_WARNINGS_LISTED]
        item["warning_count"] = len(warnings)
    out: bytes | None = None
    writes = settings.write_output or settings.dry_run  # --dry-run: made and measured, not written
    if writes and (changed or codec.lossy):  # a log is written as the dump it was read into
        if codec.lossy and not exact and risky_number(rec.raw):
            raise _NeedsExact  # a log's numbers are read exactly too (the check below is for requests)
        duplicates = [] if codec.lossy else _lossless(rec, codec.original, exact)
        if duplicates:
            raise _duplicates_error(duplicates)
        if not codec.lossy and changed and write_style is None and command_of(settings).restyles:
            new = _with_style(rec, dump, new)
        native = codec.to_native(new)
        if codec.lossy:
            native = with_model(native, dump, codec)
        styled = dump_styled(native, write_style, rec.form) if write_style is not None and not codec.lossy else None
        out = styled if styled is not None else dump_bytes(native, rec.form, exact)
    elif writes:
        out = rec.raw  # unchanged: the bytes as read
    if out is not None:
        item["input_bytes"] = len(rec.raw)
        item["output_bytes"] = len(out)
        if settings.dry_run:
            out = None
    elif command_of(settings).validates and not codec.lossy:  # a record xcompact could not rewrite is not VALID
        duplicates = _lossless(rec, codec.original, exact)
        if duplicates:
            warnings = warnings + [str(_duplicates_error(duplicates)).replace("; rewriting", ": rewriting")]
            item["warnings"] = warnings[:MAX_WARNINGS_LISTED]
            item["warning_count"] = len(warnings)
    return Outcome(out, item, warnings, fields.get("error") if status.failed else None)


def unexpected_error(exc: Exception) -> InvalidInputError:
    """The last-resort guard's message: an exception no check anticipated fails its record only
    (written unchanged), never the batch."""
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return InvalidInputError(f"a value of an unexpected type or shape could not be read ({type(exc).__name__}"
                             + (f": {text}" if text else "") + "); the record is left as it was: fix the value, "
                             "and please report this record to xcompact")


def _failed(rec: Record, exc: Exception, warnings: list[str]) -> Outcome:
    item = ReportItem(source=rec.source, line=rec.line, status=Status.INVALID_INPUT.value, error=str(exc))
    return Outcome(rec.raw, item, warnings, str(exc))


def process_record(rec: Record, transform: Transform, settings: Settings, counter: Counters | None,
                   exact: bool = False) -> Outcome:
    """Parse, check, transform and measure one record. A failed record is passed through
    byte for byte (``out`` is the raw input) so nothing is lost and JSONL lines stay aligned."""
    begin_record()  # one walk of the messages serves detection, the checks and the length estimate
    try:
        return _process_record(rec, transform, settings, counter, exact)
    finally:
        end_record()


def _process_record(rec: Record, transform: Transform, settings: Settings, counter: Counters | None,
                    exact: bool = False) -> Outcome:
    try:
        dump, codec, warnings = _prepare(rec, settings, exact)
        chosen = _choose(counter, dump, codec)
        with counting_with(chosen[0]):
            result = transform(dump, settings)
        assert type(result) is tuple or not inspect.isawaitable(result), "use process_record_async for coroutines"
        return _finish(rec, settings, chosen, dump, codec, warnings, result, exact)
    except _NeedsExact:
        return process_record(rec, transform, settings, counter, exact=True)
    except (InvalidInputError, BackendError) as exc:
        return _failed(rec, exc, [])
    except Exception as exc:  # noqa: BLE001  the last-resort guard: one record, never the batch
        return _failed(rec, unexpected_error(exc), [])


async def process_record_async(rec: Record, transform: Transform, settings: Settings,
                               counter: Counters | None, exact: bool = False) -> Outcome:
    """process_record for transforms that await a model. Each record runs in its own task, so
    the counter chosen for it (a context variable) is its own."""
    try:
        dump, codec, warnings = _prepare(rec, settings, exact)
        chosen = _choose(counter, dump, codec)
        with counting_with(chosen[0]):
            result = transform(dump, settings)
            if inspect.isawaitable(result):
                result = await result
        return _finish(rec, settings, chosen, dump, codec, warnings, result, exact)
    except _NeedsExact:
        return await process_record_async(rec, transform, settings, counter, exact=True)
    except (InvalidInputError, BackendError) as exc:
        return _failed(rec, exc, [])
    except Exception as exc:  # noqa: BLE001  the last-resort guard: one record, never the batch
        return _failed(rec, unexpected_error(exc), [])
