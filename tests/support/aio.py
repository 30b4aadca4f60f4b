"""Running a coroutine to completion from a synchronous test."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from tests.support.live_broker import new_loop

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on a plain selector loop, whatever event-loop policy is set."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)
