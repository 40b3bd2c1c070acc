"""xcompact: compact saved LLM conversation transcripts offline, in batch.

The library works on plain dicts and does no I/O::

    from compactor_cli import reclaim_tool_results, summarize_dump, compact_dump, Policy
    new_dump, result = reclaim_tool_results({"messages": [...]}, keep=12)
    new_dump, status, details = compact_dump(dump, Policy(token_threshold=100_000))
"""

from typing import Any

from .errors import BackendError, InvalidInputError, OutputError, UsageError, XCompactError
from .status import Status
from .version import __version__

#: Public names and the module that defines each: imported on first use (PEP 562), so the
#: command line pays only for what a command needs (``toolcall`` never loads a summariser).
_LAZY = {
    "KNOWN_ROLES": "model.conversation", "ORIGINALS_KEY": "model.conversation", "Problem": "model.conversation",
    "check_conversation": "model.checks", "estimated_message_length": "model.conversation",
    "normalize_record": "model.conversation",
    "PLACEHOLDER_TEMPLATE": "tiers.toolcall", "ToolCallCompactResult": "tiers.toolcall",
    "extract_tool_result": "tiers.extract", "placeholder_for": "tiers.toolcall",
    "reclaim_tool_results": "tiers.toolcall", "restore_conversation": "tiers.restore",
    "restore_details": "tiers.restore",
    "load_conversations": "files.records", "choose_cut_point": "tiers.cut", "summarize_dump": "tiers.summarize",
    "Policy": "tiers.compact", "compact_dump": "tiers.compact",
    "CompactionRequest": "tiers.strategy", "CompactionResult": "tiers.strategy",
    "SummaryRequest": "backends", "Answer": "backends",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'compactor_cli' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "__version__",
    "XCompactError",
    "InvalidInputError",
    "UsageError",
    "OutputError",
    "BackendError",
    "Status",
    *_LAZY,
]
