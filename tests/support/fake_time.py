"""Time a test moves on itself: the wall clock and the timers a Broker takes
(``Broker(config, wall_clock=time.wall_ms, timers=time)``), so waits end when the test says,
never after a sleep. Use it on the broker's event loop only."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any


class FakeTimer:
    __slots__ = ("due_ms", "callback", "args", "cancelled")

    def __init__(self, due_ms: int, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.due_ms = due_ms
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeTime:
    def __init__(self, start_ms: int | None = None) -> None:
        self.now_ms = time.time_ns() // 1_000_000 if start_ms is None else start_ms
        self._timers: list[tuple[int, int, FakeTimer]] = []
        self._seq = itertools.count()
        self._scheduled = asyncio.Event()

    def wall_ms(self) -> int:
        return self.now_ms

    def call_later(self, delay_s: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer(self.now_ms + max(0, round(delay_s * 1000)), callback, args)
        heapq.heappush(self._timers, (timer.due_ms, next(self._seq), timer))
        self._scheduled.set()
        return timer

    def pending(self) -> list[int]:
        """The due times (ms) of the timers not yet fired or cancelled, soonest first."""
        return sorted(t.due_ms for _, _, t in self._timers if not t.cancelled)

    async def until_pending(self, due_ms: int, limit_s: float = 30) -> None:
        """Return once a timer is set for ``due_ms`` (a service has gone to sleep until then)."""
        async def wait() -> None:
            while due_ms not in self.pending():
                self._scheduled.clear()
                await self._scheduled.wait()
        await asyncio.wait_for(wait(), limit_s)

    def advance(self, seconds: float) -> None:
        """Move time on and fire, in order, the timers that are due by then."""
        self.now_ms += round(seconds * 1000)
        while self._timers and self._timers[0][0] <= self.now_ms:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.callback(*timer.args)
