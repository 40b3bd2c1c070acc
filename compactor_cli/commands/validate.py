"""``xcompact validate``: check conversations, write nothing."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from ..status import Status
from ..tiers.result import TierResult
from . import options as opt
from .base import Command, Transform
from .configure import Configured
from .settings import Settings


class Validate(Command):
    name = "validate"
    help = """Check conversations against the schema and the tool-pairing rules; write nothing.

    Exit 1 when any conversation is invalid (with --strict, also on broken tool pairing or
    repeated tool-call IDs).

    \b
    Example:
      xcompact validate fixtures/taubench_airline_5.jsonl fixtures/claude_code_session.json
    """
    validates = True

    @classmethod
    def slots(cls) -> list[opt.Slot]:
        return [opt.inputs, opt.from_format, opt.cc_history, opt.report, opt.html, opt.quiet, opt.warnings_option,
                opt.strict, opt.engine, opt.address, opt.CONFIG]

    @classmethod
    def build(cls, values: dict[str, Any], explicit: set[str], config_file: str | None) -> Configured:
        strict = values.get("strict", False)
        return Configured("validate", Settings("validate", strict=strict, count_tokens=False, write_output=False),
                          dict(strict=strict))

    @classmethod
    def transform(cls, settings: Settings, counter: Any) -> tuple[Transform, Any]:
        return op_validate, None


Result = TierResult


def op_validate(dump: dict, settings: Settings) -> Result:
    from ..model.schema import schema_problems

    problems = schema_problems(dump)
    if problems:
        raise InvalidInputError(problems[0].message, problems[0].pointer)
    return dump, Status.VALID, {}
