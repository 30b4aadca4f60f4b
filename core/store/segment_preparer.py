"""SegmentPreparer: creates segment files before their first write needs them.

The first write to a fresh file costs milliseconds here (3-4 ms measured, whatever the
mapping or preallocation: the first page of a new file's page cache), and whichever
request writes first pays it on the event loop: for a new topic once per queue, and at
every CommitLog roll (with the reservation of a 1 GiB segment, 6-7 ms in all). A thread
pays it instead: the file is made under a temporary name at its full size with its first
window backed by disk blocks (see mapped_file), its first page written, then linked into
place. Used for a new topic's ConsumeQueues, and for the next segment of the CommitLog
and of each ConsumeQueue once the current one is half full (RocketMQ's
AllocateMappedFileService does it for the CommitLog).

Linking never replaces a file: if the writer created the segment itself in the meantime,
the prepared one is dropped. A crash leaves at most a temporary file, which MappedFileQueue
ignores and removes. A prepared segment nothing was written to is dropped when the store
opens (ConsumeQueue load and CommitLog recovery both drop segments past the written end),
or loads as the empty next one when the segment before it is exactly full.

The same thread extends the backing of the file being written ahead of its writer
(``back_ahead``, see mapped_file): once the write position is within half a window of the
backed end, the next window is allocated here, so that a put extends the backing itself
only when this thread fell behind or failed (a full disk: the writer's own attempt then
refuses the put with DiskFull).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from ..errors import StoreUnavailable
from .mapped_file import MappedFile, backing_end, reserve

log = logging.getLogger(__name__)

SUFFIX = ".prep"


def prepare_file(path: str, size: int, window: int | None = None, zero_fill: bool = False) -> bool:
    """Create ``path`` (``size`` bytes, [0, window) backed, first page resident) unless it
    exists; True if made. With ``zero_fill`` the window is written with zeros, which makes
    its pages resident (see mapped_file); else its first page is written through a map."""
    if os.path.exists(path):
        return False
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + SUFFIX
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        reserve(fd, tmp, size, backing_end(size, window), zero_fill)
        if not zero_fill:
            with mmap.mmap(fd, size) as mm:
                mm[0] = 0  # the costly first write, made here
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):  # removed by a racing topic deletion
            os.unlink(tmp)


def _remove_empty_dirs(directory: str, top: str) -> None:
    """Remove ``directory`` and its ancestors up to ``top`` while they are empty."""
    top = os.path.abspath(top)
    directory = os.path.abspath(directory)
    while directory == top or directory.startswith(top + os.sep):
        try:
            os.rmdir(directory)
        except OSError:  # not empty (someone else's now) or already gone
            return
        directory = os.path.dirname(directory)


class SegmentPreparer:
    """One worker thread; ``prepare`` only queues the job."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="segment-preparer")

    def prepare(self, path: str, size: int, wanted: Callable[[], bool] = lambda: True,
                owned_dir: str | None = None, window: int | None = None,
                zero_fill: bool = False) -> Future:
        """Prepare ``path`` in the background if ``wanted()`` still holds when its turn comes.

        If ``wanted()`` turns false meanwhile (its topic was deleted), the file is removed
        again, with the empty directories from its own up to ``owned_dir``: a deletion that
        raced the job (and maybe removed a half-made file under it) leaves nothing behind.
        """
        return self._pool.submit(self._run, path, size, wanted, owned_dir or os.path.dirname(path),
                                 window, zero_fill)

    @staticmethod
    def _run(path: str, size: int, wanted: Callable[[], bool], owned_dir: str,
             window: int | None = None, zero_fill: bool = False) -> bool:
        if not wanted():
            return False
        try:
            made = prepare_file(path, size, window, zero_fill)
        except OSError as exc:  # a full disk (the writer will create it and report it), or
            made = False        # a deletion that removed the directory under the job
            if wanted():
                log.warning("could not prepare segment %s: %s", path, exc)
        if wanted():
            return made
        if made:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        _remove_empty_dirs(os.path.dirname(path), owned_dir)
        return False

    def back_ahead(self, mf: MappedFile, position: int,
                   wanted: Callable[[], bool] = lambda: True) -> int:
        """Called by ``mf``'s writer (on the loop) at write position ``position``: once it is
        within half a window of the end backed or asked for, ask for the next window in the
        background. Returns the position at which to call again."""
        half = mf.window // 2
        asked = mf.backing_asked
        if asked < mf.backed:
            asked = mf.backed
        if asked >= mf.file_size:
            return 1 << 62
        if position + half >= asked:
            asked = min(mf.file_size, max(asked, position) + mf.window)
            mf.backing_asked = asked
            try:
                self._pool.submit(self._back, mf, asked, wanted)
            except RuntimeError:  # closed: the store is stopping, the writer backs itself
                mf.backing_asked = mf.backed
        return asked - half

    @staticmethod
    def _back(mf: MappedFile, end: int, wanted: Callable[[], bool]) -> None:
        if not wanted():
            return
        try:
            mf.extend_backing(end)
        except (OSError, StoreUnavailable) as exc:  # a full disk (DiskFull) or a file deleted
            mf.backing_asked = mf.backed  # under the job: the writer asks again or backs itself
            if wanted():
                log.info("could not extend %s ahead of its writer: %s", mf.path, exc)

    def barrier(self) -> Future:
        """Done once every preparation queued before it is (one worker, in order)."""
        return self._pool.submit(lambda: None)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
