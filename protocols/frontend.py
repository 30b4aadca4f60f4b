"""The seam every wire protocol plugs into: one front-end shape and the registry of them.

A front-end is built from the Broker facade (it reads its own config section), binds its
ports in `bind` (before the store opens, so a taken port fails start-up with the store
untouched), serves from `start`, and in `stop` stops accepting, closes its connections and
drains what they were doing. The shell builds every enabled entry of `REGISTRY` in order
and never names a protocol; adding a protocol is a package plus one entry here.
`ListenerFrontEnd` is the part every front-end made of listeners shares: a subclass fills
``listeners`` and wraps `bind` / `start` / `stop` with its own work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig

from .listener import Listener
from .session_base import Session


class FrontEnd(Protocol):
    name: str

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

    @property
    def sessions(self) -> set[Session]:
        return set().union(*(listener.sessions for listener in self.listeners))

    def endpoints(self) -> list[tuple[str, str, int]]:
        return [(listener.role, listener.host, listener.port) for listener in self.listeners]

    async def bind(self) -> None:
        for listener in self.listeners:
            await listener.bind()

    async def start(self) -> None:
        await self.bind()
        for listener in self.listeners:
            await listener.start()

    async def stop(self) -> None:
        for listener in reversed(self.listeners):
            await listener.stop()


@dataclass(frozen=True, slots=True)
class FrontEndEntry:
    name: str
    enabled: Callable[[BrokerConfig], bool]
    build: Callable[[Broker], FrontEnd]


def _remoting(broker: Broker) -> FrontEnd:
    from .remoting.frontend import RemotingFrontEnd
    return RemotingFrontEnd(broker)


def _kafka(broker: Broker) -> FrontEnd:
    from .kafka.frontend import KafkaFrontEnd
    return KafkaFrontEnd(broker)


def _stomp(broker: Broker) -> FrontEnd:
    from .stomp.frontend import StompFrontEnd
    return StompFrontEnd(broker)


def _amqp(broker: Broker) -> FrontEnd:
    from .amqp.frontend import AmqpFrontEnd
    return AmqpFrontEnd(broker)


# In start order; stop runs in reverse. Remoting is always on: it is the broker's own
# protocol (its name server answers route lookups for every other client).
REGISTRY: tuple[FrontEndEntry, ...] = (
    FrontEndEntry("remoting", lambda config: True, _remoting),
    FrontEndEntry("kafka", lambda config: config.kafka.enabled, _kafka),
    FrontEndEntry("amqp", lambda config: config.amqp.enabled, _amqp),
    FrontEndEntry("stomp", lambda config: config.stomp.enabled, _stomp),
)


def build_enabled(broker: Broker) -> list[FrontEnd]:
    return [entry.build(broker) for entry in REGISTRY if entry.enabled(broker.config)]
