"""Early writeback of a growing output file, so that committing it does not wait for all of it.

An output is made durable by one ``fsync`` before it is renamed into place (sinks.AtomicFile).
Left alone, the kernel holds most of a large output's pages dirty until that ``fsync``, which
then writes them all while the run waits: 80 ms for 200 MB on the development machine, after
the work is done. Asking the kernel to start writing each few MiB as soon as they are written
(Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``: start, do not wait) overlaps that with the
work, and the final ``fsync`` finds little left (bench/README.md). Durability still comes from
the ``fsync`` alone; where the call is missing (not Linux) or fails, nothing changes but the wait.
"""

from __future__ import annotations

import sys
from typing import Any

#: Written bytes between two requests: large enough that the calls cost nothing next to the
#: writing, small enough that a 50 MB output has several.
WRITEBACK_BYTES = 8 << 20
_SYNC_FILE_RANGE_WRITE = 2
_call: Any = None  # the libc function once looked up; False where there is none


def _sync_file_range() -> Any:
    global _call
    if _call is None:
        _call = False
        if not sys.platform.startswith("linux"):  # the call is Linux's own
            return _call
        try:
            import ctypes  # only a run whose output passes WRITEBACK_BYTES pays for it

            fn = ctypes.CDLL(None, use_errno=True).sync_file_range
            fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _call = fn
        except (OSError, AttributeError, ImportError, TypeError):  # no libc to load, or no such symbol
            pass
    return _call


class Writeback:
    """Counts what a file descriptor's owner wrote and, every WRITEBACK_BYTES, asks the kernel
    to start writing that range (the owner flushes its buffer first: see ``due``)."""

    def __init__(self, start: int = 0) -> None:
        self.done = start  # the bytes before this offset were asked for already (or resumed)
        self.written = start

    def due(self, length: int) -> bool:
        """Count ``length`` more bytes written; True when a request is due (flush, then ``start``)."""
        self.written += length
        return self.written - self.done >= WRITEBACK_BYTES

    def start(self, fd: int) -> None:
        fn = _sync_file_range()
        if fn:
            fn(fd, self.done, self.written - self.done, _SYNC_FILE_RANGE_WRITE)  # errors: the fsync reports them
        self.done = self.written


def supported() -> bool:
    """Whether this system has the call (the tests)."""
    return bool(_sync_file_range())
