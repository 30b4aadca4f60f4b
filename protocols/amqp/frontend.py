"""The AMQP 0-9-1 front-end: its listener, the virtual host its connections share, and the
background work they leave behind (a closed connection's consumers and exclusive queues are
released by tasks this front-end owns, `ListenerFrontEnd.spawn`, and awaits on stop, so
nothing outlives it).

The broker must be started before and stopped after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketport.core.broker import Broker
from rocketport.core.config import bind_port

from ..frontend import ListenerFrontEnd
from ..listener import Listener
from ..session_base import Session
from ..tls import TlsContexts
from .access import Logins
from .admin_view import VIEW_NAME, snapshot
from .errors import not_master
from .session import AmqpSession
from .vhost import VirtualHost

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_S = 60  # RabbitMQ's offer
_SWEEP_INTERVAL_S = 1.0
_DRAIN_S = 5.0  # at stop: the longest wait for dead-letter copies to be stored


class AmqpFrontEnd(ListenerFrontEnd):
    name = "amqp"

    def __init__(self, broker: Broker) -> None:
        super().__init__()
        self.broker = broker
        config = broker.config
        section = config.amqp
        self.vhost = VirtualHost(broker, broker.amqp_entities)
        broker.views.register(VIEW_NAME, lambda: snapshot(self.vhost))
        self.acl = broker.acl if config.acl_enable else None
        self.logins = Logins(self.acl, section.default_user, section.default_pass, frozenset(section.loopback_users))
        self.heartbeat = DEFAULT_HEARTBEAT_S
        self.listener = Listener("amqp", section.host, section.port, self._new_session,
                                 config.connection_limits)
        self.listeners = [self.listener]
        if section.tls_port:  # amqps (5671 by convention)
            self.listeners.append(Listener("amqp (tls)", section.host, bind_port(section.tls_port), self._new_session,
                                           config.connection_limits, tls=TlsContexts(config).tls_port()))
        self._opened = False
        # the vhost may lack what the master declared: it opened, or has been, on a slave
        # since it last took up the replicated entities (`take_replicated`)
        self._behind = False
        self._promoted: asyncio.Task | None = None
        broker.role_listeners.append(self._role_changed)
        self._sweeper: asyncio.Task | None = None
        self._limits: list[asyncio.Task] = []  # the TTL and length sweep, the dead-letter writer

    def _new_session(self, on_open: Callable[[Session], bool],
                     on_closed: Callable[[Session], None]) -> AmqpSession:
        return AmqpSession(self, on_open=on_open, on_closed=on_closed)

    @property
    def port(self) -> int:
        return self.listener.port

    async def start(self) -> None:
        if not self._opened:
            self.vhost.open()  # the store is open: topics and groups can be made
            self._opened = True
            self._behind = self.broker.config.is_slave
        await super().start()
        loop = asyncio.get_running_loop()
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep(), name="amqp-expires")
        if not self._limits:
            self._limits = [loop.create_task(self.vhost.limits.run(), name="amqp-queue-limits"),
                            loop.create_task(self.vhost.dead_letters.run(), name="amqp-dead-letters")]

    @property
    def writable(self) -> bool:
        """Whether publishes and declarations are taken, asked at each one (an election may
        promote or demote this node under open connections): a slave's vhost does not know
        what its master declared since it opened, so what it took would be lost; a promoted
        node's once that is live (`take_replicated`), not from its role's switch on."""
        if self.broker.config.is_slave:
            self._behind = True
            return False
        return not self._behind

    def require_writable(self, what: str) -> None:
        """406 (`not_master`) unless `writable`."""
        if not self.writable:
            raise not_master(self.broker.config.broker_name, what)

    def _role_changed(self) -> None:
        """Elected master: what the slave's log applied becomes live (take_replicated),
        and then writes are taken; made a slave: none."""
        if self.broker.config.is_slave:
            self._behind = True
        elif self._opened:
            self._promoted = asyncio.get_running_loop().create_task(self._take_replicated(),
                                                                     name="amqp-take-replicated")

    async def _take_replicated(self) -> None:
        try:
            await self.vhost.take_replicated()
        except Exception:  # (a queue's group refused): logged, not left unretrieved in the task
            log.exception("AMQP: the entities replicated to this slave were not all taken up")
        self._behind = self.broker.config.is_slave  # (demoted again meanwhile: still behind)

    async def _sweep(self) -> None:
        """x-expires, checked once a second."""
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL_S)
            try:
                await self.vhost.expire_unused()
            except Exception:
                log.exception("AMQP queue expiry failed")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None
        await super().stop()
        if self._limits:  # no more expiries; what was dead-lettered is stored first
            sweep, writer = self._limits
            sweep.cancel()
            await asyncio.gather(sweep, return_exceptions=True)
            try:
                await asyncio.wait_for(self.vhost.dead_letters.drained(), _DRAIN_S)
            except TimeoutError:
                log.warning("AMQP: %d dead-letter copies not stored at stop", self.vhost.dead_letters.backlog)
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
            self._limits = []
