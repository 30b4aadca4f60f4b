"""Flush services: make CommitLog bytes durable off the event loop.

ASYNC_FLUSH: every flushIntervalCommitLog ms, fdatasync whatever was written.
SYNC_FLUSH (group commit): a put waits on a future that resolves once an fdatasync has
covered its end offset; one fdatasync covers every put that arrived before it started, so
64 concurrent putters share one disk round trip instead of paying 64.
fdatasync always runs in a worker thread; the loop only resolves futures.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Callable

from .commitlog import CommitLog

log = logging.getLogger(__name__)


class FlushService:
    def __init__(self, commitlog: CommitLog, *, sync: bool, interval_ms: int,
                 on_flushed: Callable[[int], None]) -> None:
        self.commitlog = commitlog
        self.sync = sync
        self.interval = interval_ms / 1000
        self.on_flushed = on_flushed
        self.flushed_offset = commitlog.max_offset
        self._waiters: deque[tuple[int, asyncio.Future]] = deque()
        self._wakeup = asyncio.Event()
        self._stopping = False
        self.sync_count = 0

    def wait_flushed(self, end_offset: int) -> asyncio.Future:
        """A future resolved when the log is durable up to ``end_offset`` (SYNC_FLUSH)."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((end_offset, fut))
        self._wakeup.set()
        return fut

    async def flush(self) -> int:
        """fdatasync everything written so far; returns the durable offset."""
        target = self.commitlog.max_offset
        dirty = [(mf, mf.wrote_position) for mf in self.commitlog.queue.files
                 if mf.flushed_position < mf.wrote_position]
        if dirty:
            await asyncio.to_thread(_sync_files, [mf for mf, _ in dirty])
            self.sync_count += 1
            for mf, pos in dirty:
                if pos > mf.flushed_position:
                    mf.flushed_position = pos
        if target > self.flushed_offset:
            self.flushed_offset = target
        self.on_flushed(self.flushed_offset)
        return self.flushed_offset

    async def run(self) -> None:
        try:
            if self.sync:
                await self._run_group_commit()
            else:
                await self._run_periodic()
        finally:
            await self.flush()
            self._release_waiters()

    def stop(self) -> None:
        self._stopping = True
        self._wakeup.set()

    async def _run_periodic(self) -> None:
        while not self._stopping:
            try:
                await asyncio.wait_for(self._wakeup.wait(), self.interval)
            except asyncio.TimeoutError:
                pass
            self._wakeup.clear()
            await self.flush()

    async def _run_group_commit(self) -> None:
        while not self._stopping:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._waiters:
                try:
                    await self.flush()
                except OSError as exc:
                    log.error("commit log fdatasync failed: %s", exc)
                    self._fail_waiters(exc)
                    break
                self._release_waiters()

    def _release_waiters(self) -> None:
        flushed = self.flushed_offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            _, fut = waiters.popleft()
            if not fut.done():
                fut.set_result(flushed)

    def _fail_waiters(self, exc: BaseException) -> None:
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(exc)


def _sync_files(files) -> None:
    for mf in files:
        mf.sync()
