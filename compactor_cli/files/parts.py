"""Part files: the output of one byte range, written by the worker process that made it and
spliced into the run's output by the main process in the kernel (``copy_file_range``), so the
main process never carries output bytes through a pipe (engine/executors.py). Each part carries
its crc32, which ``crc32_combine`` folds into the output's for --resume."""

from __future__ import annotations

import errno
import os

from .checksum import crc32


class Part:
    """A range's output in a file a worker wrote (in the run's private parts directory), with
    its length and crc32. The main process appends it to the output with ``copy_to`` (in the
    kernel, removing the file) or takes its bytes (``take``, for stdout and compressed outputs)."""

    def __init__(self, path: str, length: int, crc: int) -> None:
        self.path, self.length, self.crc = path, length, crc

    @classmethod
    def write(cls, path: str, data: bytes) -> Part:
        try:
            with open(path, "xb") as fh:
                fh.write(data)
        except BaseException:
            unlink_part(path)
            raise
        return cls(path, len(data), crc32(data))

    def crc_after(self, crc: int) -> int:
        """crc32 of (the bytes ``crc`` covers) followed by this part."""
        return crc32_combine(crc, self.crc, self.length)

    def copy_to(self, fd: int) -> None:
        """Append the part at ``fd``'s offset (copy_file_range; read/write where the kernel
        cannot copy between these files), then remove it."""
        try:
            src = os.open(self.path, os.O_RDONLY)
            try:
                left = self.length
                while left:
                    try:
                        n = os.copy_file_range(src, fd, left)
                    except OSError as exc:
                        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                            raise
                        chunk = os.read(src, min(left, 1 << 20))
                        n = len(chunk)
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fd, view):]
                    if n == 0:
                        raise OSError(errno.EIO, f"part file {self.path} is shorter than its {self.length} bytes")
                    left -= n
            finally:
                os.close(src)
        finally:
            unlink_part(self.path)

    def take(self) -> bytes:
        try:
            with open(self.path, "rb") as fh:
                return fh.read()
        finally:
            unlink_part(self.path)


def unlink_part(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_CRC_OPS: list[list[int]] = []  # [k]: the GF(2) operator that appends 2**k zero bytes to a crc32


def _gf2_times(mat: list[int], vec: int) -> int:
    s = i = 0
    while vec:
        if vec & 1:
            s ^= mat[i]
        vec >>= 1
        i += 1
    return s


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """zlib's crc32_combine (not exposed by Python's zlib): crc32(a + b) from crc32(a), crc32(b)
    and len(b), so a part's crc, computed by its worker, extends the output's."""
    if not _CRC_OPS:
        op = [0xEDB88320] + [1 << n for n in range(31)]  # one zero bit
        for _ in range(3):  # squared: 2, 4, 8 bits (one byte)
            op = [_gf2_times(op, v) for v in op]
        _CRC_OPS.append(op)
    while len(_CRC_OPS) < len2.bit_length():  # 2**k bytes: made as far as lengths need them
        _CRC_OPS.append([_gf2_times(_CRC_OPS[-1], v) for v in _CRC_OPS[-1]])
    k = 0
    while len2:
        if len2 & 1:
            crc1 = _gf2_times(_CRC_OPS[k], crc1)
        len2 >>= 1
        k += 1
    return crc1 ^ crc2


PARTS_PREFIX = ".xcompact-parts-"


def remove_stale_parts() -> None:
    """Parts directories of runs that were killed (SIGKILL leaves them): their pid is gone."""
    import shutil  # only for -j N: a run of one process never needs them
    import tempfile

    base = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(base) if n.startswith(PARTS_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(PARTS_PREFIX):].split("-", 1)[0]
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        except (ValueError, OSError):
            pass
