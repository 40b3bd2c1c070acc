"""Per-conversation statuses, shared by every tier and written into reports."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """What happened to one conversation. Values are the strings written to reports."""

    RECLAIMED = "RECLAIMED"  # tier 1 replaced at least one old tool result
    NOTHING_TO_CONDENSE = "NOTHING_TO_CONDENSE"  # nothing old enough / large enough to compact
    SUMMARIZED = "SUMMARIZED"  # tier 2 replaced the head by a summary
    SUMMARIZE_FAILED = "SUMMARIZE_FAILED"  # tier 2 failed; conversation left as it was
    UNDER_THRESHOLD = "UNDER_THRESHOLD"  # compact: below the trigger, left alone
    STILL_OVER = "STILL_OVER"  # compact: every round spent and still over the threshold
    OVER_THRESHOLD = "OVER_THRESHOLD"  # compact --check: over the threshold (nothing written)
    RESTORED = "RESTORED"  # restore: originals put back
    NOTHING_TO_RESTORE = "NOTHING_TO_RESTORE"  # restore: nothing stored to put back; written unchanged
    VALID = "VALID"  # validate: schema and structure hold
    INVALID_INPUT = "INVALID_INPUT"  # not a conversation xcompact accepts; written unchanged
    CONVERTED = "CONVERTED"  # convert: written in the target format

    def __str__(self) -> str:  # so f-strings print the bare name
        return self.value

    @property
    def failed(self) -> bool:
        return self in _FAILED


_FAILED = frozenset({Status.INVALID_INPUT, Status.SUMMARIZE_FAILED, Status.STILL_OVER})
