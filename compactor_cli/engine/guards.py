"""Checks the runner makes before and while writing, kept out of its loop: --api-ready and
--sidecar paths (one input; no path the user named twice), a log refused --in-place (it is
read lossily: written back over itself it would be gone)."""

from __future__ import annotations

import os
from typing import Any

from ..commands.settings import RunIO
from ..errors import InvalidInputError, UsageError
from ..files.targets import STDIN, Target
from .step import Outcome


def plan_sidecars(io: RunIO, targets: list[Target]) -> dict[str, Any]:
    """--api-ready / --sidecar: checked before any work (one input; a path that is no input,
    output or report)."""
    path = io.api_ready or io.sidecar
    if path is None:
        return {}
    flag = "--api-ready" if io.api_ready else "--sidecar"
    from ..files.sinks import is_stdout

    if io.api_ready and (path == STDIN or is_stdout(path)):
        raise UsageError("--api-ready: the sidecar cannot go to stdout (the data may be there); name a file")
    if io.api_ready and io.in_place:
        raise UsageError("--api-ready with --in-place would leave the originals only in the sidecar: write the "
                         "API-ready output elsewhere with -o")
    if len(targets) != 1:
        raise UsageError(f"{flag} takes one input (its sidecar lines follow that input's records)")
    from ..files.sinks import file_identity

    ident = file_identity(path)
    named = [t.input.path for t in targets] + [t.path for t in targets if t.path] + \
        ([io.report_path] if io.report_path and io.report_path != STDIN else [])
    for other in named:
        if other != STDIN and file_identity(other) == ident:
            raise UsageError(f"{flag} {path} is also {other}: choose another sidecar path")
    if io.sidecar:
        from .apiready import SidecarReader

        try:
            return {"reader": SidecarReader(path)}
        except InvalidInputError as exc:
            raise UsageError(str(exc)) from None
    if os.path.isdir(path):
        raise UsageError(f"--api-ready {path} is a directory; name a file")
    return {"path": path}


def abort_quietly(sink: Any) -> None:
    if sink is not None:
        try:
            sink.abort()
        except OSError:
            pass


def refuse_log_in_place(outcome: Outcome) -> None:
    """A log is read lossily: written back over itself it would be gone (the file stays as it was)."""
    from ..files.targets import LOG_IN_PLACE
    from ..formats.base import LOG_FORMATS
    from ..formats.detect import NAMES

    fmt = outcome.item.get("format")
    if fmt in LOG_FORMATS:
        raise InvalidInputError(LOG_IN_PLACE.format(what=f"this file ({NAMES[fmt]})") + "; it is unchanged")
