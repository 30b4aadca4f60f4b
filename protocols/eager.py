"""Run a request handler's coroutine at once, and make it a Task only if it suspends.

Most requests (a Produce or a batch send with ASYNC_FLUSH, a Fetch or pull that finds
data, metadata, offsets, heartbeats) finish without ever waiting. As a Task each costs a
Task object, a done callback and two more trips round the event loop; started eagerly it
costs a ``send``. This is Python 3.12's eager task factory for the sessions' request
dispatch (Kafka and remoting), on 3.11.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any


class Done:
    """An outcome known at once, with the methods of a finished future that callers use."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    @staticmethod
    def done() -> bool:
        return True

    @staticmethod
    def cancel() -> bool:
        return False  # as for a finished future: nothing left to cancel

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


def start(coro: Coroutine[Any, Any, Any]) -> Done | asyncio.Task:
    """A ``Done`` if ``coro`` finishes without suspending, else a Task that carries on from
    where it stopped."""
    try:
        awaited = coro.send(None)
    except StopIteration as finished:
        return Done(finished.value)
    except Exception as exc:  # noqa: BLE001 - a handler failing at once fails like a task
        return Done(error=exc)
    return asyncio.ensure_future(_resume(coro, awaited))


async def _resume(coro: Coroutine[Any, Any, Any], awaited: Any) -> Any:
    return await _Continue(coro, awaited)


class _Continue:
    """Hands what ``coro`` first awaited to the Task driving us, then drives ``coro`` on:
    each value it yields goes up to the Task, and each outcome (or cancellation) comes
    back down to it."""

    __slots__ = ("awaited", "coro")

    def __init__(self, coro: Coroutine[Any, Any, Any], awaited: Any) -> None:
        self.coro = coro
        self.awaited = awaited

    def __await__(self) -> Generator[Any, None, Any]:
        coro, awaited = self.coro, self.awaited
        while True:
            try:
                yield awaited
            except BaseException as exc:  # noqa: BLE001 - cancellation is passed on to coro
                try:
                    awaited = coro.throw(exc)
                except StopIteration as finished:
                    return finished.value
                continue
            try:
                awaited = coro.send(None)
            except StopIteration as finished:
                return finished.value
