"""The injectable clocks and timers of the core's services.

Expiry decisions compare timestamps taken from one clock, so each service takes a clock in
its constructor; and the services that wait (held pulls, delivery groups' idle waits, the
delay levels) schedule their timeouts through one `Timers`, the running loop's by default.
Tests pass fakes of both and move time on themselves: they never sleep. This module must
never read wall time for expiry: a wall clock that steps back would keep dead clients alive
(the delay levels' due times are wall time, as RocketMQ stores them, and get their own
clock).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

Clock = Callable[[], int]


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    """Where a service schedules a callback ``delay_s`` seconds on."""

    def call_later(self, delay_s: float, callback: Callable[..., object], *args: Any) -> Cancellable: ...


class LoopTimers:
    """The running event loop's timers (the default everywhere)."""

    @staticmethod
    def call_later(delay_s: float, callback: Callable[..., object], *args: Any) -> Cancellable:
        return asyncio.get_running_loop().call_later(delay_s, callback, *args)


LOOP_TIMERS = LoopTimers()


def monotonic_ms() -> int:
    """Milliseconds on the monotonic clock: immune to wall-clock steps."""
    return time.monotonic_ns() // 1_000_000
