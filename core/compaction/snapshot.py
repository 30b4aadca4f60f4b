"""One queue's compacted log: an immutable file of CommitLog-format records, and reads from it.

A snapshot holds every record a compaction kept for logical offsets [start, end) of one queue:
plain records as the CommitLog stored them, inner batches (Kafka record batches) either as
stored or rewritten with only their kept records, each record keeping its original offset
(a batch its base offset and offset deltas). Reads return the same `Segment` shapes as the
store's, so every reader of a `GetResult` (the Kafka fetch, decoded messages) serves them
unchanged; a read at an offset that compaction removed starts at the next kept one.

Files are ``<end, 20 digits>.clog`` under ``compaction/<topic>/<queueId>/``, written under a
``.tmp`` name, fsynced and renamed: a snapshot is either whole or absent, so a crash in the
middle of a compaction leaves the previous snapshot (and the CommitLog, which still holds
everything past its end) as they were. Never writes a file it has not named ``.tmp``.
"""

from __future__ import annotations

import mmap
import os
import struct
from array import array
from bisect import bisect_left
from typing import Final

from ..store.get_result import Segment
from ..store.record import I32, I64, MESSAGE_MAGIC_CODE, POS_QUEUE_OFFSET, POS_SYS_FLAG, is_inner_batch
from ..store.record import HEADER_SIZE as RECORD_HEADER_SIZE

FILE_HEADER: Final = struct.Struct(">4sIqqq")  # magic, version, start and end offsets, messages
MAGIC: Final = b"RPCL"
VERSION: Final = 1
SUFFIX: Final = ".clog"
TMP_SUFFIX: Final = ".tmp"
_LAST_OFFSET_DELTA: Final = 23  # inside a Kafka record batch


def record_span(record: bytes | memoryview, pos: int = 0) -> tuple[int, int, bool]:
    """(first, last) logical offsets of the CommitLog record at ``pos`` and whether it is an
    inner batch (its last offset from the batch's lastOffsetDelta)."""
    (first,) = I64.unpack_from(record, pos + POS_QUEUE_OFFSET)
    (sys_flag,) = I32.unpack_from(record, pos + POS_SYS_FLAG)
    if not is_inner_batch(sys_flag):
        return first, first, False
    (delta,) = I32.unpack_from(record, pos + RECORD_HEADER_SIZE + _LAST_OFFSET_DELTA)
    return first, first + delta, True


class SnapshotIndex:
    """Per record of a snapshot: first and last offset, position and size, batch or not."""

    __slots__ = ("firsts", "lasts", "positions", "sizes", "batches")

    def __init__(self) -> None:
        self.firsts, self.lasts, self.positions = array("q"), array("q"), array("q")
        self.sizes, self.batches = array("i"), array("b")

    def add(self, first: int, last: int, pos: int, size: int, batch: bool) -> None:
        self.firsts.append(first)
        self.lasts.append(last)
        self.positions.append(pos)
        self.sizes.append(size)
        self.batches.append(batch)

    def __len__(self) -> int:
        return len(self.firsts)


class CompactedSnapshot:
    """A loaded snapshot (memory-mapped; replaced, never changed)."""

    def __init__(self, path: str, start: int, end: int, messages: int, index: SnapshotIndex) -> None:
        self.path, self.start, self.end, self.index = path, start, end, index
        self.messages = messages
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        self.view = memoryview(self._map)
        self.size = size
        self.records = len(index)

    @classmethod
    def load(cls, path: str) -> "CompactedSnapshot":
        """Open a snapshot written by `SnapshotWriter` (ValueError when it is not one)."""
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < FILE_HEADER.size:
            raise ValueError(f"{path}: shorter than its header")
        magic, version, start, end, messages = FILE_HEADER.unpack_from(data, 0)
        if magic != MAGIC or version != VERSION:
            raise ValueError(f"{path}: not a compacted log (magic {magic!r}, version {version})")
        index = SnapshotIndex()
        pos = FILE_HEADER.size
        while pos < len(data):
            size, magic_code = struct.unpack_from(">ii", data, pos)
            if magic_code != MESSAGE_MAGIC_CODE or size <= 0 or pos + size > len(data):
                raise ValueError(f"{path}: bad record at {pos}")
            first, last, batch = record_span(data, pos)
            index.add(first, last, pos, size, batch)
            pos += size
        return cls(path, start, end, messages, index)

    def read(self, offset: int, max_count: int, max_bytes: int | None) -> tuple[list[Segment], int, int, int]:
        """(segments, next offset, message count, bytes) from the first kept offset at or
        after ``offset``; at least one record when there is one, then up to the limits."""
        index, view = self.index, self.view
        i = bisect_left(index.lasts, offset)
        n = len(index)
        segments: list[Segment] = []
        count = total = 0
        limit = (1 << 62) if max_bytes is None else max_bytes
        next_offset = self.end
        while i < n:
            size = index.sizes[i]
            if segments and (count >= max_count or total + size > limit):
                next_offset = index.firsts[i] if offset <= index.firsts[i] else offset
                break
            pos, first, last = index.positions[i], index.firsts[i], index.lasts[i]
            record = view[pos:pos + size]
            if index.batches[i]:
                seg_first = max(first, offset)
                segments.append(Segment(record, seg_first, last - seg_first + 1, first))
                count += last - seg_first + 1
            else:
                segments.append(Segment(record, first, 1))
                count += 1
            total += size
            i += 1
        return segments, next_offset, count, total

    def close(self) -> None:
        try:
            self.view.release()
            self._map.close()
        except BufferError:  # a read's segments still point into it: the mapping goes with them
            pass


class SnapshotWriter:
    """Writes one new snapshot under a ``.tmp`` name; `finish` makes it the queue's."""

    def __init__(self, directory: str, start: int) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory, self.start = directory, start
        self.tmp_path = os.path.join(directory, f"compacting{TMP_SUFFIX}")
        self._file = open(self.tmp_path, "wb")
        self._file.write(FILE_HEADER.pack(MAGIC, VERSION, start, 0, 0))
        self.messages = 0
        self._pos = FILE_HEADER.size
        self.index = SnapshotIndex()

    def append(self, record: bytes | memoryview, first: int, last: int, batch: bool, messages: int) -> None:
        self._file.write(record)
        self.messages += messages
        self.index.add(first, last, self._pos, len(record), batch)
        self._pos += len(record)

    def finish(self, end: int) -> CompactedSnapshot:
        """Durably make this the snapshot of [start, end): fsync, rename, fsync the directory."""
        f = self._file
        f.seek(0)
        f.write(FILE_HEADER.pack(MAGIC, VERSION, self.start, end, self.messages))
        f.flush()
        os.fsync(f.fileno())
        f.close()
        path = os.path.join(self.directory, f"{end:020d}{SUFFIX}")
        os.replace(self.tmp_path, path)
        fsync_directory(self.directory)
        return CompactedSnapshot(path, self.start, end, self.messages, self.index)

    def abandon(self) -> None:
        self._file.close()
        try:
            os.unlink(self.tmp_path)
        except FileNotFoundError:
            pass


def fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def latest_snapshot(directory: str) -> CompactedSnapshot | None:
    """The queue's newest whole snapshot; leftovers of a killed compaction (``.tmp``) and
    snapshots it replaced are removed."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return None
    done = sorted(n for n in names if n.endswith(SUFFIX))
    for name in names:
        if name.endswith(TMP_SUFFIX) or (name.endswith(SUFFIX) and name != done[-1]):
            os.unlink(os.path.join(directory, name))
    return CompactedSnapshot.load(os.path.join(directory, done[-1])) if done else None
