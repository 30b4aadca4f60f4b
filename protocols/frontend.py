"""The seam every wire protocol plugs into: the front-end shape and the listener-made base.

A front-end is built from the Broker facade (it reads its own config section), binds its
ports in `bind` (before the store opens, so a taken port fails start-up with the store
untouched), serves from `start`, and in `stop` stops accepting, closes its connections and
drains what they were doing. The shell builds the enabled ones from `protocols.registry`
and never names a protocol. This module must never import a protocol package (they import it).
`ListenerFrontEnd` is the part every front-end made of listeners shares: a subclass fills
``listeners``, wraps `bind` / `start` / `stop` with its own work, and hands work that must
outlive a connection (releasing what a closed connection held) to `spawn`, whose tasks
`stop` awaits, so nothing a front-end started outlives it.

For /metrics (protocols/http) every front-end also keeps a `Traffic` (messages and bytes it
stored and handed out, added to where the protocol already holds a request's or a delivery
run's count: one addition, never a lookup, never per message where a batch will do) and
says how many of its connections produce and consume (`connections`, counted when scraped).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from .histogram import Histogram, Latencies
from .listener import Listener
from .session_base import Session

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Traffic:
    """What one front-end stored (in) and handed to consumers (out) since the broker
    started: messages, and their bytes as the protocol carries them."""

    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    # the histograms /metrics exports (rocketmq_message_size of messages in, and
    # rocketmq_rpc_latency): set by the HTTP front-end when it starts, else never recorded
    sizes: Histogram | None = None
    latency: Latencies | None = None
    # the topics its producers stored to (the console's "written by"): one set addition a
    # request or run of sends, after the store took it; the API drops deleted topics' names
    topics: set[str] = field(default_factory=set)


@dataclass(slots=True, frozen=True)
class Connections:
    """A front-end's open connections; producers have stored a message, consumers have
    subscribed or fetched (a connection may be both, or neither yet)."""

    total: int
    producers: int
    consumers: int


class FrontEnd(Protocol):
    name: str
    traffic: Traffic

    def connections(self) -> Connections:
        """Its open connections now, by what they do."""

    def endpoints(self) -> list[tuple[str, str, int]]:
        """(role, host, port) of each listener, for the banner and tests."""

    async def bind(self) -> None:
        """Bind every port without accepting; raises ListenError (one line) on failure."""

    async def start(self) -> None:
        """Accept and serve (binds first if `bind` was not called)."""

    async def stop(self) -> None:
        """Stop accepting, close connections, drain; safe after a failed or partial start."""


class ListenerFrontEnd:
    """A front-end made of listeners, bound and started in order and stopped in reverse."""

    name: str
    listeners: list[Listener]

    def __init__(self) -> None:
        self.traffic = Traffic()
        self._tasks: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # kept at start: see `spawn`

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        """Run work that outlives a connection (its clean-up after it closed); `stop` waits
        for it, a failure is logged."""
        # the loop `start` ran on: hosted under trio-asyncio, a connection's callbacks may
        # run where asyncio.get_running_loop() cannot see it
        assert self._loop is not None, "spawn before start"
        task = self._loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: %s failed", self.name, task.get_name(), exc_info=task.exception())

    @property
    def sessions(self) -> set[Session]:
        return set().union(*(listener.sessions for listener in self.listeners))

    def endpoints(self) -> list[tuple[str, str, int]]:
        return [(listener.role, listener.host, listener.port) for listener in self.listeners]

    def connections(self) -> Connections:
        sessions = [session for listener in self.listeners for session in listener.sessions]
        return Connections(len(sessions), sum(1 for s in sessions if s.produces),
                           sum(1 for s in sessions if s.consumes))

    async def bind(self) -> None:
        for listener in self.listeners:
            await listener.bind()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.bind()
        for listener in self.listeners:
            await listener.start()

    async def stop(self) -> None:
        """Stop the listeners (closing their connections), then await what the connections
        left to `spawn` (a clean-up may spawn another)."""
        for listener in reversed(self.listeners):
            await listener.stop()
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
