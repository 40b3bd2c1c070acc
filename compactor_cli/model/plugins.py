"""Plug-ins named on the command line: ``module:attr`` (imported from the working directory
too, as a user's own file would be), or a name registered as an entry point in ``group``
(``xcompact.backends``, ``xcompact.strategies``). A name that cannot be loaded is a usage error
before any work, naming what failed."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import UsageError

_redirected = 0
_saved_stdout: Any = None


@contextmanager
def prints_to_stderr() -> Iterator[None]:
    """While a plug-in runs, what it prints goes to stderr: stdout carries data only (the run's
    own writer holds stdout's buffer from before). Counted rather than nested, so interleaved
    coroutines restore stdout only when the last of them is done."""
    global _redirected, _saved_stdout
    if _redirected == 0:
        _saved_stdout, sys.stdout = sys.stdout, sys.stderr
    _redirected += 1
    try:
        yield
    finally:
        _redirected -= 1
        if _redirected == 0:
            sys.stdout, _saved_stdout = _saved_stdout, None


def entry_point_names(group: str) -> list[str]:
    from importlib.metadata import entry_points

    return sorted(ep.name for ep in entry_points(group=group))


def load_plugin(spec: str, group: str, flag: str) -> Any:
    """The object ``spec`` names (see the module docstring); what its import prints goes to stderr."""
    with prints_to_stderr():
        return _load(spec, group, flag)


def _load(spec: str, group: str, flag: str) -> Any:
    if ":" not in spec:
        from importlib.metadata import entry_points

        found = [ep for ep in entry_points(group=group) if ep.name == spec]
        if not found:
            known = entry_point_names(group)
            raise UsageError(f"{flag} {spec}: not a MODULE:ATTR and no {group} entry point of that name"
                             + (f" (installed: {', '.join(known)})" if known else ""))
        try:
            return found[0].load()
        except Exception as exc:  # noqa: BLE001  a plug-in's import error is the user's to see, in one line
            raise UsageError(f"{flag} {spec}: its entry point {found[0].value} cannot be loaded: "
                             f"{type(exc).__name__}: {exc}") from None
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"{flag} {spec}: expected MODULE:ATTR (e.g. my_strategies:KeepRecent)")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # a module beside the data, as `python -m` would find it
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"{flag} {spec}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{flag} {spec}: {module_name} has no attribute {attr}") from None
    return obj
