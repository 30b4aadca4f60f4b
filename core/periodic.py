"""The broker's periodic services in one shape: wait for the stop event or the interval,
then run one step; a step that fails is logged and the next one runs on time.

Every background loop of the core (persisting offsets, scanning clients, flushing, the
check-backs, transaction timeouts, retention) is `run_every` on a task its owner's
`asyncio.TaskGroup` holds, so the owner's stop sets the event and awaits the group: no
loop outlives the service that started it. This module must never decide what a step does
or hold state of its own; a step that must also run once at stop is its owner's to call.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Step = Callable[[], Awaitable[object] | object]


async def stopped_within(stop: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``stop`` is set (True) or ``timeout_s`` seconds have passed (False)."""
    if stop.is_set():  # (wait_for with no time left would not look)
        return True
    try:
        await asyncio.wait_for(stop.wait(), timeout_s)
    except TimeoutError:
        return False
    return True


async def run_every(interval_s: float, step: Step, stop: asyncio.Event, *, name: str,
                    survives: tuple[type[BaseException], ...] = (Exception,)) -> None:
    """Run ``step`` (a function or a coroutine function) every ``interval_s`` seconds until
    ``stop`` is set, never once it is. An exception of the ``survives`` types is logged and
    the loop goes on; any other ends it (and fails the owner's TaskGroup)."""
    while not await stopped_within(stop, interval_s):
        try:
            result = step()
            if inspect.isawaitable(result):
                await result
        except survives:
            log.exception("%s failed; again in %.3g s", name, interval_s)
