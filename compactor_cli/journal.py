"""Checkpoints that let an interrupted run continue where it stopped (``--resume``).

Outputs are written to deterministic partial files (``.NAME.xcompact-partial`` beside the
target) and renamed over the target only when complete, so an interrupted run never leaves a
half-written output. Every few seconds the partial files are flushed to disk and the journal
records how far the run got: targets finished, and for the current one the input offset, the
next line and the partial output's length; also the report's length and counters. A resumed
run truncates the partial files to the checkpoint and continues from there, so its outputs
are byte for byte those of an uninterrupted run. The journal's name hashes the command, its
parameters and its targets: other options start afresh. A finished run leaves its journal
marked complete, so that --resume after the end does nothing instead of running again."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import orjson

from .files import Target, write_bytes_atomic

#: Seconds between checkpoints; XCOMPACT_CHECKPOINT_SECONDS overrides (more often costs fsyncs).
CHECKPOINT_SECONDS = float(os.environ.get("XCOMPACT_CHECKPOINT_SECONDS") or 2.0)


def journal_path(command: str, parameters: dict[str, Any], targets: list[Target], report_path: str | None) -> str:
    """In the cache directory (``$XDG_CACHE_HOME/xcompact/journals``), not beside the outputs,
    so output directories hold nothing but outputs."""
    from .cache import default_cache_dir

    def real(p: str | None) -> str | None:
        return os.path.realpath(p) if p and p != "-" else p

    key = hashlib.sha1(orjson.dumps([command, parameters, [(real(t.input.path), real(t.path)) for t in targets],
                                     real(report_path)], option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()
    return os.path.join(default_cache_dir(), "journals", f"{key[:24]}.json")


class Journal:
    """The resume state of one run: read at start with --resume, written at checkpoints."""

    def __init__(self, path: str, resume: bool) -> None:
        self.path = path
        self.state: dict[str, Any] = {"done": [], "current": None, "report": None}
        if resume and os.path.exists(path):
            with open(path, "rb") as fh:
                self.state = orjson.loads(fh.read())
            self.resumed = True
        else:
            self.resumed = False
            self.discard()

    @property
    def done(self) -> set[int]:
        return set(self.state["done"])

    def current(self, index: int) -> dict[str, Any] | None:
        cur = self.state.get("current")
        return cur if cur and cur.get("index") == index else None

    def save(self, **changes: Any) -> None:
        self.state.update(changes)
        try:
            write_bytes_atomic(self.path, orjson.dumps(self.state))
        except OSError:
            pass  # a checkpoint that cannot be written costs --resume, never the run itself

    def discard(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
