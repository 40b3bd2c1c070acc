"""The registry: every command by name. Adding a command is one file and one line here."""

from __future__ import annotations

from ..errors import UsageError
from .base import Command
from .compact import Compact
from .convert import Convert
from .restore import Restore
from .summarize import Summarize
from .toolcall import Toolcall
from .validate import Validate

COMMANDS: dict[str, type[Command]] = {
    "toolcall": Toolcall,
    "summarize": Summarize,
    "compact": Compact,
    "restore": Restore,
    "validate": Validate,
    "convert": Convert,
}
#: The commands the batch function and Ray run (convert has its own command).
BATCH_COMMANDS = tuple(name for name, c in COMMANDS.items() if c.batch)


def command_class(name: str) -> type[Command]:
    """The class of a command, or a UsageError naming the ones there are."""
    found = COMMANDS.get(name)
    if found is None or not found.batch:
        raise UsageError(f"unknown command {name!r}; expected one of {', '.join(BATCH_COMMANDS)}")
    return found


def command_of(settings: object) -> type[Command]:
    """The class of the command a run's settings are for (any registered command)."""
    name = getattr(settings, "command", None)
    found = COMMANDS.get(name) if isinstance(name, str) else None
    if found is None:
        raise UsageError(f"unknown command {name!r}; expected one of {', '.join(COMMANDS)}")
    return found
