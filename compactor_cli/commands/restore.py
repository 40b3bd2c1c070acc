"""``xcompact restore``: give back what xcompact (or xun) compacted."""

from __future__ import annotations

from typing import Any

from ..files.style import STYLE_FIELD
from ..model.conversation import META_KEY
from ..status import Status
from ..tiers.result import TierResult
from . import options as opt
from .base import WRITE_STYLE, Command, Transform
from .configure import Configured
from .settings import Settings


class Restore(Command):
    name = "restore"
    help = """Give back the conversations as they were before compaction.

    Puts every stored original back in place of its placeholder and undoes summaries.

    \b
    Example:
      xcompact restore out.jsonl -o restored.jsonl   (out.jsonl: see the toolcall example)
    """
    light = True
    restyles = False  # it writes the style the input recorded

    @classmethod
    def slots(cls) -> list[opt.Slot]:
        return opt.IO_OPTIONS + [opt.sidecar] + opt.TOKEN_OPTIONS

    @classmethod
    def build(cls, values: dict[str, Any], explicit: set[str], config_file: str | None) -> Configured:
        strict = values.get("strict", False)
        tokens = not values["no_tokens"]
        return Configured("restore", Settings("restore", strict=strict, count_tokens=tokens,
                                              encoding=values["encoding"]),
                          dict(strict=strict, encoding=values["encoding"], tokens=tokens))

    @classmethod
    def transform(cls, settings: Settings, counter: Any) -> tuple[Transform, Any]:
        return op_restore, None


Result = TierResult


def op_restore(dump: dict, settings: Settings) -> Result:
    from ..formats.claude_code_tree import give_back_before_compaction
    from ..tiers.restore import restore_checked

    meta = dump.get(META_KEY)
    style = meta.get(STYLE_FIELD) if isinstance(meta, dict) else None
    new, restored, missing = restore_checked(dump)  # the step checked its shape
    new, earlier = give_back_before_compaction(new)  # a Claude Code log read since its compaction
    fields: dict[str, Any] = {"restored_count": restored + earlier}
    if style is not None and META_KEY not in new:  # all given back: in the bytes the input had
        fields[WRITE_STYLE] = style
    if missing:
        fields["missing_count"] = missing
        fields["warning"] = (f"{missing} placeholder{'s' if missing != 1 else ''} or summary round"
                             f"{'s' if missing != 1 else ''} could not be given back: no original is stored "
                             "(compacted with --originals drop, or by another tool); they stay as they are")
    return new, Status.RESTORED if new is not dump or earlier else Status.NOTHING_TO_RESTORE, fields
