"""The Kafka listener: binds the configured port and owns everything connections share.

It owns the handlers (with the group coordinator and the idempotent-producer state) and the
one background task that saves producer state; ``stop`` closes the listener and every
connection, cancels coordinator timers and saves the state, so nothing outlives it. The
broker must be started before and stopped after it.
"""

from __future__ import annotations

import asyncio
import logging

from rocketport.core.broker import Broker

from . import codec
from .handlers import KafkaHandlers
from .session import KafkaSession

log = logging.getLogger(__name__)

_PERSIST_INTERVAL_S = 1.0


class KafkaServer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config.kafka
        self.handlers = KafkaHandlers(broker, (config.host, config.port))
        self.sessions: set[KafkaSession] = set()
        self._server: asyncio.Server | None = None
        self._persist_task: asyncio.Task | None = None
        self._stop = asyncio.Event()

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the one the OS chose for port 0)."""
        return self.handlers.advertised[1]

    async def start(self) -> None:
        config = self.broker.config.kafka
        await asyncio.to_thread(self.handlers.producers.load)
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(codec.compile_all)  # before listening: no first request waits
        self._server = await loop.create_server(
            lambda: KafkaSession(self.handlers, self.sessions), config.host, config.port,
            reuse_address=True)
        port = self._server.sockets[0].getsockname()[1]
        self.handlers.advertised = (config.host, port)
        self._persist_task = asyncio.create_task(self._persist_loop(), name="kafka-producer-state")
        log.info("kafka listener on %s:%d", config.host, port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for session in list(self.sessions):
            session.close()
        await self._server.wait_closed()
        self._server = None
        self.handlers.close()
        self._stop.set()
        if self._persist_task is not None:
            await self._persist_task
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
