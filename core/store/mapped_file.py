"""MappedFile: one fixed-size, memory-mapped segment of a log (CommitLog or ConsumeQueue).

The file is named by the 20-digit logical offset of its first byte. Writes are memcpy into
the mapping (the event loop never makes a syscall per message); ``sync`` runs fdatasync
and is meant to be called from a worker thread.

A file is made at its full size (ftruncate: offsets and the mapping never change size) but
only a *window* of it is backed by disk blocks at first (posix_fallocate of [0, window));
``backed`` says how far. A write into a mapped page that has no block, on a full disk, is
SIGBUS, which kills the process: so no byte at or past ``backed`` may ever be written (or
populated, see page_warmer), and writers extend the backing first (``ensure_backed``, a
posix_fallocate: on a full disk a DiskFull error, raised before anything is written). The
owners ask for the next window in a worker thread ahead of the writer (segment_preparer),
so the writer's own extension is only a fallback. ``window=None`` backs the whole file.

Small files written through many mappings (ConsumeQueues: one per queue) are backed by
writing zeros (``zero_fill``) instead: the first store into a mapped page of a fallocated
(unwritten) extent costs 1-6 ms on ext4 here (the extent's conversion on the fault), one of
a page already written with zeros about a microsecond, and the write reserves the blocks
as fallocate does (ENOSPC from the write, not SIGBUS later). A first record into 5,000
new queues: 30.8 s of faults with fallocate, 0.5 s with the window written.

``backed`` never claims more than the disk holds: it starts at the window for a file made
here, at 0 for a file mapped from disk (its allocation is unknown: recovery raises it to
the write position, as written bytes have blocks), and only posix_fallocate raises it.
Several threads may extend one file at once: posix_fallocate of a backed range is a cheap
no-op, and a racing assignment can only leave ``backed`` lower than the truth.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import DiskFull, StoreUnavailable
from .libc_map import CLOSED, advise_random, map_file, sync_mapping

# what a file system answers when it has no room for a file (or its owner's quota is used)
NO_SPACE = frozenset((errno.ENOSPC, errno.EDQUOT))
# what it answers when it cannot reserve blocks at all: the file stays sparse (as before
# the backing existed), and nothing better can be done there
CANNOT_RESERVE = frozenset((errno.EOPNOTSUPP, errno.EINVAL))
# what the process meets at its own limits (descriptors, mappings, memory): the put or the
# creation is refused as StoreUnavailable (retriable), and the broker keeps serving
EXHAUSTED = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOMEM))
PAGE = mmap.PAGESIZE
log = logging.getLogger(__name__)
_UNMAPPED = memoryview(b"")  # the view of a file whose mapping was dropped


def segment_name(offset: int) -> str:
    return f"{offset:020d}"


def _page_up(n: int) -> int:
    return n + -n % PAGE


def backing_end(file_size: int, window: int | None) -> int:
    """How much of a new file of ``file_size`` bytes is backed at creation."""
    return file_size if window is None else min(file_size, _page_up(window))


def reserve(fd: int, path: str, file_size: int, backed: int | None = None,
            zero_fill: bool = False) -> int:
    """Size a new file to ``file_size`` and back [0, ``backed``) of it with disk blocks (all
    of it when None; written with zeros when ``zero_fill``); returns how much is backed. A
    full disk fails here, removing the file. ftruncate comes first: a crash between the two
    leaves a sparse full-size file, which loads like any other (its backing unknown, so
    rebuilt from its write position)."""
    backed = file_size if backed is None else min(backed, file_size)
    os.ftruncate(fd, file_size)
    if backed <= 0:
        return 0
    try:
        _back(fd, 0, backed, zero_fill)
    except OSError as exc:
        if exc.errno in CANNOT_RESERVE:
            return file_size  # sparse: a file system without fallocate
        os.unlink(path)  # e.g. ENOSPC
        raise
    return backed


@contextlib.contextmanager
def creating(path: str) -> Iterator[None]:
    """Around the making of a file at ``path``: a full disk (ENOSPC, EDQUOT, from creating
    the directory, the file or its reservation) is raised as DiskFull, a typed error the
    front-ends answer with their own code; the process's own limits (EMFILE, ENFILE,
    ENOMEM) as StoreUnavailable; other OSErrors pass unchanged."""
    try:
        yield
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise DiskFull(f"cannot create {path}: {exc.strerror}") from exc
        if exc.errno in EXHAUSTED:  # one line, no traceback: the client is told to retry
            log.warning("cannot make or map %s: %s; refused as retriable", path, exc.strerror)
            raise StoreUnavailable(f"cannot create {path}: {exc.strerror}") from exc
        raise


def make_file(path: str, file_size: int, window: int | None = None, need: int = 0,
              zero_fill: bool = False) -> None:
    """Create ``path`` on disk at its full size unless it exists, without mapping it, with
    [0, max(window, need)) backed; DiskFull if there is no room. A file already there (made
    by the SegmentPreparer) is backed that far too: a no-op for the window it was made with,
    so opening it later as a MappedFile cannot then fail for space."""
    backed = max(backing_end(file_size, window), min(_page_up(need), file_size))
    with creating(path):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the directory first (a makedirs each time costs a mkdir)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size == 0:
                reserve(fd, path, file_size, backed, zero_fill)
            else:
                _allocate(fd, 0, backed)
        finally:
            os.close(fd)


def _allocate(fd: int, start: int, end: int) -> bool:
    """posix_fallocate [start, end); False where the file system cannot reserve blocks."""
    if end <= start:
        return True
    try:
        os.posix_fallocate(fd, start, end - start)
    except OSError as exc:
        if exc.errno in CANNOT_RESERVE:
            return False
        raise
    return True


_ZEROS = bytes(1 << 16)


def _back(fd: int, start: int, end: int, zero_fill: bool) -> bool:
    """Give [start, end) disk blocks: posix_fallocate, or with ``zero_fill`` a write of
    zeros (only ever over bytes no one has written: see MappedFile.extend_backing)."""
    if not zero_fill:
        return _allocate(fd, start, end)
    while start < end:
        start += os.pwrite(fd, _ZEROS[:min(len(_ZEROS), end - start)], start)
    return True


def drop_if_empty(path: str) -> bool:
    """Remove ``path`` if it has size 0, as a SIGKILL between creating a file and sizing it
    leaves it: nothing was ever written to it. True if removed."""
    if os.path.getsize(path):
        return False
    os.unlink(path)
    return True


class MappingBudget:
    """At most ``limit`` files of its kind mapped at once: the least recently used is
    unmapped when one more is mapped (``MappedFile.mapped`` maps it again on use).

    One mapping is one VMA, and a process has vm.max_map_count of them (65,530 by
    default): 100,000 queues each with a mapped ConsumeQueue file would fail with ENOMEM,
    and idle queues would keep their pages resident. Unmapping is safe whatever readers
    hold: a slice keeps its mapping alive until it is freed (libc_map); dirty pages stay in
    the page cache for the next fdatasync (``sync`` goes through the path)."""

    __slots__ = ("limit", "mapped_files")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.mapped_files: dict[MappedFile, None] = {}  # insertion order: least recent first

    def touch(self, mf: MappedFile) -> None:
        files = self.mapped_files
        if files.pop(mf, 1) is None:  # was mapped: now the most recent
            files[mf] = None
            return
        files[mf] = None
        while len(files) > self.limit:
            old = next(iter(files))
            del files[old]
            old.unmap()

    def forget(self, mf: MappedFile) -> None:
        self.mapped_files.pop(mf, None)


class MappedFile:
    __slots__ = ("path", "file_from_offset", "file_size", "mm", "view", "wrote_position",
                 "flushed_position", "backed", "window", "backing_asked", "budget", "filling")
    mm: Any  # the mapping (libc_map's), or CLOSED while a lazy or budgeted file is unmapped

    def __init__(self, path: str, file_size: int, *, create: bool, window: int | None = None,
                 head: int = 0, budget: MappingBudget | None = None, zero_fill: bool = False,
                 lazy: bool = False) -> None:
        """Map ``path``; with ``create``, make it (or take the one made ahead) with [0, head +
        window) backed. ``window`` is also the step ``ensure_backed`` extends by. With a
        ``budget`` the mapping may be dropped while idle: use ``mapped()``, not ``view``.
        ``zero_fill``: backed by writing zeros, not fallocate (see the module's notes).
        ``lazy`` (with a budget): not mapped until ``mapped()`` is first called, and an
        existing file not even opened (its owner checks its size when it reads it): a store
        with 100,000 queues opens, and writes a first entry into each, without 100,000
        mappings (see ``write_through``)."""
        self.path = path
        self.budget = budget
        # held while zeros are written past ``backed``: two extenders (the preparer's thread
        # and the writer) must not both write zeros, or the slower one could zero entries
        # the writer put there after the faster one raised ``backed``
        self.filling = threading.Lock() if zero_fill else None
        self.file_size = file_size
        self.window = file_size if window is None else max(PAGE, _page_up(window))
        name = os.path.basename(path)
        self.file_from_offset = int(name) if name.isdigit() else 0
        initial = file_size if window is None else min(file_size, _page_up(head + window))
        self.wrote_position = 0
        self.flushed_position = 0
        if lazy and budget is not None and not create:
            self.backed = self.backing_asked = 0  # unknown: recovery sets it
            self.mm, self.view = CLOSED, _UNMAPPED
            return
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        try:
            st = os.fstat(fd)
            actual = st.st_size
            if create and actual == 0:
                self.backed = reserve(fd, path, file_size, initial, zero_fill)
            elif actual != file_size:
                raise ValueError(f"{path}: size {actual} != configured segment size {file_size}")
            elif create:  # made ahead (preparer, make_file) with this window: a no-op
                # (fallocate even in zero-fill mode: the file may hold data already), unless
                # its blocks are there (st_blocks counts 512 bytes), as the preparer made them
                self.backed = initial if st.st_blocks * 512 >= initial or _allocate(fd, 0, initial) \
                    else file_size
            else:
                self.backed = 0  # unknown: recovery sets it from the write position
            if not (lazy and budget is not None):
                self.mm = map_file(fd, file_size)  # keeps no descriptor (see libc_map)
        finally:
            os.close(fd)
        self.backing_asked = self.backed  # how far a background extension was asked for
        if lazy and budget is not None:
            self.mm, self.view = CLOSED, _UNMAPPED
            return
        self.view = memoryview(self.mm).cast("B")
        if budget is not None:
            advise_random(self.mm)
            budget.touch(self)

    def mapped(self) -> memoryview:
        """The mapping's bytes, mapped again if its budget dropped it (one dict move when
        it did not)."""
        budget = self.budget
        if budget is not None:
            if self.mm is CLOSED:
                self._remap()
            budget.touch(self)
        return self.view

    def _remap(self) -> None:
        with creating(self.path):  # EMFILE, ENOMEM: StoreUnavailable
            fd = os.open(self.path, os.O_RDWR)
            try:
                self.mm = map_file(fd, self.file_size)
            finally:
                os.close(fd)
        advise_random(self.mm)
        self.view = memoryview(self.mm).cast("B")

    def unmap(self) -> None:
        """Drop this file's references to its mapping (its budget's eviction); the pages go
        when no reader holds a slice, and ``mapped`` maps the file again."""
        self.mm, self.view = CLOSED, _UNMAPPED

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    # -- backing ---------------------------------------------------------------------------
    def ensure_backed(self, end: int) -> None:
        """The writer's check before writing up to ``end``: one comparison when [0, end) is
        backed; else back it now, with a window beyond it if the disk has room for one.
        DiskFull (nothing written, nothing changed) if not even [0, end) fits."""
        if end > self.backed:
            self.extend_backing(end, self.window)

    def extend_backing(self, end: int, ahead: int = 0) -> None:
        """Back [0, end + ahead) of the file (blocking: a posix_fallocate of what is not yet
        backed), or at least [0, end) when the disk has no room for ``ahead`` more. Raises
        DiskFull when [0, end) does not fit, other OSErrors as they are (a deleted file)."""
        if self.filling is None:
            self._extend_backing(end, ahead)
        else:
            with self.filling:
                self._extend_backing(end, ahead)

    def _extend_backing(self, end: int, ahead: int) -> None:
        start = self.backed
        target = min(self.file_size, _page_up(end + ahead))
        if target <= start:
            return
        fill = self.filling is not None  # nothing is written at or past ``backed``: zeros there
        fd = os.open(self.path, os.O_RDWR)
        try:
            try:
                reserved = _back(fd, start, target, fill)
            except OSError as exc:
                need = min(self.file_size, _page_up(end))
                if exc.errno not in NO_SPACE:
                    raise
                if need >= target:
                    raise DiskFull(f"cannot extend {self.path}: {exc.strerror}") from exc
                try:  # the last of the disk: no window beyond, but this write fits
                    reserved = _back(fd, start, need, fill)
                except OSError as exc2:
                    if exc2.errno in NO_SPACE:
                        raise DiskFull(f"cannot extend {self.path}: {exc2.strerror}") from exc2
                    raise
                target = need
        finally:
            os.close(fd)
        if not reserved:
            target = self.file_size  # a file system that cannot reserve: as sparse as before
        if target > self.backed:
            self.backed = target
        if target > self.backing_asked:
            self.backing_asked = target

    def assume_backed(self, end: int) -> None:
        """[0, end) is known to have blocks (it holds written data): after a restart."""
        end = min(end, self.file_size)
        if end > self.backed:
            self.backed = end
        if end > self.backing_asked:
            self.backing_asked = end

    # -- writing ---------------------------------------------------------------------------
    def write(self, data: bytes | memoryview) -> int:
        """Append at the write position; returns the position written at. The caller has
        made sure the bytes are backed (``ensure_backed``)."""
        pos = self.wrote_position
        end = pos + len(data)
        self.view[pos:end] = data
        self.wrote_position = end
        return pos

    def write_through(self, data: bytes | memoryview) -> int:
        """`write` by a pwrite(2) of the file, for a large chunk (a slave's frame): the
        kernel's write path fills the page-cache pages the mapping shows without a page
        fault each (128 MiB into a fallocated file here: 0.06-0.18 s of CPU through the
        mapping, 0.04 s by pwrite, reading it back after included). The bytes must be backed, as for
        `write` (a full disk would be ENOSPC here, not SIGBUS, but ``backed`` must not lie)."""
        pos = self.wrote_position
        self.pwrite_parts(pos, [data])
        self.wrote_position = pos + len(data)
        return pos

    def pwrite_parts(self, pos: int, parts: Sequence[bytes | memoryview]) -> None:
        """Write ``parts`` one after the other from ``pos`` with one pwritev(2), moving no
        position: system calls only (the GIL released, so a worker thread may run it). The
        file is opened for the write: a mapping keeps no descriptor (bounded fds)."""
        fd = os.open(self.path, os.O_WRONLY)
        try:
            total = sum(len(p) for p in parts)
            done = os.pwritev(fd, parts, pos)
            if done < total:  # a regular file writes it all at once, unless interrupted
                rest = memoryview(b"".join(parts))
                while done < total:
                    done += os.pwrite(fd, rest[done:], pos + done)
        finally:
            os.close(fd)

    def write_at(self, pos: int, data: bytes | memoryview) -> None:
        self.mapped()[pos:pos + len(data)] = data

    def sync(self) -> None:
        """fdatasync the file (blocking: call from a worker thread): msync of its mapping,
        which needs no descriptor; a file whose budget unmapped it is opened for it."""
        mm = self.mm  # held: the mapping cannot go while it is synced
        if mm is not CLOSED:
            sync_mapping(mm)
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def zero_from(self, pos: int) -> None:
        """Zero the bytes from ``pos`` to the end, writing only the pages that hold non-zero
        bytes: those have blocks, while the unbacked tail of a file may not (a write there
        on a full disk would be SIGBUS). Holes are skipped without reading them (SEEK_DATA:
        a crash-truncated 1 GiB segment is mostly hole), and all-zero 1 MiB chunks of data
        in one compare."""
        end_of_file = self.file_size
        fd = os.open(self.path, os.O_RDONLY)
        try:
            while pos < end_of_file:
                try:
                    data = os.lseek(fd, pos, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno == errno.ENXIO:  # nothing but hole from pos on
                        return
                    raise
                if data >= end_of_file:
                    return
                hole = min(os.lseek(fd, data, os.SEEK_HOLE), end_of_file)
                self._zero_pages(data, hole)
                pos = hole
        finally:
            os.close(fd)

    def _zero_pages(self, pos: int, end: int) -> None:
        chunk = 1 << 20
        zeros = bytes(chunk)
        view = self.mapped()
        mm = self.mm
        while pos < end:
            stop = min(pos + chunk, end)
            if mm[pos:stop] != zeros[:stop - pos]:  # a bytes compare: far faster than a view's
                page = pos
                while page < stop:
                    page_end = min(page - page % PAGE + PAGE, stop)
                    if mm[page:page_end] != zeros[:page_end - page]:
                        view[page:page_end] = zeros[:page_end - page]
                    page = page_end
            pos = stop

    def close(self) -> None:
        """Drop the mapping. Slices still held by readers keep it alive until they are freed."""
        if self.budget is not None:
            self.budget.forget(self)
        view, self.view = self.view, _UNMAPPED
        if view is not _UNMAPPED:
            view.release()
        self.mm = CLOSED  # unmapped when the last reader's slice of it is freed (libc_map)

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
