"""Plug-ins named on the command line: ``module:attr`` (imported from the working directory
too, as a user's own file would be), or a name registered as an entry point in ``group``
(``xcompact.backends``, ``xcompact.strategies``). A name that cannot be loaded is a usage error
before any work, naming what failed."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import UsageError

_redirected = 0
_saved_stdout: Any = None
_fd_lock = threading.Lock()
_fd_depth = 0
_fd_saved: int | None = None  # a duplicate of the real fd 1 while plug-in code runs


def _flush_stdout() -> None:
    """Push out what sits in the buffers of fd 1 (xcompact's own data before a plug-in step;
    what a plug-in wrote through sys.__stdout__ or C stdio after it), so each reaches the file
    fd 1 is at that moment."""
    for stream in {id(s): s for s in (sys.__stdout__, sys.stdout) if s is not None}.values():
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)  # a C extension's printf
    except (OSError, AttributeError, TypeError):
        pass


@contextmanager
def fd1_to_stderr() -> Iterator[None]:
    """While plug-in code runs synchronously, file descriptor 1 is a copy of fd 2: a plug-in
    that writes to fd 1 itself (os.write(1, ...), a C extension, a child process inheriting
    stdout) reaches stderr, never the data on stdout. Never held across an ``await``: xcompact
    writes its output to fd 1 between the steps of the event loop (see ``Isolated``).
    Counted (threads, nesting): the last one out restores fd 1."""
    global _fd_depth, _fd_saved
    with _fd_lock:
        if _fd_depth == 0:
            _flush_stdout()
            try:
                saved = os.dup(1)
            except OSError:  # no fd 1 at all: nothing to protect
                saved = None
            if saved is not None:
                try:
                    os.dup2(2, 1)
                except OSError:
                    os.close(saved)
                    saved = None
            _fd_saved = saved
        _fd_depth += 1
    try:
        yield
    finally:
        with _fd_lock:
            _fd_depth -= 1
            if _fd_depth == 0 and _fd_saved is not None:
                _flush_stdout()  # what the plug-in left in stdout's buffers goes to stderr too
                os.dup2(_fd_saved, 1)
                os.close(_fd_saved)
                _fd_saved = None


@contextmanager
def prints_to_stderr() -> Iterator[None]:
    """While a plug-in runs, what it prints goes to stderr: stdout carries data only (the run's
    own writer holds stdout's buffer from before). Counted rather than nested, so interleaved
    coroutines restore stdout only when the last of them is done. Outside an event loop (an
    import, a constructor) fd 1 goes to stderr too; inside one, a block may span an ``await``,
    so the file descriptor is left alone: plug-in calls made in the loop go through
    ``call_plugin``, which redirects fd 1 step by step."""
    with _python_stdout_to_stderr(), contextlib.nullcontext() if _in_event_loop() else fd1_to_stderr():
        yield


def _in_event_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Isolated:
    """Await ``awaitable`` (a plug-in's coroutine) with every step it runs, up to each
    suspension, inside ``fd1_to_stderr`` and with print() going to stderr; between its steps fd
    1 is stdout again, so xcompact's own output written meanwhile is never diverted."""

    def __init__(self, awaitable: Any) -> None:
        self.inner = awaitable.__await__()

    def __await__(self) -> Any:
        send: Any = None
        error: BaseException | None = None
        while True:
            with _python_stdout_to_stderr(), fd1_to_stderr():
                try:
                    yielded = self.inner.throw(error) if error is not None else self.inner.send(send)
                except StopIteration as stop:
                    return stop.value
            try:
                send, error = (yield yielded), None
            except GeneratorExit:
                self.inner.close()
                raise
            except BaseException as exc:  # noqa: BLE001  cancellation and the like: passed to the plug-in
                send, error = None, exc


@contextmanager
def _python_stdout_to_stderr() -> Iterator[None]:
    """sys.stdout is sys.stderr for the duration (counted, as in prints_to_stderr)."""
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


async def call_plugin(method: Any, *args: Any) -> Any:
    """``method(*args)`` of a plug-in, awaited when it returns an awaitable, with what it writes
    to stdout (print or fd 1) sent to stderr while its code runs, and only then."""
    with _python_stdout_to_stderr(), fd1_to_stderr():
        result = method(*args)
    if inspect.isawaitable(result):
        return await Isolated(result)
    return result


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
