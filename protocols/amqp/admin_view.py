"""The virtual host as `rocketport admin` shows it: exchanges, queues with their bindings,
consumer counts and messages waiting, read from the live state when asked (registered
in `Broker.views` as ``"amqp"``, served by the remoting front-end).
"""

from __future__ import annotations

from typing import Any

from rocketport.core.facade.types import plain_arguments

from .vhost import VirtualHost

VIEW_NAME = "amqp"


def snapshot(vhost: VirtualHost) -> dict[str, Any]:
    """JSON-able; bindings are listed under their queue, exchange-to-exchange bindings
    under their source exchange."""
    entities = vhost.entities
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for b in sorted(entities.bindings, key=lambda b: (b.queue, b.exchange, b.routing_key)):
        by_queue.setdefault(b.queue, []).append(
            {"exchange": b.exchange, "routingKey": b.routing_key, "arguments": plain_arguments(b.argument_map)})
    by_source: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(entities.exchange_bindings, key=lambda e: (e.source, e.destination, e.routing_key)):
        by_source.setdefault(e.source, []).append(
            {"destination": e.destination, "routingKey": e.routing_key,
             "arguments": plain_arguments(e.argument_map)})
    exchanges = [{**exchange.to_json(), "exchangeBindings": by_source.get(name, [])}
                 for name, exchange in sorted(entities.exchanges.items())]
    queues = []
    for name, state in sorted(vhost.queues.items()):
        queues.append({**state.entity.to_json(), "consumers": state.group.consumer_count,
                       "messagesReady": state.group.message_count, "bindings": by_queue.get(name, [])})
    return {"vhost": "/", "exchanges": exchanges, "queues": queues}
