"""The same clients for scripts: blocking calls, no event loop in sight.

``from rocketport.client.sync import Producer``: every class of `rocketport.client` with
the same constructor and methods, where each coroutine method blocks until done. The
asyncio clients run on one event loop in a daemon thread, shared by all sync clients of
the process; callbacks given here (listeners, transaction execute/check) are plain
functions, run in a worker thread so that a slow one does not stall the others.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from . import admin, producer, pull, push, transaction
from .message import (
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
)
from .errors import ClientError
from .selectors import (
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
)

__all__ = ["AdminClient", "ClientError", "ConsumeResult", "LocalTransactionState", "Message",
           "MessageExt", "MessageQueue", "Producer", "PullConsumer", "PushConsumer",
           "SelectMessageQueueByHash", "SelectMessageQueueByMachineRoom",
           "SelectMessageQueueByRandom", "SendResult", "SendStatus", "TransactionProducer"]

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            # a plain selector loop, whatever event-loop policy is installed (trio-asyncio's
            # policy would hand out loops that only run inside Trio)
            _loop = asyncio.SelectorEventLoop()
            threading.Thread(target=_loop.run_forever, name="rocketport-client",
                             daemon=True).start()
            atexit.register(_loop.call_soon_threadsafe, _loop.stop)
        return _loop


def _run(coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, _background_loop()).result()


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A plain callback as the coroutine function the asyncio client expects."""
    async def call(*args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)
    return call


class _Blocking:
    """Forwards to the asyncio client `_client`, blocking on every coroutine it returns."""

    _client: Any

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return _run(attr(*args, **kwargs))
        return blocking

    def __enter__(self) -> Any:
        start = getattr(self._client, "start", None)
        if start is not None:
            _run(start())
        return self

    def __exit__(self, *exc: object) -> None:
        stop = getattr(self._client, "shutdown", None) or self._client.close
        _run(stop())


class Producer(_Blocking):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = producer.Producer(*args, **kwargs)

    def send_async(self, msg: Message, on_success: Callable[[SendResult], None],
                   on_exception: Callable[[ClientError], None] | None = None,
                   **kwargs: Any) -> None:
        """Returns once the send is under way; the callbacks are plain functions, run in
        a worker thread."""
        client = self._client

        async def start() -> None:
            client.send_async(msg, _in_thread(on_success),
                              _in_thread(on_exception) if on_exception else None, **kwargs)
        _run(start())


class TransactionProducer(_Blocking):
    """`execute(msg, arg)` and `check(msg)` are plain functions returning a
    LocalTransactionState."""

    def __init__(self, *args: Any, execute: Callable[[Message, Any], LocalTransactionState],
                 check: Callable[[MessageExt], LocalTransactionState], **kwargs: Any) -> None:
        self._client = transaction.TransactionProducer(
            *args, execute=_in_thread(execute), check=_in_thread(check), **kwargs)


class PushConsumer(_Blocking):
    """`register(listener)` takes a plain function: ``def listener(msgs) -> ConsumeResult``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = push.PushConsumer(*args, **kwargs)

    def register(self, listener: Callable[[list[MessageExt]], ConsumeResult]) -> None:
        self._client.register(_in_thread(listener))


class PullConsumer(_Blocking):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = pull.PullConsumer(*args, **kwargs)


class AdminClient(_Blocking):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = admin.AdminClient(*args, **kwargs)
