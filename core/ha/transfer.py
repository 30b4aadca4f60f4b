"""SYNC_MASTER's wait (RocketMQ's GroupTransferService): a put is answered once a slave
acknowledged an offset at or past its end.

`wait` hands out a future per put: resolved when `acknowledged` reports a slave's offset
covering it, failed with FlushSlaveTimeout after syncFlushTimeout, or failed at once with
SlaveNotAvailable when no slave is in sync (none connected, or one further behind than
haSlaveFallbehindMax). The put itself is stored either way: the errors carry its result.
Deadlines are checked by one sweeping task, not a timer per put.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from typing import Callable

from ..errors import FlushSlaveTimeout, SlaveNotAvailable

SWEEP_S = 0.02  # how late a timeout may be answered


class GroupTransfer:
    def __init__(self, timeout_ms: int, in_sync: Callable[[int], bool]) -> None:
        self.timeout_s = timeout_ms / 1000
        self._in_sync = in_sync  # (end offset) -> whether a slave is close enough to wait for
        self.acked = 0  # the furthest offset a slave acknowledged
        self._by_end: list[tuple[int, int, asyncio.Future[None], object]] = []
        self._by_deadline: deque[tuple[float, asyncio.Future[None], int, object]] = deque()
        self._seq = itertools.count()
        self.timeouts = 0
        self.unavailable = 0

    def wait(self, end: int, result: object = None) -> asyncio.Future[None]:
        """A future for a put ending at ``end`` (``result`` rides on its errors)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if end <= self.acked:
            fut.set_result(None)
        elif not self._in_sync(end):
            self.unavailable += 1
            fut.set_exception(SlaveNotAvailable(
                "no slave in sync: the message is stored on the master only", result))
        else:
            heapq.heappush(self._by_end, (end, next(self._seq), fut, result))
            self._by_deadline.append((time.monotonic() + self.timeout_s, fut, end, result))
        return fut

    def acknowledged(self, offset: int) -> None:
        """A slave has ``offset``: answer every put that ends at or before it."""
        if offset <= self.acked:
            return
        self.acked = offset
        waiting = self._by_end
        while waiting and waiting[0][0] <= offset:
            fut = heapq.heappop(waiting)[2]
            if not fut.done():
                fut.set_result(None)

    def reset(self, offset: int) -> None:
        """The furthest slave is gone (or a new one starts lower): acknowledgements count
        again from ``offset``."""
        self.acked = offset

    def sweep(self) -> None:
        """Fail the puts whose syncFlushTimeout passed (FLUSH_SLAVE_TIMEOUT)."""
        now = time.monotonic()
        due = self._by_deadline
        while due and (due[0][0] <= now or due[0][1].done()):
            _, fut, end, result = due.popleft()
            if not fut.done():
                self.timeouts += 1
                fut.set_exception(FlushSlaveTimeout(
                    f"no slave acknowledged offset {end} within {self.timeout_s * 1000:.0f} ms: "
                    f"the message is stored on the master", result))
        if len(self._by_end) > 2 * len(due) + 64:  # drop the answered ones now and then
            self._by_end = [w for w in self._by_end if not w[2].done()]
            heapq.heapify(self._by_end)

    def fail_all(self, exc_type: type[SlaveNotAvailable] = SlaveNotAvailable) -> None:
        """The master stops (or is demoted): every waiting put is answered now."""
        for _, fut, end, result in self._by_deadline:
            if not fut.done():
                fut.set_exception(exc_type(f"replication stopped before offset {end} was acknowledged",
                                           result))
        self._by_deadline.clear()
        self._by_end.clear()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), SWEEP_S)
            except asyncio.TimeoutError:
                pass
            self.sweep()
        self.fail_all()
