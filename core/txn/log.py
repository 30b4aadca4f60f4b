"""The coordinator log: every transaction state change as one appended JSON line.

Each line is the whole state of one transactional id after a change (``{"id": ...}``), or
the allocator's next producer id, so replaying keeps the last line per id; lines also carry
the aborted ranges a completed abort produced, which accumulate. An append is one copy into
the file through a shared memory map, as the CommitLog's mapped files are written: it
survives a SIGKILL of the broker at once (the page cache holds it) and costs no system call
(a ``write`` of an O_APPEND file cost 15-20 µs of CPU here, three a transaction). The file
is kept longer than its lines, zeros after them (doubled when a line does not fit); replay
stops at the first zero. Under SYNC_FLUSH the coordinator also awaits `flushed` (an fsync
in a worker thread, so the event loop never waits on the disk) before it answers or acts on
the change. When the log has grown past ``compact_after`` lines it is rewritten atomically
as a snapshot (one line per id, one of all aborted ranges still needed). A torn last line
(a crash mid-copy) is ignored, and the next line starts after it.
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import os
from collections.abc import Iterable
from typing import Any, Final

import orjson

from ..store.checkpoint import write_atomically

log = logging.getLogger(__name__)

_encode = orjson.dumps  # compact UTF-8 JSON, as bytes
_INITIAL_SIZE: Final = 1 << 20  # the mapped length of a new or rewritten log


def _back(fd: int, size: int) -> None:
    """Size the file and give every page a disk block first: a copy into a mapped page
    without one would need it at fault time, and on a full disk that is SIGBUS, which kills
    the broker; here it is an OSError (ENOSPC) the append reports."""
    os.posix_fallocate(fd, 0, size)


def _lines_end(data: bytes | mmap.mmap) -> int:
    """Where the lines end: the first zero byte, or the end (a file written whole has none)."""
    end = data.find(b"\0")
    return len(data) if end < 0 else end


class CoordinatorLog:
    def __init__(self, path: str, *, sync: bool, compact_after: int = 20_000) -> None:
        self.path = path
        self.sync = sync
        self.compact_after = compact_after
        self.lines = 0
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._pos = 0  # where the next line goes

    def replay(self) -> list[dict[str, Any]]:
        """Every record, in order (a torn or unreadable line is skipped with a warning)."""
        records: list[dict[str, Any]] = []
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return records
        for n, line in enumerate(data[:_lines_end(data)].split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                records.append(orjson.loads(line))
            except ValueError:
                log.warning("%s: line %d is unreadable (a write cut short); skipped", self.path, n)
        self.lines = len(records)
        return records

    def open(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        if size < _INITIAL_SIZE:
            _back(self._fd, _INITIAL_SIZE)
            size = _INITIAL_SIZE
        self._map = mmap.mmap(self._fd, size)
        self._pos = _lines_end(self._map)
        if self._pos and self._map[self._pos - 1] != 0x0A:  # a torn last line: end it
            self._put(b"\n")

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def append(self, record: dict[str, Any]) -> None:
        if self._map is None:
            self.open()
        self._put(_encode(record) + b"\n")
        self.lines += 1

    def _put(self, data: bytes) -> None:
        end = self._pos + len(data)
        mapped = self._map
        assert mapped is not None  # append opens the log first
        if end > len(mapped):
            mapped = self._grow(mapped, end)
        mapped[self._pos:end] = data
        self._pos = end

    def _grow(self, mapped: mmap.mmap, needed: int) -> mmap.mmap:
        size = len(mapped)
        while size < needed:
            size *= 2
        fd = self._fd
        assert fd is not None
        _back(fd, size)  # before the old map goes: a full disk leaves the log as it was
        mapped.close()
        self._map = mmap.mmap(fd, size)
        return self._map

    async def flushed(self) -> None:
        """Under SYNC_FLUSH, once what was appended is on disk (fsync in a worker thread: it
        writes the mapped pages back too)."""
        fd = self._fd
        if not self.sync or fd is None:
            return
        try:
            await asyncio.to_thread(os.fsync, fd)
        except OSError:  # closed meanwhile by a rewrite, whose snapshot was fsynced itself
            if fd == self._fd:
                raise

    @property
    def wants_compaction(self) -> bool:
        return self.lines > self.compact_after

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the log by ``records`` (a snapshot), atomically."""
        lines = [_encode(r) for r in records]
        self.close()
        write_atomically(self.path, b"\n".join(lines) + b"\n" if lines else b"")
        self.lines = len(lines)
        self.open()
