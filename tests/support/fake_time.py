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
    __slots__ = ("serial", "set_ms", "due_ms", "callback", "args", "cancelled", "_changed")

    def __init__(self, serial: int, set_ms: int, due_ms: int, callback: Callable[..., object],
                 args: tuple[Any, ...], changed: asyncio.Event) -> None:
        self.serial = serial  # in the order timers were set
        self.set_ms = set_ms
        self.due_ms = due_ms
        self.callback = callback
        self.args = args
        self.cancelled = False
        self._changed = changed

    @property
    def delay_ms(self) -> int:
        return self.due_ms - self.set_ms

    def cancel(self) -> None:
        self.cancelled = True
        self._changed.set()


class FakeTime:
    def __init__(self, start_ms: int | None = None) -> None:
        self.now_ms = time.time_ns() // 1_000_000 if start_ms is None else start_ms
        self._timers: list[tuple[int, int, FakeTimer]] = []
        self._serials = itertools.count()
        self._changed = asyncio.Event()  # a timer was set or cancelled

    def wall_ms(self) -> int:
        return self.now_ms

    def call_later(self, delay_s: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        serial = next(self._serials)
        timer = FakeTimer(serial, self.now_ms, self.now_ms + max(0, round(delay_s * 1000)), callback, args,
                          self._changed)
        heapq.heappush(self._timers, (timer.due_ms, serial, timer))
        self._changed.set()
        return timer

    def pending(self) -> list[FakeTimer]:
        """The timers not yet fired or cancelled, soonest first."""
        return [t for _, _, t in sorted(self._timers) if not t.cancelled]

    async def until(self, predicate: Callable[[list[FakeTimer]], bool], limit_s: float = 30) -> list[FakeTimer]:
        """`pending` once ``predicate`` holds for it (a service has gone to sleep, or woke and
        slept again); re-checked whenever a timer is set or cancelled."""
        async def wait() -> list[FakeTimer]:
            while not predicate(pending := self.pending()):
                self._changed.clear()
                await self._changed.wait()
            return pending
        return await asyncio.wait_for(wait(), limit_s)

    async def until_pending(self, due_ms: int) -> None:
        """Return once a timer is set for ``due_ms``."""
        await self.until(lambda pending: any(t.due_ms == due_ms for t in pending))

    def advance(self, seconds: float) -> None:
        """Move time on and fire, in order, the timers that are due by then."""
        self.now_ms += round(seconds * 1000)
        while self._timers and self._timers[0][0] <= self.now_ms:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.callback(*timer.args)
