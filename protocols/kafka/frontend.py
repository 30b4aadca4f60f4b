"""The Kafka front-end: its listener and everything its connections share.

It owns the handlers (with the group coordinator); idempotent-producer state is the core's
(core/txn/producer_state.py, derived from the stored batches). ``stop`` closes the listener
and every connection and cancels coordinator timers, so nothing outlives it. The broker
must be started before and stopped after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rocketport.core.broker import Broker
from rocketport.core.config import bind_port

from ..frontend import ListenerFrontEnd
from ..listener import Listener
from ..session_base import Session
from ..tls import TlsContexts
from . import codec
from .consumer_group_log import ConsumerGroupLog
from .handlers import KafkaHandlers
from .requests import BrokerNode
from .session import KafkaSession


class KafkaFrontEnd(ListenerFrontEnd):
    name = "kafka"

    def __init__(self, broker: Broker) -> None:
        super().__init__()
        self.broker = broker
        config = broker.config.kafka
        self.handlers = KafkaHandlers(broker, (config.host, config.port))
        self.handlers.produce.traffic = self.handlers.fetch.traffic = self.traffic
        self.listener = Listener("kafka", config.host, config.port, self._new_session,
                                 broker.config.connection_limits)
        self.listeners = [self.listener]
        self.group_log = ConsumerGroupLog(broker, self.handlers.consumer_groups)
        self._group_log_task: asyncio.Task | None = None
        # kafka.tlsPort: Kafka's SSL (SASL_SSL with SASL) listener; its metadata names itself
        self.tls_node: BrokerNode | None = None
        if config.tls_port:
            self.tls_node = BrokerNode(config.host, bind_port(config.tls_port))
            self.listeners.append(Listener("kafka (tls)", config.host, bind_port(config.tls_port), self._tls_session,
                                           broker.config.connection_limits,
                                           tls=TlsContexts(broker.config).tls_port()))

    def _tls_session(self, on_open: Callable[[Session], bool],
                     on_closed: Callable[[Session], None]) -> KafkaSession:
        return KafkaSession(self.handlers, on_open=on_open, on_closed=on_closed, node=self.tls_node)

    def _new_session(self, on_open: Callable[[Session], bool],
                     on_closed: Callable[[Session], None]) -> KafkaSession:
        return KafkaSession(self.handlers, on_open=on_open, on_closed=on_closed)

    @property
    def port(self) -> int:
        """The bound port (the configured one, or the one the OS chose for port 0)."""
        return self.listener.port

    async def bind(self) -> None:
        await super().bind()
        self.handlers.node.host, self.handlers.node.port = self.listener.host, self.listener.port
        if self.tls_node is not None:
            self.tls_node.port = self.listeners[1].port
            self.tls_node.node_id = self.handlers.node.node_id

    async def start(self) -> None:
        await asyncio.to_thread(codec.compile_all)  # before listening: no first request waits
        await self.group_log.restore()  # KIP-848 groups back from the log, before anyone heartbeats
        self._group_log_stop = asyncio.Event()
        self._group_log_task = asyncio.create_task(self.group_log.run(self._group_log_stop),
                                                   name="kafka-consumer-group-log")
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self._group_log_task is not None:  # its last flush writes what changed up to now
            self._group_log_stop.set()
            await self._group_log_task
            self._group_log_task = None
        self.handlers.close()
