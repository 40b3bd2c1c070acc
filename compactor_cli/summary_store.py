"""Kept for imports: the tier-2 archive and all restore logic live in ``restore.py``."""

from __future__ import annotations

from .model.conversation import ARCHIVE_KEY, COUNTER_KEY, REPLACED_KEYS
from .restore import restore_summaries

_REPLACED = REPLACED_KEYS

__all__ = ["ARCHIVE_KEY", "COUNTER_KEY", "restore_summaries"]
