"""Older images and reasoning (``--images keep-last N``, ``--thinking keep-last N``).

Real logs carry bulk that is not tool output: Codex rollouts keep every screenshot inline
(145 images through one compaction), and reasoning models leave their thinking on every turn.
The last N images (image parts, in any message) and the last N assistant reasonings stay; older
ones become a short placeholder naming a store key, the original kept in the dump under
``xcompact.cleared_parts`` so that ``restore`` gives it back exactly (the placeholder names its
key, so messages may move, or be summarised, in between).

An image part becomes a text part ``[image: image/png, ~34 KB; stored by xcompact, ID: image-3]``;
reasoning (``reasoning_content``, or ``reasoning`` when it is text) becomes
``[reasoning cleared by xcompact: 5210 characters, ID: thinking-2]``. Messages that are written
back from their native blocks (Anthropic and Responses records: signed thinking, encrypted
reasoning, their own image blocks) are never altered here; they are counted as left native.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..formats.base import MSG_KEY
from ..model.conversation import META_KEY
from ..model.images import image_label, is_image_part

#: ``xcompact`` field: store key -> the image part or reasoning text it stands for.
CLEARED_FIELD = "cleared_parts"
_IMAGE_TEXT = re.compile(r"\[image: [^\]\n]*; stored by xcompact, ID: (image-[0-9]+)\]")
_THINKING_TEXT = re.compile(r"\[reasoning cleared by xcompact: [0-9]+ characters, ID: (thinking-[0-9]+)\]")
REASONING_KEYS = ("reasoning_content", "reasoning")


def image_placeholder_chars(content: list[Any]) -> int:
    """The characters of the text parts that are xcompact's placeholders of cleared images. The
    length estimate counts no image part, so tier 1 can keep a result with images as shorter than
    its placeholder; once images_keep has put these texts in their place, they must not count
    either, or a second run would clear the result the first kept."""
    total = 0
    for p in content:
        text = p.get("text") if type(p) is dict else None
        if type(text) is str and text.startswith("[image: ") and _IMAGE_TEXT.fullmatch(text):
            total += len(text)
    return total


@dataclass
class MediaCleared:
    images: int = 0
    thinking: int = 0
    left_native: int = 0  # messages written from native blocks: their images and thinking untouched


def stored_parts(dump: dict) -> dict[str, Any]:
    meta = dump.get(META_KEY)
    parts = meta.get(CLEARED_FIELD) if isinstance(meta, dict) else None
    return parts if isinstance(parts, dict) else {}


class _Keys:
    """Fresh keys: never one stored, nor one a placeholder in the messages names (its original
    dropped with ``--originals drop``: a later original under that key would be put back there)."""

    def __init__(self, messages: list[dict], store: dict[str, Any]) -> None:
        self.taken = set(store)
        for m in messages:
            content = m.get("content")
            if isinstance(content, list):
                for p in content:
                    text = p.get("text") if isinstance(p, dict) else None
                    if isinstance(text, str) and (hit := _IMAGE_TEXT.fullmatch(text)):
                        self.taken.add(hit.group(1))
            for k in REASONING_KEYS:
                if isinstance(m.get(k), str) and (hit := _THINKING_TEXT.fullmatch(m[k])):
                    self.taken.add(hit.group(1))
        self.next = {"image": 1, "thinking": 1}

    def new(self, kind: str) -> str:
        while f"{kind}-{self.next[kind]}" in self.taken:
            self.next[kind] += 1
        key = f"{kind}-{self.next[kind]}"
        self.taken.add(key)
        return key


def clear_media(messages: list[dict], images_keep: int | None, thinking_keep: int | None,
                store: dict[str, Any], keep_originals: bool) -> tuple[list[dict], MediaCleared]:
    """``messages`` with older images and reasoning replaced (a new list; changed messages are
    copies), the originals added to ``store``; what was done."""
    done = MediaCleared()
    out = list(messages)
    keys = _Keys(messages, store)
    if images_keep is not None:
        where = [(i, j) for i, m in enumerate(messages) if isinstance(m.get("content"), list)
                 for j, p in enumerate(m["content"]) if is_image_part(p)]
        old = where[: max(0, len(where) - images_keep)]
        for i, j in old:
            m = out[i]
            if MSG_KEY in m:
                done.left_native += 1
                continue
            part = m["content"][j]
            if MSG_KEY in part or not isinstance(part, dict):
                continue
            key = keys.new("image")
            text = f"[image: {image_label(part)}; stored by xcompact, ID: {key}]"
            content = list(m["content"])
            content[j] = {"type": "text", "text": text}
            out[i] = {**m, "content": content}
            if keep_originals:
                store[key] = part
            done.images += 1
    if thinking_keep is not None:
        where_t = [(i, k) for i, m in enumerate(messages) if m.get("role") == "assistant"
                   for k in REASONING_KEYS if isinstance(m.get(k), str) and m[k]]
        old_t = where_t[: max(0, len(where_t) - thinking_keep)]
        for i, k in old_t:
            m = out[i]
            value = m[k]
            if MSG_KEY in m:
                done.left_native += 1
                continue
            if _THINKING_TEXT.fullmatch(value):
                continue  # cleared already
            key = keys.new("thinking")
            text = f"[reasoning cleared by xcompact: {len(value)} characters, ID: {key}]"
            if len(text) >= len(value):
                continue
            out[i] = {**m, k: text}
            if keep_originals:
                store[key] = value
            done.thinking += 1
    return out, done


def restore_media(dump: dict) -> tuple[dict, int]:
    """Put back every image and reasoning whose original is stored; drop the field once empty."""
    stored = stored_parts(dump)
    if not stored:
        return dump, 0
    remaining = dict(stored)
    restored = 0
    messages = list(dump["messages"])
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        new = m
        content = m.get("content")
        if isinstance(content, list):
            parts = None
            for j, p in enumerate(content):
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
                    hit = _IMAGE_TEXT.fullmatch(p["text"])
                    if hit and hit.group(1) in remaining:
                        parts = parts if parts is not None else list(content)
                        parts[j] = remaining.pop(hit.group(1))
                        restored += 1
            if parts is not None:
                new = {**new, "content": parts}
        for k in REASONING_KEYS:
            value = m.get(k)
            if isinstance(value, str):
                hit = _THINKING_TEXT.fullmatch(value)
                if hit and hit.group(1) in remaining:
                    new = {**new, k: remaining.pop(hit.group(1))}
                    restored += 1
        messages[i] = new
    meta = dict(dump.get(META_KEY) or {})
    if remaining:
        meta[CLEARED_FIELD] = remaining
    else:
        meta.pop(CLEARED_FIELD, None)
    new_dump = {**dump, "messages": messages}
    if meta:
        new_dump[META_KEY] = meta
    else:
        new_dump.pop(META_KEY, None)
    return new_dump, restored
