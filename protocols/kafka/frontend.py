"""The Kafka front-end: its listener and everything its connections share.

It owns the handlers (with the group coordinator and the idempotent-producer state) and the
one background task that saves producer state; ``stop`` closes the listener and every
connection, cancels coordinator timers and saves the state, so nothing outlives it. The
broker must be started before and stopped after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketport.core.broker import Broker

from ..frontend import ListenerFrontEnd
from ..listener import Listener
from ..session_base import Session
from . import codec
from .handlers import KafkaHandlers
from .session import KafkaSession

log = logging.getLogger(__name__)

_PERSIST_INTERVAL_S = 1.0


class KafkaFrontEnd(ListenerFrontEnd):
    name = "kafka"

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config.kafka
        self.handlers = KafkaHandlers(broker, (config.host, config.port))
        self.listener = Listener("kafka", config.host, config.port, self._new_session,
                                 broker.config.connection_limits)
        self.listeners = [self.listener]
        self._persist_task: asyncio.Task | None = None
        self._stop = asyncio.Event()

    def _new_session(self, on_open: Callable[[Session], bool],
                     on_closed: Callable[[Session], None]) -> KafkaSession:
        return KafkaSession(self.handlers, on_open=on_open, on_closed=on_closed)

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the one the OS chose for port 0)."""
        return self.listener.port

    async def bind(self) -> None:
        await super().bind()
        self.handlers.advertised = (self.listener.host, self.listener.port)

    async def start(self) -> None:
        await asyncio.to_thread(self.handlers.producers.load)
        await asyncio.to_thread(codec.compile_all)  # before listening: no first request waits
        await super().start()
        self._persist_task = asyncio.create_task(self._persist_loop(), name="kafka-producer-state")

    async def stop(self) -> None:
        await super().stop()
        if self._persist_task is None:
            return
        self.handlers.close()
        self._stop.set()
        await self._persist_task
        self._persist_task = None
        await asyncio.to_thread(self.handlers.producers.file.save, self.handlers.producers.snapshot())

    async def _persist_loop(self) -> None:
        """Save producer state when it changed, so a crash loses at most about a second."""
        producers = self.handlers.producers
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), _PERSIST_INTERVAL_S)
            except TimeoutError:
                pass
            if producers.dirty:
                try:
                    await asyncio.to_thread(producers.file.save, producers.snapshot())
                except OSError:
                    log.exception("saving kafka producer state failed")
                    producers.dirty = True
