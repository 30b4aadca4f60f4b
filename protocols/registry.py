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

from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig

from .amqp.frontend import AmqpFrontEnd
from .frontend import FrontEnd
from .kafka.frontend import KafkaFrontEnd
from .remoting.frontend import RemotingFrontEnd
from .stomp.frontend import StompFrontEnd


@dataclass(frozen=True, slots=True)
class FrontEndEntry:
    name: str
    enabled: Callable[[BrokerConfig], bool]
    build: Callable[[Broker], FrontEnd]


# In start order; stop runs in reverse. Remoting is always on: it is the broker's own
# protocol (its name server answers route lookups for every other client).
REGISTRY: tuple[FrontEndEntry, ...] = (
    FrontEndEntry("remoting", lambda config: True, RemotingFrontEnd),
    FrontEndEntry("kafka", lambda config: config.kafka.enabled, KafkaFrontEnd),
    FrontEndEntry("amqp", lambda config: config.amqp.enabled, AmqpFrontEnd),
    FrontEndEntry("stomp", lambda config: config.stomp.enabled, StompFrontEnd),
)


def build_enabled(broker: Broker) -> list[FrontEnd]:
    """The enabled front-ends, in start order."""
    return [entry.build(broker) for entry in REGISTRY if entry.enabled(broker.config)]
