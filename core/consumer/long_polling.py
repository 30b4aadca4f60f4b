"""Held pulls: a pull that found no new messages waits here until its queue grows.

This is RocketMQ's PullRequestHoldService made event-driven. Instead of a thread that
re-checks every held request every few seconds, each held pull is one future keyed by
(topic, queue id); the store's dispatcher calls :meth:`PullWaiters.notify` after new
messages become visible and only the futures of that queue are resolved. An idle broker
with thousands of held pulls therefore uses no CPU, and a pull wakes as soon as its data
is visible rather than at the next poll tick.

Waking is all this module does: it never reads the store and never evaluates filters. A
woken pull re-reads the queue and, if a tag or SQL92 filter rejects everything it finds,
simply waits again. Every method must be called on the event loop's thread; a dispatcher
running in a worker thread hands over with ``loop.call_soon_threadsafe(waiters.notify,
...)``. Nothing here may grow without bound: every entry is removed when its pull is woken,
times out or is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ._clock import LOOP_TIMERS, Timers

# topic -> queue id -> {future of one held pull: the offset it wants to read}
_QueueWaiters = dict[asyncio.Future[bool], int]


class PullWaiters:
    """Held pulls keyed by topic and queue id.

    ``notify`` is on the dispatcher's hot path and is called for every dispatched batch,
    so when nobody waits on the queue it costs two dict look-ups and nothing else.
    """

    __slots__ = ("_topics", "_count", "_closed", "timers")

    def __init__(self, timers: Timers = LOOP_TIMERS) -> None:
        self.timers = timers  # the holds' timeouts (a delivery group's idle waits too)
        self._topics: dict[str, dict[int, _QueueWaiters]] = {}
        self._count = 0
        self._closed = False

    def __len__(self) -> int:
        """Number of (pull, queue) holds right now: a pull waiting on several queues
        counts once per queue."""
        return self._count

    @property
    def queue_count(self) -> int:
        """Number of (topic, queue id) entries held; zero once nobody waits."""
        return sum(len(queues) for queues in self._topics.values())

    async def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> bool:
        """Hold until the queue's max offset exceeds ``offset`` (True) or the hold ends.

        Returns False on timeout, on :meth:`notify_all` / :meth:`wake_all`, and at once
        after :meth:`close` or for a non-positive timeout. The caller checks the store
        before waiting; with no ``await`` between that check and this call no notify can
        be missed on a single event loop.
        """
        if self._closed or timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._hold(topic, queue_id, offset, future)
        timer = self.timers.call_later(timeout_s, _resolve, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            self._forget(topic, queue_id, future)

    async def wait_any(self, positions: Sequence[tuple[str, int, int]], timeout_s: float) -> bool:
        """`wait` on several (topic, queue id, offset) at once: True as soon as any of
        them grows. One future serves them all, so a fetch of many partitions wakes in
        the loop iteration that dispatched the first message."""
        if self._closed or timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self.hold_any(positions, future)
        timer = self.timers.call_later(timeout_s, _resolve, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            self.release_any(positions, future)

    def hold_any(self, positions: Sequence[tuple[str, int, int]], future: asyncio.Future[bool]) -> None:
        """Resolve the caller's own ``future`` (True) when any position grows: `wait_any`
        without its coroutine, for a waiter that is woken by other events too (a delivery
        group's pump). The caller must `release_any` the same positions once it is done.
        After `close` nothing is held: the caller's own timeout or wake-up ends its wait
        (resolving the future at once would let a loop that waits again never yield)."""
        if self._closed:
            return
        for topic, queue_id, offset in positions:
            self._hold(topic, queue_id, offset, future)

    def release_any(self, positions: Sequence[tuple[str, int, int]], future: asyncio.Future[bool]) -> None:
        for topic, queue_id, _ in positions:
            self._forget(topic, queue_id, future)

    def _hold(self, topic: str, queue_id: int, offset: int, future: asyncio.Future[bool]) -> None:
        queues = self._topics.get(topic)
        if queues is None:
            queues = self._topics[topic] = {}
        waiters = queues.get(queue_id)
        if waiters is None:
            waiters = queues[queue_id] = {}
        waiters[future] = offset
        self._count += 1

    def notify(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Wake the pulls on this queue that asked for an offset below ``max_offset``."""
        queues = self._topics.get(topic)
        if queues is None:
            return
        waiters = queues.get(queue_id)
        if waiters is None:
            return
        # Usually every holder waits at the old max offset, so the whole map goes at once.
        still_waiting = {f: offset for f, offset in waiters.items() if offset >= max_offset}
        if still_waiting:
            queues[queue_id] = still_waiting
        else:
            del queues[queue_id]
            if not queues:
                del self._topics[topic]
        self._count -= len(waiters) - len(still_waiting)
        for future, offset in waiters.items():
            if offset < max_offset and not future.done():
                future.set_result(True)

    def notify_all(self, topic: str) -> None:
        """End every pull held on ``topic`` (False), e.g. when the topic is deleted."""
        queues = self._topics.pop(topic, None)
        if queues is None:
            return
        for waiters in queues.values():
            self._count -= len(waiters)
            for future in waiters:
                _resolve(future, False)

    def wake_all(self) -> None:
        """End every held pull (False) so that shutdown does not wait for hold timeouts."""
        for topic in list(self._topics):
            self.notify_all(topic)

    def close(self) -> None:
        """Wake everyone and refuse new holds: pulls arriving during shutdown return False."""
        self._closed = True
        self.wake_all()

    def _forget(self, topic: str, queue_id: int, future: asyncio.Future[bool]) -> None:
        """Drop a finished waiter and any map it leaves empty, unless a notify already did."""
        queues = self._topics.get(topic)
        if queues is None:
            return
        waiters = queues.get(queue_id)
        if waiters is None or waiters.pop(future, None) is None:
            return
        self._count -= 1
        if not waiters:
            del queues[queue_id]
            if not queues:
                del self._topics[topic]


def _resolve(future: asyncio.Future[bool], result: bool) -> None:
    """Complete a held pull unless it already finished (woken, timed out or cancelled)."""
    if not future.done():
        future.set_result(result)
