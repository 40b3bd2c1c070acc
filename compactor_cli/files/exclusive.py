"""A new file made exclusively, as ``tempfile.mkstemp`` makes one, without importing tempfile
(with shutil, random, bz2 and lzma: 11 M instructions of every run's start-up, for one call)."""

from __future__ import annotations

import errno
import os

#: mkstemp's flags: created here or not at all, no link followed, not inherited by children.
_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
          | getattr(os, "O_BINARY", 0))
#: As many names as tempfile tries before it gives up.
_ATTEMPTS = 10000


def create_exclusive(directory: str, prefix: str, suffix: str) -> tuple[int, str]:
    """(descriptor open for reading and writing, path) of a file no one else had: ``prefix``,
    eight random hexadecimal digits, ``suffix``, in ``directory``; mode 0600, as mkstemp's."""
    for _ in range(_ATTEMPTS):
        path = os.path.join(directory, f"{prefix}{os.urandom(4).hex()}{suffix}")
        try:
            return os.open(path, _FLAGS, 0o600), os.path.abspath(path)
        except FileExistsError:
            continue  # taken (or a link left there): another name
    raise FileExistsError(errno.EEXIST, f"no free temporary file name in {directory}")
