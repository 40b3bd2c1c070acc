"""Tier 1: replace old tool results by a placeholder naming their tool-call ID.

Pure functions over dumps (dicts); nothing here reads or writes files. The originals are kept
in the dump under ``compacted_tool_results`` so that ``extract`` and ``restore`` can give them
back exactly. The key of a result is its ID for the first result with that ID in the
conversation and ``"<ID>#<k>"`` for the k-th (k >= 2); when that key is already taken the
result gets a fresh key recorded in ``xcompact.tool_result_keys``, so nothing stored is ever
overwritten (see restore.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInputError
from ..model.conversation import (
    EMPTY_STORE_FIELD,
    INPUTS_FIELD,
    META_KEY,
    ORIGINALS_KEY,
    PLACEHOLDER_TEMPLATE,
    content_length,
    content_text,
    estimated_message_length,
    placeholder_for,
    prescan,
)
from ..model.placeholders import PlaceholderTemplate, template
from .extract import extract_tool_result
from .options import DEFAULT_KEEP
from .preview import PREVIEW_CHARS, capped_template, preview_source, result_preview
from .store import (
    KeyAllocator,
    answered_calls,
    head_tool_counts,
    is_placeholder_of,
    originals_key,
    read_aliases,
    templated_results,
    with_aliases,
    with_templated,
)
from .tool_inputs import clear_input, truncate_old_inputs

__all__ = [
    "DEFAULT_KEEP",
    "META_KEY",
    "PLACEHOLDER_TEMPLATE",
    "ToolCallCompactResult",
    "extract_tool_result",
    "originals_key",
    "placeholder_for",
    "reclaim_tool_results",
    "tool_result_keys",
]



def tool_result_keys(messages: list[dict], first_occurrence: dict[str, int] | None = None) -> dict[int, str]:
    """Map index of each tool message with an ID to its usual originals key, counting repeated
    IDs (``first_occurrence``: counts of results that came earlier, e.g. summarised away).
    The key actually used can differ when this one was taken: see restore.slot_key."""
    seen = dict(first_occurrence or {})
    keys: dict[int, str] = {}
    for i, m in enumerate(messages):
        if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            cid = m["tool_call_id"]
            seen[cid] = seen.get(cid, 0) + 1
            keys[i] = originals_key(cid, seen[cid])
    return keys


@dataclass
class ToolCallCompactResult:
    """What tier 1 did to one conversation (xun returns reclaimed_count and reclaimed_fraction)."""

    reclaimed_count: int = 0
    reclaimed_fraction: float = 0.0
    length_before: int = 0
    length_after: int = 0
    skipped_no_id: int = 0
    compacted_indices: list[int] = field(default_factory=list)
    excluded_count: int = 0  # old results of --exclude-tools, never cleared
    freed_tokens: int | None = None  # with clear_at_least: the tokens the placeholders free (or would)
    below_clear_at_least: bool = False  # they would free fewer: the dump was left as it was
    inputs_cleared: int = 0  # with clear_tool_inputs: calls whose arguments became a placeholder
    kept_cheaper: int = 0  # old results left as they were: their placeholder costs as many tokens
    capped_count: int = 0  # with max_result_tokens: results kept but cut to a preview (counted in reclaimed_count)
    inputs_truncated: int = 0  # with truncate_inputs: older calls whose long arguments were cut
    images_cleared: int = 0  # with images_keep: older image parts replaced by a placeholder
    thinking_cleared: int = 0  # with thinking_keep: older reasoning replaced by a placeholder
    media_left_native: int = 0  # older images or reasoning in natively written messages, left as they are
    deduped_reads: int = 0  # with dedup_reads: earlier reads a later one repeats (counted in reclaimed_count)


def _check_args(dump: Any, keep: Any, options: dict[str, Any]) -> None:
    """Wrong types from a library caller are the package's own errors, not a TypeError from deep inside."""
    from . import arguments as check

    if not (type(dump) is dict and prescan(dump.get("messages")) is not None):  # a walked one is fine
        check.conversation(dump)
    check.count("keep", keep)
    for name in ("keep_turns", "images_keep", "thinking_keep"):
        check.count(name, options[name], optional=True)
    for name in ("clear_at_least", "max_result_tokens", "truncate_inputs"):
        check.count(name, options[name], minimum=1, optional=True)
    for name in ("keep_originals", "clear_tool_inputs", "dedup_reads"):
        check.flag(name, options[name])
    check.names("exclude_tools", options["exclude_tools"])
    check.text("placeholder", options["placeholder"])
    if options["placeholder"] is not None:
        from ..errors import UsageError
        from ..model.placeholders import TemplateError

        try:
            template(options["placeholder"])
        except TemplateError as exc:
            raise UsageError(str(exc)) from None
    _check_offsets(options["key_offsets"])


def _check_dump(dump: Any, offsets: Any) -> None:
    """_check_args' checks of the dump and of ``key_offsets``, the options aside: outside a
    record loop's walk, the messages' shapes and the keys xcompact owns too, as summarize_dump
    and restore_conversation check them (a malformed store is an InvalidInputError naming it)."""
    if not (type(dump) is dict and prescan(dump.get("messages")) is not None):  # a walked one is fine
        from . import arguments as check

        check.conversation(dump, shape=True)
    _check_offsets(offsets)


def _check_offsets(offsets: Any) -> None:
    if offsets is not None and not (isinstance(offsets, dict) and all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in offsets.items())):
        raise InvalidInputError("key_offsets must map tool-call IDs to counts of archived results")


def tool_names(messages: list[dict]) -> dict[int, str]:
    """Index of each tool result -> the name of the tool its call named (the call it answers:
    the latest with its ID before it), where that call names one."""
    names: dict[int, str] = {}
    for i, at in answered_calls(messages).items():
        name = _call_name(messages, at)
        if name is not None:
            names[i] = name
    return names


def _kept_by_turns(messages: list[dict], keep_turns: int) -> int:
    """The first index whose tool results the last ``keep_turns`` assistant turns (assistant
    messages that call tools) answer: results from there on stay."""
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and m.get("tool_calls")]
    if keep_turns <= 0:
        return len(messages)
    return turns[-keep_turns] if len(turns) >= keep_turns else 0


#: With token counts on, a result at most this many times its placeholder's length (in
#: characters) is counted to see whether the placeholder is cheaper in tokens.
TOKEN_CHECK_RATIO = 64


def reclaim_tool_results(dump: dict | list, keep: int = DEFAULT_KEEP, keep_originals: bool = True,
                         key_offsets: dict[str, int] | None = None, *, exclude_tools: Collection[str] = (),
                         keep_turns: int | None = None, clear_at_least: int | None = None,
                         counter: Any = None, placeholder: str | None = None,
                         clear_tool_inputs: bool = False,
                         max_result_tokens: int | None = None,
                         dedup_reads: bool = False,
                         truncate_inputs: int | None = None, images_keep: int | None = None,
                         thinking_keep: int | None = None) -> tuple[Any, ToolCallCompactResult]:
    """Replace tool results older than the most recent ``keep`` by placeholders.

    The controls of Anthropic's context editing (``clear_tool_uses``): results of the tools in
    ``exclude_tools`` are never cleared; ``keep_turns`` also keeps the results of the last that
    many assistant turns; with ``clear_at_least`` (tokens, counted by ``counter``, default
    cl100k_base) nothing is cleared unless the placeholders free at least that many;
    ``clear_tool_inputs`` also replaces the arguments of the calls whose results are cleared
    (stored in ``xcompact.tool_inputs``). ``placeholder``: a template of the user's own
    (model/placeholders.py), instead of xun's text. ``max_result_tokens``: any other result (the
    kept ones included, excluded tools' aside) over that many tokens becomes its placeholder with
    a head and tail preview (``{preview}``), its original stored as every other. ``dedup_reads``:
    a read that a later read of the same file, range and content repeats (reads.py) becomes a
    placeholder naming the later one, wherever it is (the later read stays as it is).
    ``truncate_inputs``: the arguments of the calls whose results are old (cleared or not) have
    every string value over that many characters cut, the whole arguments stored
    (``xcompact.tool_inputs``, as ``clear_tool_inputs`` stores them). ``images_keep`` /
    ``thinking_keep``: only the last that many image parts / assistant reasonings stay, older
    ones become placeholders with their originals stored (media.py).

    ``dump`` is a dumps() dict, or a bare list of messages: then the result is a list again
    when nothing had to be stored (``keep_originals=False`` or nothing compacted), otherwise a
    dump ``{"messages": [...], "compacted_tool_results": {...}}``. A result is replaced only
    where the placeholder is shorter: in tokens when ``counter`` is given (``kept_cheaper``
    counts the results left as they were because of it), else in characters; one already
    compacted is left alone and not counted.
    ``key_offsets`` (how many results per ID the archive holds) is computed from the dump when
    not given. Returns a new dump; the input is not modified.
    """
    if (type(keep) is int and keep >= 0 and type(keep_originals) is bool and clear_tool_inputs is False
            and dedup_reads is False and keep_turns is None and clear_at_least is None and placeholder is None
            and max_result_tokens is None and truncate_inputs is None and images_keep is None
            and thinking_keep is None and type(exclude_tools) in (tuple, frozenset, list, set)
            and all(type(name) is str for name in exclude_tools)):
        _check_dump(dump, key_offsets)  # the usual options (every record of a run): they pass _check_args
    else:
        _check_args(dump, keep, dict(keep_originals=keep_originals, key_offsets=key_offsets,
                                     exclude_tools=exclude_tools, keep_turns=keep_turns,
                                     clear_at_least=clear_at_least, placeholder=placeholder,
                                     clear_tool_inputs=clear_tool_inputs, max_result_tokens=max_result_tokens,
                                     dedup_reads=dedup_reads, truncate_inputs=truncate_inputs,
                                     images_keep=images_keep, thinking_keep=thinking_keep))
    if isinstance(dump, list):
        new, result = reclaim_tool_results({"messages": dump}, keep, keep_originals, key_offsets,
                                           exclude_tools=exclude_tools, keep_turns=keep_turns,
                                           clear_at_least=clear_at_least, counter=counter,
                                           placeholder=placeholder, clear_tool_inputs=clear_tool_inputs,
                                           max_result_tokens=max_result_tokens, dedup_reads=dedup_reads,
                                           truncate_inputs=truncate_inputs, images_keep=images_keep,
                                           thinking_keep=thinking_keep)
        return (new["messages"] if list(new) == ["messages"] else new), result
    if keep < 0:
        raise ValueError("keep must be >= 0")
    messages: list[dict] = dump["messages"]
    scan = prescan(messages)  # the record loop walked them once already
    tool_indices = scan.tools if scan is not None else [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    old = tool_indices[: max(0, len(tool_indices) - keep)]
    result = ToolCallCompactResult()
    if keep_turns is not None and old:
        start = _kept_by_turns(messages, keep_turns)
        old = [i for i in old if i < start]
    if exclude_tools and old:
        names = tool_names(messages)
        kept = [i for i in old if names.get(i) in exclude_tools]
        result.excluded_count = len(kept)
        old = [i for i in old if names.get(i) not in exclude_tools]
    tpl = template(placeholder) if placeholder is not None and placeholder != PLACEHOLDER_TEMPLATE else None
    if (clear_at_least is not None or (tpl is not None and tpl.needs_tokens)) and counter is None:
        from ..model.tokens import DEFAULT_ENCODING, counter_for

        counter = counter_for(DEFAULT_ENCODING)
    freed = 0
    before = scan.length if scan is not None else estimated_message_length(messages)
    result.length_before = result.length_after = before
    targets: list[tuple[int, PlaceholderTemplate | None, int]] = [(i, tpl, PREVIEW_CHARS) for i in old]
    if max_result_tokens is not None:
        if counter is None:
            from ..model.tokens import DEFAULT_ENCODING, counter_for

            counter = counter_for(DEFAULT_ENCODING)
        cap = capped_template(placeholder)
        taken = set(old)
        names = tool_names(messages) if exclude_tools else {}
        for i in tool_indices:
            if i in taken or names.get(i) in exclude_tools:
                continue
            content = messages[i].get("content")
            if content_length(content) > max_result_tokens and counter.content(content) > max_result_tokens:
                targets.append((i, cap, max(400, min(PREVIEW_CHARS, 3 * max_result_tokens))))
    deduped: dict[int, tuple[int, PlaceholderTemplate | None, int]] = {}
    if dedup_reads:
        deduped = _superseded_targets(messages, targets, exclude_tools)
        targets.extend(deduped.values())
    if max_result_tokens is not None or deduped:
        targets.sort(key=lambda t: t[0])
    media = images_keep is not None or thinking_keep is not None
    if not targets and truncate_inputs is None and not media:
        return dump, result
    templated = templated_results(dump)  # (ID, occurrence) -> the template of one's own it was cleared with
    templated_before = dict(templated)
    needs_calls = clear_tool_inputs or truncate_inputs is not None
    calls = answered_calls(messages) if needs_calls or any(t is not None and "tool" in t.fields
                                                           for _, t, _ in targets) else {}
    new_messages = list(messages)
    originals = dict(dump.get(ORIGINALS_KEY) or {})
    inputs: dict[str, Any] = {}
    meta_in = dump.get(META_KEY)
    stored_inputs = (meta_in.get(INPUTS_FIELD) or {}) if isinstance(meta_in, dict) else {}
    keys: KeyAllocator | None = None
    # dropping originals into a dump that stores none needs no keys at all (the hot path)
    need_keys = keep_originals or bool(originals) or bool(read_aliases(dump))
    occurrence = _occurrences(messages, key_offsets if key_offsets is not None else head_tool_counts(dump))

    def text_for(key: str, i: int, content: Any, tpl: PlaceholderTemplate | None, chars: int) -> str:
        if tpl is None:
            return placeholder_for(key)
        call = calls.get(i)
        tool = _call_name(messages, call) if call is not None else None
        return tpl.render(key, tool, lambda: content_text(content), lambda: content_length(content),
                          lambda: counter.content(content),
                          lambda h, t: result_preview(preview_source(content), h, t, chars))

    old_set = set(old)
    for i, tpl, chars in targets:
        m = messages[i]
        cid = m.get("tool_call_id")
        if not isinstance(cid, str):
            result.skipped_no_id += 1
            continue
        content = m.get("content")
        k = occurrence.get(i, 1)
        made_with = templated.get((cid, k))
        if is_placeholder_of(content, cid, template(made_with) if made_with is not None else None):
            continue  # compacted already (by xun's text, or by the template recorded for this result)
        # a reused ID's placeholder names the key extract takes (ID#k), so it fetches this result
        placeholder_text = text_for(cid if k == 1 else originals_key(cid, k), i, content, tpl, chars)
        old_len = content_length(content)
        if type(content) is list:  # an image the estimate did not count is not counted once cleared either
            from .media import image_placeholder_chars

            old_len -= image_placeholder_chars(content)
        if len(placeholder_text) >= old_len:
            continue
        # tokens are what a user pays: with a counter, a placeholder that costs as many tokens as
        # the result stays out (a short confirmation under a long ID); a result many times the
        # placeholder's length is not counted (it costs more whatever its text)
        if counter is not None and old_len <= TOKEN_CHECK_RATIO * len(placeholder_text) \
                and counter.text(placeholder_text) >= counter.content(content):
            result.kept_cheaper += 1
            continue
        key = originals_key(cid, k)
        if need_keys:
            if keys is None:  # built once, only when something is compacted
                keys = KeyAllocator(dump, key_offsets, originals)
            if keep_originals:
                key = keys.store(i, cid, content)
                if key != originals_key(cid, k):
                    placeholder_text = text_for(key, i, content, tpl, chars)
            else:
                keys.drop(i, cid)
        new_messages[i] = {**m, "content": placeholder_text}
        if tpl is not None:
            templated[(cid, k)] = tpl.text
        else:
            templated.pop((cid, k), None)
        if clear_at_least is not None:
            freed += counter.content(content) - counter.content(placeholder_text)
        if i in deduped:
            result.deduped_reads += 1
        elif i not in old_set:
            result.capped_count += 1  # a kept result over max_result_tokens: its preview stays
        elif clear_tool_inputs and i in calls and key not in stored_inputs:  # a key in use is never reused
            cleared = clear_input(new_messages, calls[i], key)
            if cleared is not None:
                original_args, marker = cleared
                if keep_originals:
                    inputs[key] = original_args
                if clear_at_least is not None:
                    freed += counter.text(original_args) - counter.text(marker)
                result.inputs_cleared += 1
        result.compacted_indices.append(i)
    if truncate_inputs is not None and old:
        aliases = keys.aliases if keys is not None else read_aliases(dump)  # the keys restore will read
        result.inputs_truncated += truncate_old_inputs(new_messages, old, calls, truncate_inputs, stored_inputs,
                                                       inputs, keep_originals, occurrence, aliases)
    media_store: dict[str, Any] = {}
    if media:
        from .media import clear_media, stored_parts

        media_store = dict(stored_parts(dump))
        new_messages, media_done = clear_media(new_messages, images_keep, thinking_keep, media_store, keep_originals)
        result.images_cleared, result.thinking_cleared = media_done.images, media_done.thinking
        result.media_left_native = media_done.left_native
    result.reclaimed_count = len(result.compacted_indices)
    if clear_at_least is not None:
        result.freed_tokens = freed
        if freed < clear_at_least:  # not worth clearing: the conversation stays exactly as it was
            result.below_clear_at_least = True
            result.reclaimed_count = result.inputs_cleared = result.inputs_truncated = 0
            result.images_cleared = result.thinking_cleared = 0
            result.compacted_indices = []
            return dump, result
    if not (result.reclaimed_count or result.inputs_truncated or result.images_cleared or result.thinking_cleared):
        return dump, result
    # xun's estimate of what is written: it counts contents, not a call's arguments or an image's
    # data, so an input cut or an image cleared never takes length_after below zero
    result.length_after = estimated_message_length(new_messages)
    result.reclaimed_fraction = (before - result.length_after) / before if before else 0.0
    new_dump = dict(dump)
    new_dump["messages"] = new_messages
    if keep_originals and (originals or ORIGINALS_KEY in dump):  # only inputs cut: no empty store added
        if ORIGINALS_KEY in dump and not dump[ORIGINALS_KEY] and originals:
            new_dump[META_KEY] = {**(dump.get(META_KEY) or {}), EMPTY_STORE_FIELD: True}  # restore gives {} back
        new_dump[ORIGINALS_KEY] = originals
    if keys is not None and keys.changed:
        new_dump = with_aliases(new_dump, keys.aliases)
    if inputs:
        meta = dict(new_dump.get(META_KEY) or {})
        meta[INPUTS_FIELD] = {**(meta.get(INPUTS_FIELD) or {}), **inputs}
        new_dump[META_KEY] = meta
    if templated != templated_before:
        new_dump = with_templated(new_dump, templated)
    if media_store:
        from .media import CLEARED_FIELD

        new_dump[META_KEY] = {**(new_dump.get(META_KEY) or {}), CLEARED_FIELD: media_store}
    return new_dump, result


def _superseded_targets(messages: list[dict], targets: list[tuple[int, PlaceholderTemplate | None, int]],
                        exclude_tools: Collection[str]) -> dict[int, tuple[int, PlaceholderTemplate | None, int]]:
    """The superseded reads not cleared already, each with the template naming the later read
    (itself not cleared: its content is what the placeholder points to)."""
    from .reads import superseded_reads, superseded_template

    taken = {i for i, _, _ in targets}
    names = tool_names(messages) if exclude_tools else {}
    out: dict[int, tuple[int, PlaceholderTemplate | None, int]] = {}
    for i, (later, path) in superseded_reads(messages, call_name).items():
        if i in taken or later in taken or names.get(i) in exclude_tools:
            continue
        later_id = messages[later].get("tool_call_id")
        if not isinstance(later_id, str):
            continue
        out[i] = (i, template(superseded_template(later_id, path)), PREVIEW_CHARS)
    return out


def call_name(call: Any) -> str | None:
    """The tool a call names: its ``function`` (or, for OpenAI's custom tools, ``custom``) name."""
    if not isinstance(call, dict):
        return None
    for kind in ("function", "custom"):
        fn = call.get(kind)
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return fn["name"]
    return None


def _call_name(messages: list[dict], at: tuple[int, int]) -> str | None:
    return call_name(messages[at[0]]["tool_calls"][at[1]])


def _occurrences(messages: list[dict], offsets: dict[str, int]) -> dict[int, int]:
    """Message index -> occurrence among results with its ID, only where it is not the first
    (the common case, no reused IDs, builds nothing)."""
    seen = dict(offsets)
    out: dict[int, int] = {}
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            cid = m.get("tool_call_id")
            if type(cid) is str:
                n = seen[cid] = seen.get(cid, 0) + 1
                if n > 1:
                    out[i] = n
    return out


