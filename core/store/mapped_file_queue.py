"""MappedFileQueue: the ordered segments of one logical log, addressed by logical offset.

``window`` is how much of each new segment is backed by disk blocks at first, and the step
its backing grows by (see mapped_file); None backs whole segments. ``zero_fill``: backing
is written zeros, not fallocate (ConsumeQueues, see mapped_file)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future

from .mapped_file import MappedFile, MappingBudget, creating, drop_if_empty, make_file, segment_name
from .segment_preparer import SUFFIX as PREPARING_SUFFIX
from .segment_preparer import SegmentPreparer


class MappedFileQueue:
    def __init__(self, directory: str, file_size: int, window: int | None = None,
                 budget: MappingBudget | None = None, zero_fill: bool = False) -> None:
        self.directory = directory
        self.zero_fill = zero_fill
        self.budget = budget  # mappings dropped while idle (ConsumeQueues), see MappingBudget
        self.file_size = file_size
        self.window = window
        self.files: list[MappedFile] = []

    def load(self, lazy: bool = False) -> None:
        """Map every existing segment; positions are set later by recovery. ``lazy``: map
        none (see MappedFile), and leave an empty file (a crash while it was made) to the
        owner, which looks at the last segment only (an empty file can only be the last)."""
        try:
            listing = os.listdir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return
        for stale in (n for n in listing if n.endswith(PREPARING_SUFFIX)):  # a crash mid-preparation
            os.unlink(os.path.join(self.directory, stale))
        names = sorted(n for n in listing if len(n) == 20 and n.isdigit())
        for name in names:
            path = os.path.join(self.directory, name)
            if lazy or not drop_if_empty(path):
                self.files.append(MappedFile(path, self.file_size, create=False, window=self.window,
                                             budget=self.budget, zero_fill=self.zero_fill, lazy=lazy))
        for prev, nxt in zip(self.files, self.files[1:]):
            if prev.end_offset != nxt.file_from_offset:
                raise ValueError(f"{self.directory}: segments are not contiguous at "
                                 f"{segment_name(prev.end_offset)}")
        for f in self.files:
            f.wrote_position = f.flushed_position = f.file_size

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def path_of(self, start_offset: int) -> str:
        return os.path.join(self.directory, segment_name(start_offset))

    def create_file(self, start_offset: int, lazy: bool = False) -> MappedFile:
        """Map segment ``start_offset`` as the new last one, creating it if needed;
        DiskFull (nothing created) when the disk has no room for it. ``lazy``: mapped on
        first use (see MappedFile)."""
        path = self.path_of(start_offset)
        with creating(path):
            try:
                mf = MappedFile(path, self.file_size, create=True, window=self.window, budget=self.budget,
                                zero_fill=self.zero_fill, lazy=lazy)
            except FileNotFoundError:  # the directory first (not a mkdir each time: ~0.4 ms)
                os.makedirs(self.directory, exist_ok=True)
                mf = MappedFile(path, self.file_size, create=True, window=self.window, budget=self.budget,
                                zero_fill=self.zero_fill, lazy=lazy)
        self.files.append(mf)
        return mf

    def make_file(self, start_offset: int, need: int = 0) -> None:
        """Create segment ``start_offset`` on disk without mapping it, with at least [0,
        need) of it backed (see make_file)."""
        make_file(self.path_of(start_offset), self.file_size, self.window, need, self.zero_fill)

    def prepare_next(self, preparer: SegmentPreparer, wanted: Callable[[], bool] = lambda: True,
                     owned_dir: str | None = None) -> Future:
        """Have the segment after the last one (the first, if none) made in the background,
        so that create_file finds it made (see SegmentPreparer.prepare)."""
        last = self.last
        return preparer.prepare(self.path_of(last.end_offset if last else 0), self.file_size,
                                wanted, owned_dir, self.window, self.zero_fill)

    def last_for_write(self, start_offset: int = 0) -> MappedFile:
        """The segment to append to, creating the first or the next one when needed."""
        last = self.last
        if last is None:
            start = start_offset - start_offset % self.file_size
            return self.create_file(start)
        if last.wrote_position >= self.file_size:
            return self.create_file(last.end_offset)
        return last

    def find(self, offset: int) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first = files[0].file_from_offset
        idx = (offset - first) // self.file_size
        if 0 <= idx < len(files):
            return files[idx]
        return None

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        last = self.last
        return last.file_from_offset + last.wrote_position if last else 0

    @property
    def flushed_offset(self) -> int:
        for f in reversed(self.files):
            if f.flushed_position:
                return f.file_from_offset + f.flushed_position
        return self.min_offset

    def set_write_offset(self, offset: int) -> None:
        """Truncate logically at ``offset``: later segments are deleted, positions reset.
        The bytes of the segment ``offset`` falls in before it were written, so they have
        blocks (see MappedFile.backed); the segments before it are finished."""
        keep: list[MappedFile] = []
        for f in self.files:
            if f.file_from_offset < offset or (not keep and f.file_from_offset == offset):
                pos = min(offset - f.file_from_offset, f.file_size)
                f.wrote_position = pos
                f.flushed_position = min(f.flushed_position, pos)
                if pos < f.file_size:
                    f.assume_backed(pos)
                keep.append(f)
            else:
                f.destroy()
        self.files = keep

    def delete_first(self, count: int) -> list[MappedFile]:
        gone, self.files = self.files[:count], self.files[count:]
        for f in gone:
            f.destroy()
        return gone

    def destroy(self) -> None:
        for f in self.files:
            f.destroy()
        self.files = []
        try:
            os.rmdir(self.directory)
        except OSError:
            pass

    def close(self) -> None:
        for f in self.files:
            f.close()
