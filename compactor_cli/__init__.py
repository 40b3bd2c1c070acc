"""xcompact: compact saved LLM conversation transcripts offline, in batch.

The library works on plain dicts and does no I/O::

    from compactor_cli import reclaim_tool_results, summarize_dump, compact_dump, Policy
    new_dump, result = reclaim_tool_results({"messages": [...]}, keep=12)
    new_dump, status, details = compact_dump(dump, Policy(token_threshold=100_000))
"""

__version__ = "0.1.0"

from .errors import XCompactError, InvalidInputError, UsageError, OutputError, BackendError
from .conversation import (
    KNOWN_ROLES,
    ORIGINALS_KEY,
    Problem,
    check_conversation,
    estimated_message_length,
    normalize_record,
)
from .status import Status
from .toolcall import (
    PLACEHOLDER_TEMPLATE,
    ToolCallCompactResult,
    extract_tool_result,
    placeholder_for,
    reclaim_tool_results,
    restore_conversation,
)
from .files import load_conversations
from .summarize import choose_cut_point
from .tier2 import summarize_dump
from .compact import Policy, compact_dump

__all__ = [
    "__version__",
    "XCompactError",
    "InvalidInputError",
    "UsageError",
    "OutputError",
    "BackendError",
    "KNOWN_ROLES",
    "ORIGINALS_KEY",
    "Problem",
    "check_conversation",
    "estimated_message_length",
    "normalize_record",
    "Status",
    "PLACEHOLDER_TEMPLATE",
    "ToolCallCompactResult",
    "extract_tool_result",
    "placeholder_for",
    "reclaim_tool_results",
    "restore_conversation",
    "load_conversations",
    "choose_cut_point",
    "summarize_dump",
    "Policy",
    "compact_dump",
]
