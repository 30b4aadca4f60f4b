"""MappedFile: one fixed-size, memory-mapped segment of a log (CommitLog or ConsumeQueue).

The file is named by the 20-digit logical offset of its first byte. Writes are memcpy into
the mapping (the event loop never makes a syscall per message); ``sync`` runs fdatasync
and is meant to be called from a worker thread. Space is reserved with posix_fallocate so
that a full disk fails when a segment is created (a clear error), never as SIGBUS when a
mapped page is first written.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from collections.abc import Iterator

from ..errors import DiskFull

# what a file system answers when it has no room for a file (or its owner's quota is used)
NO_SPACE = frozenset((errno.ENOSPC, errno.EDQUOT))


def segment_name(offset: int) -> str:
    return f"{offset:020d}"


def reserve(fd: int, path: str, file_size: int, preallocate: bool = True) -> None:
    """Size a new file: reserved with posix_fallocate (a full disk fails here, removing the
    file), or sparse where the file system cannot reserve."""
    if preallocate:
        try:
            os.posix_fallocate(fd, 0, file_size)
            return
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # e.g. ENOSPC
                os.unlink(path)
                raise
    os.ftruncate(fd, file_size)  # sparse (or a file system without fallocate)


@contextlib.contextmanager
def creating(path: str) -> Iterator[None]:
    """Around the making of a file at ``path``: a full disk (ENOSPC, EDQUOT, from creating
    the directory, the file or its reservation) is raised as DiskFull, a typed error the
    front-ends answer with their own code; other OSErrors pass unchanged."""
    try:
        yield
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise DiskFull(f"cannot create {path}: {exc.strerror}") from exc
        raise


def make_file(path: str, file_size: int) -> None:
    """Create ``path`` on disk at its full size (reserved) unless it exists, without mapping
    it; DiskFull if there is no room. Opening it later as a MappedFile cannot then fail for
    space. Sized files already there (made by the SegmentPreparer) are left as they are."""
    with creating(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size == 0:
                reserve(fd, path, file_size)
        finally:
            os.close(fd)


def drop_if_empty(path: str) -> bool:
    """Remove ``path`` if it has size 0, as a SIGKILL between creating a file and sizing it
    leaves it: nothing was ever written to it. True if removed."""
    if os.path.getsize(path):
        return False
    os.unlink(path)
    return True


class MappedFile:
    __slots__ = ("path", "file_from_offset", "file_size", "mm", "view", "wrote_position",
                 "flushed_position")

    def __init__(self, path: str, file_size: int, *, create: bool, preallocate: bool = True) -> None:
        self.path = path
        self.file_size = file_size
        name = os.path.basename(path)
        self.file_from_offset = int(name) if name.isdigit() else 0
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        try:
            actual = os.fstat(fd).st_size
            if create and actual == 0:
                reserve(fd, path, file_size, preallocate)
            elif actual != file_size:
                raise ValueError(f"{path}: size {actual} != configured segment size {file_size}")
            self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.view = memoryview(self.mm)
        self.wrote_position = 0
        self.flushed_position = 0

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def write(self, data: bytes | memoryview) -> int:
        """Append at the write position; returns the position written at."""
        pos = self.wrote_position
        end = pos + len(data)
        self.view[pos:end] = data
        self.wrote_position = end
        return pos

    def write_at(self, pos: int, data: bytes | memoryview) -> None:
        self.view[pos:pos + len(data)] = data

    def sync(self) -> None:
        """fdatasync the file (blocking: call from a worker thread)."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def zero_from(self, pos: int) -> None:
        """Zero the bytes from ``pos`` to the end, skipping chunks that are already zero."""
        chunk = 1 << 20
        zeros = bytes(chunk)
        while pos < self.file_size:
            end = min(pos + chunk, self.file_size)
            if self.view[pos:end] != zeros[:end - pos]:
                self.view[pos:end] = zeros[:end - pos]
            pos = end

    def close(self) -> None:
        """Drop the mapping. Slices still held by readers keep it alive until they are freed."""
        view, self.view = self.view, memoryview(b"")
        view.release()
        try:
            self.mm.close()
        except BufferError:
            pass  # exported slices are alive; the mapping goes when they do

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
