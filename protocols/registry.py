"""The ordered list of front-ends the shell builds, and nothing else.

Every protocol package imports the front-end shape (`protocols.frontend`); only this module
imports the protocol packages, so the two never import each other. Adding a protocol is a
package plus one entry here; the shell (`rocketport/server.py`) never names a protocol.
It must never hold state or start anything: building is the front-end's constructor,
serving its ``start``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig

from .amqp.frontend import AmqpFrontEnd
from .frontend import FrontEnd
from .http.frontend import HttpFrontEnd
from .kafka.frontend import KafkaFrontEnd
from .remoting.frontend import RemotingFrontEnd
from .stomp.frontend import StompFrontEnd


@dataclass(frozen=True, slots=True)
class FrontEndEntry:
    name: str
    enabled: Callable[[BrokerConfig], bool]
    build: Callable[..., FrontEnd]  # (broker), or (broker, the front-ends) when it observes them
    observes: bool = False


# In start order; stop runs in reverse. Remoting is always on: it is the broker's own
# protocol (its name server answers route lookups for every other client). HTTP comes last:
# it reads the others' figures (its /metrics), so it starts after and stops before them.
REGISTRY: tuple[FrontEndEntry, ...] = (
    FrontEndEntry("remoting", lambda config: True, RemotingFrontEnd),
    FrontEndEntry("kafka", lambda config: config.kafka.enabled, KafkaFrontEnd),
    FrontEndEntry("amqp", lambda config: config.amqp.enabled, AmqpFrontEnd),
    FrontEndEntry("stomp", lambda config: config.stomp.enabled, StompFrontEnd),
    FrontEndEntry("http", lambda config: config.http.enabled, HttpFrontEnd, observes=True),
)


def build_enabled(broker: Broker) -> list[FrontEnd]:
    """The enabled front-ends, in start order; an observing one is given the list (which
    it reads when asked, so it sees every front-end, itself included)."""
    built: list[Any] = []
    for entry in REGISTRY:
        if entry.enabled(broker.config):
            built.append(entry.build(broker, built) if entry.observes else entry.build(broker))
    return built
