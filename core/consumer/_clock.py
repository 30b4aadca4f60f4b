"""The injectable millisecond clock shared by the consumer services.

Expiry decisions compare timestamps taken from one clock, so each service takes a clock in
its constructor; tests pass a fake and never sleep. This module must never read wall time
for expiry: a wall clock that steps back would keep dead clients alive.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]


def monotonic_ms() -> int:
    """Milliseconds on the monotonic clock: immune to wall-clock steps."""
    return time.monotonic_ns() // 1_000_000
