"""Where bytes go: atomic regular files, special files written into, stdout, and the locks
that keep two runs off one output.

- A regular file (or a name that does not exist yet) grows in a temporary file created
  exclusively (as ``mkstemp``: ``O_EXCL``, no link followed, a short name that fits any directory)
  beside the real target and is renamed over it when complete. ``--in-place`` on a symlink
  rewrites the file it points to and keeps the link.
- A character device, FIFO, socket or terminal (``/dev/null``, ``>(...)``, ``/dev/tty``) is
  written into directly: replacing it would break whoever reads it.
- A path that is our own stdout (``/dev/stdout``, ``/proc/self/fd/1`` or the file stdout is
  redirected to) is stdout.
- A lock file beside each regular target (``.xcompact-lock-<hash>``, removed on release) makes
  a second run on the same output refuse instead of interleaving.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from typing import IO, Any, Protocol

from ..errors import OutputError
from .checksum import crc32, sha1
from .compression import codec_of, new_encoder
from .exclusive import create_exclusive
from .writeback import Writeback

TEMP_PREFIX = ".xcompact-"
TEMP_SUFFIX = ".partial"
#: The write buffer of an output file: a record of tens of KB is one system call per MiB written,
#: not one each (the default buffer is 8 KiB; writes larger than it go straight to the kernel).
WRITE_BUFFER = 1 << 20


class StdoutClosed(Exception):
    """The reader of our stdout went away (``| head``): the run stops quietly, as SIGPIPE would."""


class Spliced(Protocol):
    """Output a worker process wrote to a file of its own (files/parts.py Part)."""

    length: int

    def copy_to(self, fd: int) -> None: ...
    def take(self) -> bytes: ...
    def crc_after(self, crc: int) -> int: ...


class Sink(Protocol):
    def write(self, data: bytes | Spliced) -> None: ...
    def checkpoint(self) -> tuple[int, int]: ...
    def commit(self) -> None: ...
    def abort(self, keep: bool = False) -> None: ...


def is_stdout(path: str) -> bool:
    """Does ``path`` name this process's stdout (same open file object, or the same file)?"""
    if path in ("-", "/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"):
        return True
    try:
        st, out = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)


def is_special(path: str) -> bool:
    """An existing non-regular, non-directory file: written into, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def file_identity(path: str) -> tuple[Any, ...]:
    """What two names must share to be the same file: (dev, inode) if it exists, else its real path."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.realpath(path))


def _apply_mode(path: str, mode_from: str | None) -> None:
    if mode_from and os.path.exists(mode_from):
        os.chmod(path, os.stat(mode_from).st_mode & 0o7777)
    else:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(path, 0o666 & ~umask)


class AtomicFile:
    """A regular file written atomically. ``checkpoint`` makes what was written durable and
    returns (length, crc32 of everything written), so a resumed run can prove the partial file
    is the one it wrote (see journal.py)."""

    def __init__(self, path: str, mode_from: str | None = None, partial: str | None = None,
                 resume_length: int = 0, resume_crc: int = 0) -> None:
        self.path = os.path.realpath(path)  # a symlink stays a symlink; its target is rewritten
        self.mode_from = mode_from
        directory = os.path.dirname(self.path)
        if partial is not None:  # resuming: the journal verified this file (verify_partial)
            fd = os.open(partial, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(errno.EINVAL, f"{partial} is not a regular file")
            os.set_blocking(fd, True)
            self.tmp = partial
            self.fh: IO[bytes] = os.fdopen(fd, "r+b", buffering=WRITE_BUFFER)
            self.fh.truncate(resume_length)
            self.fh.seek(resume_length)
            self.crc = resume_crc
            self.writeback = Writeback(resume_length)
        else:
            os.makedirs(directory, exist_ok=True)
            fd, self.tmp = create_exclusive(directory, partial_prefix(self.path), TEMP_SUFFIX)
            self.fh = os.fdopen(fd, "wb", buffering=WRITE_BUFFER)
            self.crc = 0
            self.writeback = Writeback()

    def write(self, data: bytes | Spliced) -> None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            self.fh.write(data)
            self.crc = crc32(data, self.crc)
            if self.writeback.due(len(data)):
                self.fh.flush()
                self.writeback.start(self.fh.fileno())
        else:  # spliced in the kernel at the end of what was written; the worker's crc extends ours
            self.fh.flush()
            data.copy_to(self.fh.fileno())
            self.fh.seek(0, os.SEEK_END)
            self.crc = data.crc_after(self.crc)
            if self.writeback.due(data.length):
                self.writeback.start(self.fh.fileno())

    def checkpoint(self) -> tuple[int, int]:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        return self.fh.tell(), self.crc

    def rewind(self, length: int, crc: int) -> None:
        """Go back to an earlier checkpoint (a resumed file that starts afresh)."""
        self.fh.flush()
        self.fh.truncate(length)
        self.fh.seek(length)
        self.crc = crc
        self.writeback = Writeback(length)

    def commit(self) -> None:
        self.checkpoint()
        self.fh.close()
        _apply_mode(self.tmp, self.mode_from)
        os.replace(self.tmp, self.path)

    def abort(self, keep: bool = False) -> None:
        """Close; remove the partial file unless it is kept for a resumed run (also when the
        close fails: its flush hits the same full disk or file size limit as the write did)."""
        try:
            if not self.fh.closed:
                self.fh.close()
        except OSError:
            if keep:
                raise
        if not keep:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass


class CompressedFile(AtomicFile):
    """An AtomicFile whose bytes go through a codec. ``checkpoint`` ends the current frame, so
    (length, crc) always describe complete frames: resuming truncates there and starts a new
    frame (the concatenation decodes to the same bytes). The crc covers the compressed bytes, as
    they are on disk."""

    def __init__(self, path: str, codec: str, mode_from: str | None = None, partial: str | None = None,
                 resume_length: int = 0, resume_crc: int = 0) -> None:
        self.codec = codec
        self._enc = new_encoder(codec)  # before the file: a missing zstandard leaves nothing behind
        self._open = False  # a frame has been started and not yet ended
        super().__init__(path, mode_from, partial, resume_length, resume_crc)
        self._frames = resume_length > 0  # the file already holds at least one complete frame

    def write(self, data: bytes | Spliced) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            data = data.take()
        if data:
            self._open = True
            out = self._enc.compress(data)
            if out:
                super().write(out)

    def _end_frame(self) -> None:
        if self._open:
            super().write(self._enc.flush())
            self._enc, self._open, self._frames = new_encoder(self.codec), False, True

    def checkpoint(self) -> tuple[int, int]:
        self._end_frame()
        return super().checkpoint()

    def rewind(self, length: int, crc: int) -> None:
        super().rewind(length, crc)
        self._enc, self._open, self._frames = new_encoder(self.codec), False, length > 0

    def commit(self) -> None:
        if not self._frames and not self._open:  # an empty output is still a valid (empty) stream
            super().write(self._enc.flush())
            self._frames = True
        self._end_frame()
        super().commit()


class StreamFile:
    """stdout, a device, a FIFO or a terminal: written into as bytes come, nothing to rename."""

    def __init__(self, path: str | None = None) -> None:
        self.own = path is not None and not is_stdout(path)
        self.fh: IO[bytes] = open(path, "wb") if self.own else sys.stdout.buffer  # type: ignore[arg-type]
        self.length = 0
        self.crc = 0

    def write(self, data: bytes | Spliced) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            data = data.take()
        try:
            self.fh.write(data)
        except BrokenPipeError:
            if not self.own:
                raise StdoutClosed from None
            raise
        self.length += len(data)

    def checkpoint(self) -> tuple[int, int]:
        self.flush()
        return self.length, 0

    def flush(self) -> None:
        try:
            self.fh.flush()
        except BrokenPipeError:
            if not self.own:
                raise StdoutClosed from None
            raise

    def commit(self) -> None:
        self.flush()
        if self.own:
            self.fh.close()

    def abort(self, keep: bool = False) -> None:
        try:
            self.fh.flush()
        except OSError:
            pass  # nothing more can reach a reader that went away
        finally:
            if self.own:
                self.fh.close()


def open_sink(path: str | None, mode_from: str | None = None, partial: str | None = None,
              resume_length: int = 0, resume_crc: int = 0, compress: bool = False) -> AtomicFile | StreamFile:
    """The right writer for ``path`` (None or "-": stdout). ``compress``: a regular file named
    ``.gz``/``.zst``/``.bz2``/``.xz`` is written through that codec (stdout and devices stay plain)."""
    try:
        if path is None or is_stdout(path) or is_special(path):
            return StreamFile(path)
        codec = codec_of(path) if compress else None
        if codec is not None:
            return CompressedFile(path, codec, mode_from, partial, resume_length, resume_crc)
        return AtomicFile(path, mode_from, partial, resume_length, resume_crc)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_bytes_atomic(path: str, data: bytes) -> None:
    sink = AtomicFile(path)
    try:
        sink.write(data)
        sink.commit()
    except BaseException:
        sink.abort()
        raise


def is_own_partial(partial: Any, target: str) -> bool:
    """Is ``partial`` a name xcompact gives temporary files of ``target``? A journal is data: a
    tampered one must not make a run truncate, rename or delete any other file."""
    if not isinstance(partial, str):
        return False
    name = os.path.basename(partial)
    return (name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX) and "lock" not in name
            and os.path.dirname(partial) == os.path.dirname(os.path.realpath(target)))


def partial_prefix(target: str) -> str:
    """Temporary files of one target share a prefix (a hash of its name), so the run that holds
    the target's lock can find and remove those a killed run left."""
    name = os.path.basename(os.path.realpath(target)).encode("utf-8", "surrogateescape")
    return f"{TEMP_PREFIX}{sha1(name).hexdigest()[:12]}-"


def remove_stale_partials(target: str) -> None:
    """Delete the temporary files earlier runs left for ``target`` (a run killed without --resume
    after, or one whose journal was lost or damaged). Call only while holding its lock."""
    real = os.path.realpath(target)
    prefix, directory = partial_prefix(real), os.path.dirname(real)
    try:
        names = [n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(TEMP_SUFFIX)]
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


def remove_partial(partial: Any, target: str) -> None:
    """Delete a partial file of ``target`` a previous run left (only ever one of ours)."""
    if is_own_partial(partial, target):
        try:
            os.unlink(partial)
        except OSError:
            pass


def verify_partial(partial: Any, length: Any, crc: Any, target: str) -> str | None:
    """None if ``partial`` is our temporary file for ``target`` and its first ``length`` bytes
    have checksum ``crc``; else what is wrong (for the "starting afresh" message). The values
    come from a journal, which may have been tampered with: any type is checked."""
    if not is_own_partial(partial, target) or not isinstance(length, int) or not isinstance(crc, int):
        return "the journal does not name a partial output of this run"
    try:  # O_NONBLOCK: a FIFO planted at the partial's name must not hang the run
        fd = os.open(partial, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return f"its partial output is gone ({exc.strerror})"
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return "its partial output is not a regular file"
        value, left = 0, length
        while left:
            chunk = fh.read(min(left, 1 << 20))
            if not chunk:
                return f"its partial output is shorter than the checkpoint ({length - left} of {length} bytes)"
            value = crc32(chunk, value)
            left -= len(chunk)
    return None if value == crc else "its partial output was changed since the checkpoint"


# ---------------------------------------------------------------- locks

class OutputLocked(OutputError):
    """An output or report another run is writing (or whose lock cannot be taken): a conflict
    with the state of the machine, not a usage error: the command ends with exit 1 and one line."""


class OutputLock:
    """An exclusive, non-blocking lock on one output path, held for as long as it is written.

    The lock file lives beside the target and is removed on release; acquiring checks that the
    file locked is still the one at the path (another run may have removed it meanwhile)."""

    def __init__(self, target: str) -> None:
        real = os.path.realpath(target)
        digest = sha1(os.path.basename(real).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        self.path = os.path.join(os.path.dirname(real), f"{TEMP_PREFIX}lock-{digest}")
        self.target = target
        self.fd: int | None = None

    def acquire(self) -> None:
        for _ in range(10):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                continue
            except OSError as exc:
                raise OutputLocked(f"cannot lock {self.target}: {exc.strerror} ({self.path})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise OutputLocked(f"another xcompact run is writing {self.target}; wait for it to finish "
                                      "or choose another output") from None
                raise
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return
            os.close(fd)  # the file we locked was removed by a run that finished: lock the new one
        raise OutputLocked(f"cannot lock {self.target}: the lock file {self.path} keeps changing")

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def lock_output(path: str | None) -> OutputLock | None:
    """Lock a regular output; stdout and special files are not locked (nothing is replaced)."""
    if path is None or is_stdout(path) or is_special(path):
        return None
    lock = OutputLock(path)
    lock.acquire()
    return lock


def file_crc(path: str) -> tuple[int, int] | None:
    """(size, crc32) of a whole regular file, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as fh:
            value, size = 0, 0
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                value = crc32(chunk, value)
                size += len(chunk)
    except OSError:
        return None
    return size, value
