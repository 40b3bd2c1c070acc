"""What every command is: a class with its options, the settings they build, the per-record
transform, and the facts the engine asks about (does it call a model, is it cheap per record,
does it restyle what it rewrites). One class per command, in an explicit registry
(registry.py), on the model of OpenHands' condensers: adding a command is one file and one line."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import UsageError
from ..tiers.result import TierResult

if TYPE_CHECKING:
    from .configure import Configured
    from .options import Slot
    from .settings import Settings

#: The per-record transform: a dump and the run's settings in, (dump, status, report fields) out;
#: a coroutine for the commands that may wait on a model.
Transform = Callable[[dict, "Settings"], TierResult | Awaitable[TierResult]]
#: A transform's field (never a report key): the style to write its record in (restore).
WRITE_STYLE = "write_style"


class Command:
    """A command. Class attributes answer the engine's questions; the class methods build."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""  # the --help text (the CLI builds the command from it)
    models: ClassVar[bool] = False  # may call a model: tokens are always counted, records run concurrently
    tier1: ClassVar[bool] = False  # runs tier 1 (the report sums what it reclaimed)
    light: ClassVar[bool] = False  # without tokens, cheap enough per record that one core serves small inputs
    restyles: ClassVar[bool] = True  # a rewritten record records the input's style (restore writes it back)
    validates: ClassVar[bool] = False  # a record it could not rewrite is not valid
    own_step: ClassVar[bool] = False  # records go through its own step (convert), not process_record
    batch: ClassVar[bool] = True  # the batch function and Ray run it (convert: its own command only)
    writes_nothing_with: ClassVar[str] = "--dry-run writes"  # the flags after which nothing is written

    @classmethod
    def slots(cls) -> list[Slot]:
        """The command's options, in --help order."""
        raise UsageError(f"{cls.name} has no record options")

    @classmethod
    def build(cls, values: dict[str, Any], explicit: set[str], config_file: str | None) -> Configured:
        """Settings and the report's parameters from click's values (every option, converted)."""
        raise UsageError(f"{cls.name} is configured by its own command")

    @classmethod
    def transform(cls, settings: Settings, counter: Any) -> tuple[Transform, Any]:
        """The per-record transform, and the summary backend it uses (or None)."""
        raise UsageError(f"{cls.name} has its own per-record step")
