"""CommitLog: the one append-only log every message of every topic is written to.

Appends happen on the event loop as memcpy into the mapped segment; a record that does not
fit ends its segment with a BLANK record and goes to the next one. Reads hand out
memoryview slices of the mapping (no copies). Recovery walks records from a known-good
offset, checks each, and truncates the torn or garbled tail. This module never decides
visibility or queue offsets: the message store does.

Segments are backed by disk blocks a window at a time (BACKING_WINDOW, see mapped_file):
a fresh store's first 1 GiB segment takes 64 MiB of disk, not 1 GiB. The segment
preparer's thread allocates the next window once the writer is within half a window of the
backed end; ``reserve`` compares against the backed end instead of the segment's end, so a
put pays one comparison for both, and backs the segment itself (DiskFull, before anything
is written) only when the thread fell behind or the disk is full.
"""

from __future__ import annotations

import time
from typing import Iterator

from ..errors import DiskFull, MessageTooLarge, StoreUnavailable
from .mapped_file import MappedFile
from .mapped_file_queue import MappedFileQueue
from .page_warmer import PageWarmer
from .record import (
    BLANK,
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    FIXED_SIZE,
    MESSAGE_MAGIC_CODE,
    SIZE_MAGIC,
    BadRecord,
    RecordInfo,
    parse_record_info,
)
from .segment_preparer import SegmentPreparer

BACKING_WINDOW = 64 << 20  # disk blocks a segment gets at first, and per extension


class CommitLog:
    def __init__(self, directory: str, file_size: int, *, warm: bool = True,
                 preparer: SegmentPreparer | None = None, window: int | None = None) -> None:
        self.window = min(file_size, window or BACKING_WINDOW)
        self.queue = MappedFileQueue(directory, file_size, self.window)
        self.file_size = file_size
        self.warmer = PageWarmer() if warm else None
        self._ahead_file: MappedFile | None = None
        self._ahead_next = 0
        # the next segment is made by the preparer once the current one is half full, so
        # a roll costs an open and a mapping, not a reservation and a first write (~8 ms)
        self.preparer = preparer
        self._next_prepared = -1

    # -- writing -----------------------------------------------------------------------
    def reserve(self, size: int) -> MappedFile:
        """The segment that has room for ``size`` bytes, padding the current one if not;
        [write position, + size) of it is backed by disk blocks (DiskFull, with nothing
        written, when the disk has no room for them)."""
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise MessageTooLarge(size, self.file_size - END_FILE_MIN_BLANK_LENGTH)
        files = self.queue.files
        if files:
            mf = files[-1]
            # backed <= file_size: one comparison says there is room and it has blocks
            if mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH <= mf.backed:
                if mf.wrote_position >= self._ahead_next or mf is not self._ahead_file:
                    self._work_ahead(mf)
                return mf
        try:
            mf = self.queue.last_for_write()
            end = mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH
            if end > self.file_size:
                mf.ensure_backed(mf.wrote_position + END_FILE_MIN_BLANK_LENGTH)  # the BLANK's
                next_file = self.queue.create_file(mf.end_offset)
                BLANK.pack_into(mf.view, mf.wrote_position, mf.remaining, BLANK_MAGIC_CODE)
                mf.wrote_position = self.file_size
                mf = next_file
                end = size + END_FILE_MIN_BLANK_LENGTH
            mf.ensure_backed(end)  # the fallback: the preparer's thread did not get there first
        except DiskFull:
            raise
        except OSError as exc:  # a full disk is DiskFull already (create_file); other
            # failures to make a segment refuse the put too, and the broker stays up
            raise StoreUnavailable(f"cannot create a commit log segment: {exc.strerror}") from exc
        self._work_ahead(mf)
        return mf

    def work_ahead(self, mf: MappedFile) -> None:
        """`_work_ahead` for a writer that does not go through `reserve` and copies its bytes
        in with ``MappedFile.write_through`` (a slave), after each write: the backing, the
        next segment and the warm pages ahead of it, as a put has them. Since the warmer
        populates small folios (core/store/page_warmer.py), the pwrite then copies into
        pages that exist: 358 MB in 1 MiB frames, fresh pages (in process, load 3-4) took
        0.87-0.93 s of CPU by pwrite alone (its own large folios, one host fault a page on
        this VM) and 0.34-0.46 s with the warmer (its thread's included), 2-3x faster."""
        if mf.wrote_position >= self._ahead_next or mf is not self._ahead_file:
            self._work_ahead(mf)

    def _work_ahead(self, mf: MappedFile) -> None:
        """Have the next window of this segment backed once the writer is within half a
        window of its backed end, warm the (backed) pages after the write position, and
        have the next segment made once this one is half full; sets where the writer
        calls again."""
        self._ahead_file = mf
        again = 1 << 62
        if self.preparer is not None:
            again = self.preparer.back_ahead(mf, mf.wrote_position)
            if self._next_prepared != mf.end_offset:
                if mf.wrote_position >= self.file_size // 2:
                    self._next_prepared = mf.end_offset
                    self.queue.prepare_next(self.preparer)
                else:
                    again = min(again, self.file_size // 2)
        if self.warmer is not None:
            again = min(again, self.warmer.advance(mf.mm, mf.wrote_position, mf.backed))
        self._ahead_next = again

    # -- reading -----------------------------------------------------------------------
    def slice(self, phys: int, size: int) -> memoryview | None:
        """Bytes [phys, phys+size) if they are written and inside one segment."""
        mf = self.queue.find(phys)
        if mf is None:
            return None
        pos = phys - mf.file_from_offset
        if pos < 0 or pos + size > mf.wrote_position:
            return None
        return mf.view[pos:pos + size]

    def written(self, phys: int, size: int) -> memoryview:
        """Bytes [phys, phys+size) that an index entry or a scan found written: a run of
        whole records in one segment, always there while the log holds it."""
        view = self.slice(phys, size)
        assert view is not None, (phys, size)
        return view

    def record_at(self, phys: int) -> memoryview | None:
        """The whole record starting at ``phys`` (None if there is none)."""
        mf = self.queue.find(phys)
        if mf is None:
            return None
        pos = phys - mf.file_from_offset
        if pos + 8 > mf.wrote_position:
            return None
        size, magic = SIZE_MAGIC.unpack_from(mf.view, pos)
        if magic != MESSAGE_MAGIC_CODE or size < FIXED_SIZE or pos + size > mf.wrote_position:
            return None
        return mf.view[pos:pos + size]

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    # -- recovery ----------------------------------------------------------------------
    def scan(self, start: int, check_crc: bool) -> "LogScan":
        """Records from ``start`` while they are valid; see LogScan."""
        return LogScan(self, start, check_crc)

    def truncate(self, valid_end: int) -> None:
        """Make ``valid_end`` the write position and zero whatever lies beyond it; then back
        a window after it (recovery runs before the loop serves: the first put does not pay
        it), unless the disk is full (the writer then tries, and refuses puts meanwhile)."""
        self.queue.set_write_offset(valid_end)
        last = self.queue.last
        if last is not None and last.wrote_position < last.file_size:
            last.zero_from(last.wrote_position)
            try:
                last.extend_backing(last.wrote_position, self.window)
            except (DiskFull, OSError):
                pass

    def close(self) -> None:
        if self.warmer is not None:
            self.warmer.stop()
        self.queue.close()


class LogScan:
    """Iterates (physical offset, record) from a record boundary while records are valid.

    After iteration, ``end`` is the offset just past the last valid record (the write
    position recovery keeps) and ``error`` says why the walk stopped, if not at clean data end.
    """

    def __init__(self, commitlog: CommitLog, start: int, check_crc: bool) -> None:
        self.commitlog = commitlog
        self.start = start
        self.check_crc = check_crc
        self.end = start
        self.error: str | None = None

    def __iter__(self) -> Iterator[tuple[int, RecordInfo]]:
        files = self.commitlog.queue.files
        mf = self.commitlog.queue.find(self.start)
        if mf is None:
            return
        idx = files.index(mf)
        pos = self.start - mf.file_from_offset
        check_crc = self.check_crc
        while True:
            view, size, base = mf.view, mf.file_size, mf.file_from_offset
            while pos + 8 <= size:
                total, magic = SIZE_MAGIC.unpack_from(view, pos)
                if magic == BLANK_MAGIC_CODE and total == size - pos:
                    break
                if total == 0 and magic == 0:
                    return
                try:
                    info = parse_record_info(view, pos, size, check_crc)
                except BadRecord as exc:
                    self.error = f"offset {base + pos}: {exc}"
                    return
                if info.physical_offset != base + pos:
                    self.error = f"offset {base + pos}: stale record (says {info.physical_offset})"
                    return
                yield base + pos, info
                pos += info.total_size
                self.end = base + pos
            # segment finished (blank or exact fit): continue in the next one
            idx += 1
            if idx >= len(files):
                self.end = mf.end_offset
                return
            self.end = mf.end_offset
            mf = files[idx]
            pos = 0


def now_ms() -> int:
    return time.time_ns() // 1_000_000
