"""ConsumeQueue: the per topic/queue index of 20-byte entries pointing into the CommitLog.

    commitLogOffset i64 | size i32 | tagsCode i64

The logical (queue) offset of a message is the index of its entry. Entries of one inner
batch all point at the batch's CommitLog record; the record's queueOffset is the batch's
first logical offset, so an entry's position inside the batch is its offset minus that.
minOffset rises when old segments are deleted; maxOffset is the next offset to write.

Segments are backed by disk blocks BACKING_WINDOW at a time (see mapped_file): a new queue
takes 16 KiB of disk, not 6 MB (100,000 queues: 1.6 GB, not 25 GB at 256 KiB). ``ensure_room`` (before the record is written) compares
against the backed end and backs more itself only when the segment preparer's thread,
asked once the writer is within half a window of that end, has not.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from .libc_map import CLOSED
from .mapped_file import MappedFile, MappingBudget, creating
from .mapped_file_queue import MappedFileQueue
from .segment_preparer import SegmentPreparer

CQ_ENTRY = struct.Struct(">qiq")
CQ_ENTRY_SIZE = CQ_ENTRY.size  # 20
BACKING_WINDOW = 16 << 10  # disk blocks a segment gets at first, and per extension
# a segment written on doubles its extension step each time it asks for one, up to this: a
# busy queue (a Spark chunk is 10 KiB of entries) then extends a few times per segment, not
# every other put, while an idle queue keeps its 16 KiB
MAX_BACKING_WINDOW = 1 << 20
# puts a queue writes with pwrite(2) while its segment is not mapped, before it maps it: a
# first entry into each of 100,000 queues costs open, pwrite and close (~8 us here), not a
# mapping, its first-write fault and later its unmapping (~17 us, and budget churn); a
# queue written often is mapped (a put is then a memcpy)
UNMAPPED_PUTS = 8
# ConsumeQueue files mapped at once, all queues of the process together (the least recently
# used is unmapped beyond it): bounds mappings (vm.max_map_count) and idle queues' pages
MAPPINGS = MappingBudget(16384)


class ConsumeQueue:
    def __init__(self, root_dir: str, topic: str, queue_id: int, file_size: int,
                 preparer: SegmentPreparer | None = None, window: int | None = None,
                 written: set[ConsumeQueue] | None = None) -> None:
        """``written``: the set every put adds this queue to (its owner's flush takes the
        queues to sync from it, not from a pass over every queue)."""
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size - file_size % CQ_ENTRY_SIZE
        self.entries_per_file = self.file_size // CQ_ENTRY_SIZE
        self.directory = os.path.join(root_dir, topic, str(queue_id))
        self.queue = MappedFileQueue(self.directory, self.file_size,
                                     min(self.file_size, window or BACKING_WINDOW), MAPPINGS,
                                     zero_fill=True)
        self.min_logic_offset = 0  # in entries
        self.max_physical_end = 0  # commit-log offset just past the last indexed record
        # the next segment is made by the preparer once the last one is half written, so the
        # put that starts it does not pay a fresh file's first write (~4 ms) on the loop;
        # the next window of the last one is backed by it ahead of the writer
        self.preparer = preparer
        self._ahead_at = 0  # byte position at which a put calls _work_ahead
        self._prepared_after = -1  # the segment whose successor the preparer was asked for
        self._gone = False
        self._unmapped_puts = 0  # puts written with pwrite into an unmapped segment so far
        self.written = written
        # (max offset, last entry) and (min offset, its record's CommitLog offset) as read at
        # load: recovery asks both of every queue, and each ask would map the queue's file
        self._last: tuple[int, tuple[int, int, int]] | None = None
        self._first: tuple[int, int] | None = None

    # -- load / recover --------------------------------------------------------------------
    def load(self, expected_max: int | None = None) -> None:
        """Find the last written entry (a zero entry ends the data) with pread, mapping no
        segment: each is mapped on its first read or write (a store of 100,000 queues
        opens without 100,000 mappings). ``expected_max``, the queue's max offset in the
        checkpoint, is checked with one read (right after a clean shutdown) and is where
        the search starts from when the queue grew past it (a crash)."""
        self.queue.load(lazy=True)
        files = self.queue.files
        reader = _Preader()
        try:
            while files:  # an empty file (a crash while it was made) can only be the last
                size = reader.size(files[-1])
                if size == self.file_size:
                    break
                if size:
                    raise ValueError(f"{files[-1].path}: size {size} != configured segment size "
                                     f"{self.file_size}")
                reader.forget(files[-1])
                files.pop().destroy()
            if not files:
                return
            # every segment before the last is full; find the end inside the last non-empty one
            for i, f in enumerate(files):
                if f is not files[-1]:
                    guess = self.entries_per_file  # full
                elif expected_max is None:
                    guess = 0  # not in the checkpoint: a prepared file no put reached, mostly
                else:
                    guess = expected_max - f.file_from_offset // CQ_ENTRY_SIZE
                end = self._written_end(reader, f, guess)
                f.wrote_position = f.flushed_position = end
                f.assume_backed(end)  # written entries have blocks
                if end < f.file_size:
                    for later in files[i + 1:]:
                        reader.forget(later)
                        later.destroy()
                    del files[i + 1:]
                    break
            self.min_logic_offset = files[0].file_from_offset // CQ_ENTRY_SIZE
            end = self.max_offset
            if end > self.min_offset:
                self._last = (end, self._read_entry(reader, end - 1))
                self.max_physical_end = self._last[1][0] + abs(self._last[1][1])
                self._first = (self.min_offset, self._read_entry(reader, self.min_offset)[0])
        finally:
            reader.close()

    def _read_entry(self, reader: "_Preader", offset: int) -> tuple[int, int, int]:
        pos = offset * CQ_ENTRY_SIZE
        f = self.queue.find(pos)
        assert f is not None  # an offset between min and max offset
        return CQ_ENTRY.unpack(reader.read(f, pos - f.file_from_offset, CQ_ENTRY_SIZE))

    def _written_end(self, reader: "_Preader", f, at: int) -> int:
        """Byte position of the first all-zero entry of ``f`` (entries are written in
        order): ``at`` entries if the entries either side say so (one read), else found
        by binary search on the side of ``at`` they point to."""
        lo, hi = 0, self.entries_per_file
        if 0 <= at <= hi:
            first = max(at - 1, 0)
            data = reader.read(f, first * CQ_ENTRY_SIZE, (min(at + 1, hi) - first) * CQ_ENTRY_SIZE)
            if at and CQ_ENTRY.unpack_from(data)[1] == 0:
                hi = at - 1
            elif at == hi or CQ_ENTRY.unpack_from(data, len(data) - CQ_ENTRY_SIZE)[1] == 0:
                return at * CQ_ENTRY_SIZE
            else:
                lo = at + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if CQ_ENTRY.unpack(reader.read(f, mid * CQ_ENTRY_SIZE, CQ_ENTRY_SIZE))[1] != 0:
                lo = mid + 1
            else:
                hi = mid
        return lo * CQ_ENTRY_SIZE

    # -- offsets -------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        return self.queue.max_offset // CQ_ENTRY_SIZE

    @property
    def min_offset(self) -> int:
        return max(self.min_logic_offset, self.queue.min_offset // CQ_ENTRY_SIZE)

    def bounds(self) -> tuple[int, int]:
        """(min_offset, max_offset) in one call: a scrape reads them for every queue."""
        files = self.queue.files
        if not files:
            return max(self.min_logic_offset, 0), 0
        last = files[-1]
        low = files[0].file_from_offset // CQ_ENTRY_SIZE
        return (low if low > self.min_logic_offset else self.min_logic_offset,
                (last.file_from_offset + last.wrote_position) // CQ_ENTRY_SIZE)

    # -- write -----------------------------------------------------------------------------
    def ensure_room(self, queue_offset: int, count: int) -> None:
        """Make sure the segments ``count`` entries from ``queue_offset`` go to exist on disk.

        The store calls it before it writes their record to the CommitLog: when the disk is
        full, the put is then refused (DiskFull) with nothing written, instead of leaving a
        stored record whose entry could not be written (a hole in the queue, and a put that
        failed after its record was appended). A comparison when the last mapped segment has
        room; else the missing segments are made (normally the preparer has made them, and
        this finds them there), and `put` maps them when it gets there; a queue's first
        segment is mapped here.
        """
        files = self.queue.files
        end = (queue_offset + count) * CQ_ENTRY_SIZE
        if files:
            last = files[-1]
            if end <= last.file_from_offset + last.backed:  # backed <= the segment's size
                return
            with creating(self.directory):  # EMFILE & co: refused, retriable
                last.ensure_backed(min(end - last.file_from_offset, self.file_size))
            start = last.end_offset
        else:  # the queue's first segment is opened here (not mapped: see put)
            pos = queue_offset * CQ_ENTRY_SIZE
            first = self.queue.create_file(pos - pos % self.file_size, lazy=True)
            self.min_logic_offset = self.queue.min_offset // CQ_ENTRY_SIZE
            with creating(self.directory):
                first.ensure_backed(min(end - first.file_from_offset, self.file_size))
            start = first.end_offset
        for segment in range(start, end, self.file_size):
            self.queue.make_file(segment, end - segment)

    def put(self, queue_offset: int, entries: bytes, physical_end: int) -> None:
        """Write pre-packed entries starting at ``queue_offset``; ``physical_end`` is the
        commit-log offset just past their record(s).

        Writing at an offset below the max (re-dispatch during recovery) overwrites with
        identical bytes; callers dispatch in order, so there are no gaps.
        """
        pos = queue_offset * CQ_ENTRY_SIZE
        if self.written is not None:
            self.written.add(self)
        files = self.queue.files
        if files:  # the common case: append inside the last segment
            mf = files[-1]
            w = mf.wrote_position
            n = len(entries)
            if mf.file_from_offset + w == pos and w + n <= mf.backed:  # backed <= file_size
                if mf.mm is CLOSED and self._unmapped_puts < UNMAPPED_PUTS and _wrote_through(mf, entries):
                    self._unmapped_puts += 1
                else:
                    mf.mapped()[w:w + n] = entries
                    mf.wrote_position = w + n
                if physical_end > self.max_physical_end:
                    self.max_physical_end = physical_end
                if pos + n >= self._ahead_at:
                    self._work_ahead(mf)
                return
        if not self.queue.files:
            self.queue.create_file(pos - pos % self.file_size)
            self.min_logic_offset = self.queue.min_offset // CQ_ENTRY_SIZE
        view = memoryview(entries)
        done = 0
        total = len(entries)
        while done < total:
            found = self.queue.find(pos)
            if found is None:
                last = self.queue.last
                assert last is not None  # a file was created above if there was none
                found = self.queue.create_file(last.end_offset)
            mf = found
            rel = pos - mf.file_from_offset
            n = min(total - done, mf.file_size - rel)
            mf.ensure_backed(rel + n)  # done by ensure_room before the record: a no-op here
            mf.write_at(rel, view[done:done + n])
            if rel + n > mf.wrote_position:
                mf.wrote_position = rel + n
            done += n
            pos += n
        if physical_end > self.max_physical_end:
            self.max_physical_end = physical_end

    # -- read ----------------------------------------------------------------------------
    def entries(self, offset: int, max_count: int) -> memoryview:
        """Up to ``max_count`` entries from ``offset``, from one segment (may be fewer)."""
        pos = offset * CQ_ENTRY_SIZE
        mf = self.queue.find(pos)
        if mf is None:
            return memoryview(b"")
        rel = pos - mf.file_from_offset
        end = min(mf.wrote_position, rel + max_count * CQ_ENTRY_SIZE)
        if end <= rel:
            return memoryview(b"")
        return mf.mapped()[rel:end]

    def entry(self, offset: int) -> tuple[int, int, int] | None:
        data = self.entries(offset, 1)
        return CQ_ENTRY.unpack_from(data) if len(data) == CQ_ENTRY_SIZE else None

    def _entry_within(self, offset: int) -> tuple[int, int, int]:
        """The entry at an offset between min and max offset, which is always there."""
        entry = self.entry(offset)
        assert entry is not None
        return entry

    def last_entry(self) -> tuple[int, int, int] | None:
        end = self.max_offset
        if end <= self.min_offset:
            return None
        known = self._last  # an entry below the max changes only by a truncation, which drops this
        if known is not None and known[0] == end:
            return known[1]
        entry = self._entry_within(end - 1)
        self._last = (end, entry)
        return entry

    def offset_at_physical(self, phys: int) -> int:
        """The first queue offset whose record starts at or after CommitLog offset ``phys``
        (max offset when none): where a log position falls in this queue (Kafka's end offset
        of a leader epoch, core/facade/consume.py)."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry_within(mid)[0] < phys:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- truncation and retention --------------------------------------------------------------
    def truncate_to_physical(self, phys_end: int) -> None:
        """Drop entries whose record does not end at or before ``phys_end`` (a torn log tail)."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:  # first entry that points past phys_end
            mid = (lo + hi) // 2
            off, size, _ = self._entry_within(mid)
            if off + abs(size) <= phys_end:
                lo = mid + 1
            else:
                hi = mid
        self.truncate_to_offset(lo)

    def truncate_to_offset(self, offset: int) -> None:
        if offset >= self.max_offset:
            return
        self._last = self._first = None
        pos = offset * CQ_ENTRY_SIZE
        self.queue.set_write_offset(pos)
        last = self.queue.last
        if last is not None:
            last.zero_from(last.wrote_position)
        entry = self.last_entry()
        self.max_physical_end = entry[0] + abs(entry[1]) if entry else 0

    def correct_min_offset(self, commit_log_min: int) -> None:
        """Raise minOffset to the first entry whose record still exists."""
        lo, hi = self.min_offset, self.max_offset
        first, self._first = self._first, None  # read at load: valid for recovery's one call
        if first is not None and first[0] == lo and first[1] >= commit_log_min:
            self.min_logic_offset = lo
            return
        while lo < hi:
            mid = (lo + hi) // 2
            off, _, _ = self._entry_within(mid)
            if off < commit_log_min:
                lo = mid + 1
            else:
                hi = mid
        self.min_logic_offset = lo

    def delete_expired(self, commit_log_min: int) -> int:
        """Delete whole segments whose every entry points before ``commit_log_min``."""
        files = self.queue.files
        n = 0
        for f in files[:-1]:
            last_off, _, _ = CQ_ENTRY.unpack_from(f.mapped(), f.file_size - CQ_ENTRY_SIZE)
            if last_off >= commit_log_min:
                break
            n += 1
        if n:
            self.queue.delete_first(n)
        self.correct_min_offset(commit_log_min)
        return n

    def _work_ahead(self, mf) -> None:
        """Ask the preparer for the next window of ``mf`` (the last segment) when the
        writer is near its backed end, and for the next segment once ``mf`` is half
        written; sets the position at which a put calls again."""
        at = 1 << 62
        if self.preparer is not None:
            base, w = mf.file_from_offset, mf.wrote_position
            asked = mf.backing_asked
            at = base + self.preparer.back_ahead(mf, w, self._wanted)
            if mf.backing_asked != asked:  # a window asked for: the next one twice as large
                mf.window = min(MAX_BACKING_WINDOW, mf.window * 2)
            if self._prepared_after != base:
                if w >= self.file_size // 2:
                    self._prepared_after = base
                    self.prepare_next()
                else:
                    at = min(at, base + self.file_size // 2)
        self._ahead_at = at

    def _wanted(self) -> bool:
        return not self._gone

    @property
    def gone(self) -> bool:
        """Destroyed: its topic deleted, or rebuilt by recovery."""
        return self._gone

    def prepare_next(self, wanted: Callable[[], bool] | None = None) -> None:
        """Have the segment after the last one (the first, if none) made in the background,
        unless the queue is destroyed first (or ``wanted()`` turns false)."""
        if self.preparer is not None:
            self.queue.prepare_next(self.preparer, wanted or self._wanted,
                                    owned_dir=os.path.dirname(self.directory))  # the topic's

    def destroy(self) -> None:
        self._gone = True
        self.queue.destroy()
        try:
            os.rmdir(os.path.dirname(self.directory))
        except OSError:
            pass

    def close(self) -> None:
        self.queue.close()


def _wrote_through(mf: MappedFile, entries: bytes) -> bool:
    """Append ``entries`` (backed bytes) to ``mf`` with pwrite; False if the write failed
    (nothing moved: the caller writes them through the mapping, as it would have)."""
    try:
        mf.write_through(entries)
    except OSError:
        return False
    return True


class _Preader:
    """Reads of unmapped segments by pread, one descriptor per segment while a load lasts
    (a mapped segment is read through its mapping)."""

    __slots__ = ("fds",)

    def __init__(self) -> None:
        self.fds: dict[MappedFile, int] = {}

    def _fd(self, f: MappedFile) -> int:
        fd = self.fds.get(f)
        if fd is None:
            with creating(f.path):  # EMFILE & co: StoreUnavailable
                fd = self.fds[f] = os.open(f.path, os.O_RDONLY)
        return fd

    def size(self, f: MappedFile) -> int:
        return os.fstat(self._fd(f)).st_size

    def read(self, f: MappedFile, pos: int, n: int) -> bytes:
        if f.mm is not CLOSED:
            return bytes(f.view[pos:pos + n])
        data = os.pread(self._fd(f), n, pos)
        if len(data) != n:
            raise ValueError(f"{f.path}: short read at {pos}")
        return data

    def forget(self, f: MappedFile) -> None:
        fd = self.fds.pop(f, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
