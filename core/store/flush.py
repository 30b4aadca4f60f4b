"""Flush services: make CommitLog bytes durable off the event loop.

ASYNC_FLUSH: every flushIntervalCommitLog ms, fdatasync whatever was written.
SYNC_FLUSH (group commit): a put waits on a future that resolves once an fdatasync has
covered its end offset; a put nobody waits for (a STOMP SEND without a receipt) starts no
sync and is covered by the next one, or by the periodic flush within the interval. A sync
starts as soon as a put waits and none is in flight; puts that arrive while it runs append
on the loop meanwhile (fdatasync releases the GIL) and are all covered by the next one. So appends overlap the disk round trip, and 64 concurrent
putters share a few syncs instead of paying 64.
fdatasync always runs in a worker thread (the loop's default executor, so a host loop such
as trio-asyncio's works too); overlapping syncs are harmless: each only raises the durable
offset to what it covered. The loop only resolves futures.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Callable

from ..periodic import run_every
from .commitlog import CommitLog
from .mapped_file import MappedFile

log = logging.getLogger(__name__)


class FlushService:
    def __init__(self, commitlog: CommitLog, *, sync: bool, interval_ms: int,
                 on_flushed: Callable[[int], None]) -> None:
        self.commitlog = commitlog
        self.sync = sync
        self.interval = interval_ms / 1000
        self.on_flushed = on_flushed
        self.flushed_offset = commitlog.max_offset
        self.sync_count = 0
        self._waiters: deque[tuple[int, asyncio.Future]] = deque()
        self._in_flight: asyncio.Future | None = None
        self._stopping = asyncio.Event()

    # -- group commit ----------------------------------------------------------------------
    def wait_flushed(self, end_offset: int) -> asyncio.Future:
        """A future resolved when the log is durable up to ``end_offset`` (SYNC_FLUSH)."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((end_offset, fut))
        if self._in_flight is None:
            self._start_sync()
        return fut

    def _dirty(self) -> list[tuple[MappedFile, int]]:
        return [(mf, mf.wrote_position) for mf in self.commitlog.queue.files
                if mf.flushed_position < mf.wrote_position]

    def _start_sync(self) -> None:
        target = self.commitlog.max_offset
        dirty = self._dirty()
        self._in_flight = done = asyncio.get_running_loop().run_in_executor(
            None, _sync_files, [mf for mf, _ in dirty])
        done.add_done_callback(lambda f: self._sync_done(f, target, dirty))

    def _sync_done(self, result: asyncio.Future, target: int,
                   dirty: list[tuple[MappedFile, int]]) -> None:
        self._in_flight = None
        exc = result.exception()
        if exc is not None:
            log.error("commit log fdatasync failed: %s", exc)
            while self._waiters:
                _, fut = self._waiters.popleft()
                if not fut.done():
                    fut.set_exception(exc)
            return
        self._mark_flushed(target, dirty)
        if self._waiters:
            self._start_sync()

    def _mark_flushed(self, target: int, dirty: list[tuple[MappedFile, int]]) -> None:
        if dirty:
            self.sync_count += 1
        for mf, pos in dirty:
            if pos > mf.flushed_position:
                mf.flushed_position = pos
        if target > self.flushed_offset:
            self.flushed_offset = target
        self.on_flushed(self.flushed_offset)
        flushed = self.flushed_offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            _, fut = waiters.popleft()
            if not fut.done():
                fut.set_result(flushed)

    # -- periodic flush and shutdown ---------------------------------------------------------
    async def flush(self) -> int:
        """fdatasync everything written so far; returns the durable offset."""
        target = self.commitlog.max_offset
        dirty = self._dirty()
        if dirty:
            await asyncio.to_thread(_sync_files, [mf for mf, _ in dirty])
        self._mark_flushed(target, dirty)
        return self.flushed_offset

    async def run(self) -> None:
        """Flush every interval (under SYNC_FLUSH this covers puts nobody waits for: they
        were appended without asking for a sync), and once more when stopped."""
        try:
            await run_every(self.interval, self.flush, self._stopping, name="flushing the commit log",
                            survives=())
        finally:
            if self._in_flight is not None:
                await asyncio.wait([self._in_flight])
            await self.flush()

    def stop(self) -> None:
        self._stopping.set()


def _sync_files(files: list[MappedFile]) -> None:
    for mf in files:
        mf.sync()
