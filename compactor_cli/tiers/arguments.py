"""Checks at the library's boundary: a wrong type or value from a caller is the package's own
``UsageError`` (or ``InvalidInputError`` for a conversation), with the CLI's wording, never an
AttributeError or TypeError from deep inside, and never accepted silently (a negative count)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..errors import InvalidInputError, UsageError


def count(name: str, value: Any, minimum: int = 0, optional: bool = False) -> None:
    """An integer (not a bool) of at least ``minimum``; None too when ``optional``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        need = "a non-negative integer" if minimum == 0 else f"an integer of at least {minimum}"
        raise UsageError(f"{name} must be {need}{' or None' if optional else ''}, got {_shown(value)}")


def flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be true or false, got {_shown(value)}")


def text(name: str, value: Any, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise UsageError(f"{name} must be text, got {_shown(value)}")


def names(name: str, value: Any) -> None:
    """A collection of tool names (not one bare string, which would be read letter by letter)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) or isinstance(value, dict):
        raise UsageError(f"{name} must be a list of names, got {_shown(value)}")
    for v in value:
        if not isinstance(v, str):
            raise UsageError(f"{name} must be a list of names, got an item {_shown(v)}")


def conversation(value: Any, shape: bool = False) -> None:
    """A dumps() dict with a 'messages' list, or a bare list of messages, each an object; with
    ``shape``, the CLI's checks of the messages and of the keys xcompact owns too (the first
    problem raised, naming where it is)."""
    if isinstance(value, dict):
        messages = value.get("messages")
        if not isinstance(messages, list):
            raise InvalidInputError("a dump needs a 'messages' list")
    elif isinstance(value, list):
        messages = value
    else:
        raise InvalidInputError(f"expected a dumps() dict or a list of messages, got {type(value).__name__}")
    for i, m in enumerate(messages):
        if type(m) is not dict:
            raise InvalidInputError(f"a message must be an object, got {type(m).__name__}", f"/messages/{i}")
    if shape:
        from ..model.checks import check_messages_shape, check_owned_keys

        dump = value if isinstance(value, dict) else {"messages": value}
        for problem in [*check_messages_shape(messages), *(check_owned_keys(dump) if len(dump) > 1 else ())]:
            if problem.fatal:
                raise InvalidInputError(problem.message, problem.pointer)


def backend(value: Any) -> None:
    """None, a name, a BackendConfig, or an object with the backend protocol's ``summarize``."""
    from ..backends.config import BackendConfig

    if value is None or isinstance(value, (str, BackendConfig)):
        return
    if not callable(getattr(value, "summarize", None)):
        raise UsageError(f"backend must be a name ('extractive', 'openai', 'auto'), a BackendConfig or an object "
                         f"with the backend protocol (an async summarize), got {type(value).__name__}")


def _shown(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        shown = repr(value)
        return shown if len(shown) <= 40 else shown[:39] + "…"
    return f"a {type(value).__name__}"
