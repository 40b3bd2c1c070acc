"""Run one operation over records: parse, check, transform, measure, serialise.

Everything here takes and returns plain data (bytes in, bytes and a report item out), so the
runner can drive it serially, concurrently (model calls) or from worker processes and get the
same bytes either way. Transforms are plain functions, or coroutines for the tiers that may
wait on a model.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Union

from .conversation import META_KEY, check_conversation, denormalize_record, estimated_message_length
from .errors import InvalidInputError, XCompactError
from .files import Record, dump_bytes, parse_record
from .status import Status
from .tokens import MemoTokens, TokenCounter
from .toolcall import DEFAULT_KEEP, reclaim_tool_results, restore_conversation

#: Warnings listed per item in the report; the count is always exact.
MAX_WARNINGS_LISTED = 20


@dataclass
class Settings:
    """Parameters of one run shared by all records (picklable, for worker processes)."""

    command: str
    keep: int = DEFAULT_KEEP
    keep_originals: bool = True
    strict: bool = False
    count_tokens: bool = True
    encoding: str = "cl100k_base"
    write_output: bool = True  # False: validate, compact --check / --dry-run
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    """The result of one record: bytes to write (``None``: nothing) and its report item."""

    out: bytes | None
    item: dict[str, Any]
    warnings: list[str]
    error: str | None = None


Result = tuple[dict, Status, dict[str, Any]]
Transform = Callable[[dict, Settings], Union[Result, Awaitable[Result]]]


def op_toolcall(dump: dict, settings: Settings) -> Result:
    from .summarize import head_tool_counts

    new, res = reclaim_tool_results(dump, keep=settings.keep, keep_originals=settings.keep_originals,
                                    key_offsets=head_tool_counts(dump))
    status = Status.RECLAIMED if res.reclaimed_count else Status.NOTHING_TO_CONDENSE
    return new, status, {"reclaimed_count": res.reclaimed_count, "reclaimed_fraction": res.reclaimed_fraction,
                         "skipped_no_id": res.skipped_no_id, "length_before": res.length_before,
                         "length_after": res.length_after}


def op_restore(dump: dict, settings: Settings) -> Result:
    new, restored = restore_conversation(dump)
    return new, Status.RESTORED, {"restored_count": restored}


def op_validate(dump: dict, settings: Settings) -> Result:
    from .schema import schema_problems

    problems = schema_problems(dump)
    if problems:
        raise InvalidInputError(problems[0].message, problems[0].pointer)
    return dump, Status.VALID, {}


OPERATIONS: dict[str, Transform] = {"toolcall": op_toolcall, "restore": op_restore, "validate": op_validate}


def _output_shape(dump: dict, shape: str) -> str:
    meta = dump.get(META_KEY)
    if isinstance(meta, dict) and meta.get("input_form") == "list":
        return "list"
    return shape


def _serialise(new: dict, shape: str, form: str) -> bytes:
    """Keep the input's shape; a list that now carries originals becomes an object that
    remembers it was a list, so restore can give the list back."""
    if shape == "list" and list(new.keys()) != ["messages"]:
        meta = new.get(META_KEY) if isinstance(new.get(META_KEY), dict) else {}
        new = {"messages": new["messages"], **{k: v for k, v in new.items() if k not in ("messages", META_KEY)},
               META_KEY: {**meta, "input_form": "list"}}
    return dump_bytes(denormalize_record(new, shape), form)


def _prepare(rec: Record, settings: Settings) -> tuple[dict, str, list[str]]:
    dump, shape = parse_record(rec.raw)
    problems = check_conversation(dump)
    fatal = [p for p in problems if p.fatal or settings.strict]
    if fatal:
        p = fatal[0]
        more = f" (+{len(fatal) - 1} more)" if len(fatal) > 1 else ""
        hint = "; run without --strict to compact it anyway" if not p.fatal else ""
        raise InvalidInputError(p.message + more + hint, p.pointer)
    return dump, _output_shape(dump, shape), [str(p) for p in problems]


def _finish(rec: Record, settings: Settings, counter: TokenCounter | None, dump: dict, shape: str,
            warnings: list[str], result: Result) -> Outcome:
    new, status, fields = result
    item: dict[str, Any] = {"source": rec.source, "line": rec.line, "status": status.value}
    before, after = dump["messages"], new["messages"]
    item["messages_before"] = len(before)
    item["messages_after"] = len(after)
    if "length_before" not in fields:
        item["length_before"] = estimated_message_length(before)
        item["length_after"] = estimated_message_length(after) if after is not before else item["length_before"]
    item.update(fields)
    if "tokens_before" in fields:
        pass  # the transform counted them already
    elif counter is not None:
        memo = MemoTokens(counter)
        item["tokens_before"] = memo.conversation(before)
        item["tokens_after"] = memo.conversation(after)
    else:
        item["tokens_before"] = item["tokens_after"] = None
    if warnings:
        item["warnings"] = warnings[:MAX_WARNINGS_LISTED]
        item["warning_count"] = len(warnings)
    out = _serialise(new, shape, rec.form) if settings.write_output else None
    return Outcome(out, item, warnings, fields.get("error") if status.failed else None)


def _failed(rec: Record, exc: XCompactError, warnings: list[str]) -> Outcome:
    item = {"source": rec.source, "line": rec.line, "status": Status.INVALID_INPUT.value, "error": str(exc)}
    return Outcome(rec.raw, item, warnings, str(exc))


def process_record(rec: Record, transform: Transform, settings: Settings, counter: TokenCounter | None) -> Outcome:
    """Parse, check, transform and measure one record. A failed record is passed through
    byte for byte (``out`` is the raw input) so nothing is lost and JSONL lines stay aligned."""
    try:
        dump, shape, warnings = _prepare(rec, settings)
        result = transform(dump, settings)
        assert not inspect.isawaitable(result), "use process_record_async for coroutine transforms"
        return _finish(rec, settings, counter, dump, shape, warnings, result)  # type: ignore[arg-type]
    except XCompactError as exc:
        return _failed(rec, exc, [])


async def process_record_async(rec: Record, transform: Transform, settings: Settings,
                               counter: TokenCounter | None) -> Outcome:
    """process_record for transforms that await a model."""
    try:
        dump, shape, warnings = _prepare(rec, settings)
        result = transform(dump, settings)
        if inspect.isawaitable(result):
            result = await result
        return _finish(rec, settings, counter, dump, shape, warnings, result)  # type: ignore[arg-type]
    except XCompactError as exc:
        return _failed(rec, exc, [])
