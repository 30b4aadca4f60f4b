"""AMQP exchanges, queues and bindings, persisted in config/amqpEntities.json.

An exchange is a topic of the same name and a queue is a delivery group (and a topic of its
own, for the default exchange); what the topic and group tables cannot say (an exchange's
type, a queue's arguments, the bindings between them) is kept here. Only durable entities
are written; transient ones live in memory and are gone after a restart, as in RabbitMQ.
A binding is durable when both its ends are. The AMQP front-end owns the rules; this module
only stores records. Each durable change is told to ``listeners`` as a change record (what
`apply_change` takes): a master's replicated log carries them to its slaves
(core/ha/metadata_log.py).
"""

from __future__ import annotations

import datetime
import decimal
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from .json_file import JsonFile

EXCHANGE_TYPES = ("direct", "fanout", "topic", "headers")


def _plain(value: Any) -> Any:
    """An AMQP field value as JSON can hold it (bytes as text, decimals and times as numbers)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp())
    return value


@dataclass(slots=True)
class AmqpExchange:
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "type": self.type, "durable": self.durable,
                "autoDelete": self.auto_delete, "internal": self.internal, "arguments": self.arguments}

    @classmethod
    def from_json(cls, d: dict) -> "AmqpExchange":
        return cls(d["name"], d["type"], bool(d.get("durable", True)), bool(d.get("autoDelete", False)),
                   bool(d.get("internal", False)), dict(d.get("arguments", {})))


@dataclass(slots=True)
class AmqpQueue:
    name: str
    durable: bool = True
    exclusive: bool = False
    auto_delete: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "durable": self.durable, "exclusive": self.exclusive,
                "autoDelete": self.auto_delete, "arguments": self.arguments}

    @classmethod
    def from_json(cls, d: dict) -> "AmqpQueue":
        return cls(d["name"], bool(d.get("durable", True)), bool(d.get("exclusive", False)),
                   bool(d.get("autoDelete", False)), dict(d.get("arguments", {})))


@dataclass(frozen=True, slots=True)
class AmqpBinding:
    queue: str
    exchange: str
    routing_key: str
    # a binding's arguments (headers exchanges match on them), as sorted (key, value) pairs
    arguments: tuple[tuple[str, Any], ...] = ()

    @property
    def argument_map(self) -> dict[str, Any]:
        return dict(self.arguments)

    def to_json(self) -> dict:
        return {"queue": self.queue, "exchange": self.exchange, "routingKey": self.routing_key,
                "arguments": dict(self.arguments)}

    @classmethod
    def from_json(cls, d: dict) -> "AmqpBinding":
        return cls(d["queue"], d["exchange"], d.get("routingKey", ""), binding_arguments(d.get("arguments")))


@dataclass(frozen=True, slots=True)
class AmqpExchangeBinding:
    """exchange.bind (RabbitMQ's extension): what ``source`` routes with this key and
    arguments is routed on by ``destination``."""

    destination: str
    source: str
    routing_key: str
    arguments: tuple[tuple[str, Any], ...] = ()

    @property
    def argument_map(self) -> dict[str, Any]:
        return dict(self.arguments)

    def to_json(self) -> dict:
        return {"destination": self.destination, "source": self.source, "routingKey": self.routing_key,
                "arguments": dict(self.arguments)}

    @classmethod
    def from_json(cls, d: dict) -> "AmqpExchangeBinding":
        return cls(d["destination"], d["source"], d.get("routingKey", ""), binding_arguments(d.get("arguments")))


def binding_arguments(arguments: dict[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((str(k), _plain(v)) for k, v in (arguments or {}).items()))


def plain_arguments(arguments: dict[str, Any] | None) -> dict[str, Any]:
    return _plain(dict(arguments or {}))


class AmqpEntityManager:
    """Every declared exchange, queue and binding; durable ones saved on each change."""

    def __init__(self, config_dir: str) -> None:
        self.file = JsonFile(os.path.join(config_dir, "amqpEntities.json"))
        self.exchanges: dict[str, AmqpExchange] = {}
        self.queues: dict[str, AmqpQueue] = {}
        self.bindings: set[AmqpBinding] = set()
        self.exchange_bindings: set[AmqpExchangeBinding] = set()
        # told of each saved change, as the topic table's listeners (replication)
        self.listeners: list[Callable[[list[dict]], None]] = []

    def load(self) -> None:
        data = self.file.load() or {}
        for d in data.get("exchanges", []):
            exchange = AmqpExchange.from_json(d)
            self.exchanges[exchange.name] = exchange
        for d in data.get("queues", []):
            queue = AmqpQueue.from_json(d)
            self.queues[queue.name] = queue
        for d in data.get("bindings", []):
            binding = AmqpBinding.from_json(d)
            if binding.queue in self.queues and binding.exchange in self.exchanges:
                self.bindings.add(binding)
        for d in data.get("exchangeBindings", []):
            e2e = AmqpExchangeBinding.from_json(d)
            if e2e.source in self.exchanges and e2e.destination in self.exchanges:
                self.exchange_bindings.add(e2e)

    def persist(self) -> None:
        self.file.save({
            "exchanges": [e.to_json() for e in self.exchanges.values() if e.durable],
            "queues": [q.to_json() for q in self.queues.values() if q.durable],
            "bindings": sorted((b.to_json() for b in self.bindings if self._durable(b)),
                               key=lambda d: (d["queue"], d["exchange"], d["routingKey"])),
            "exchangeBindings": sorted((b.to_json() for b in self.exchange_bindings if self._durable_e2e(b)),
                                       key=lambda d: (d["destination"], d["source"], d["routingKey"])),
        })

    def _durable_e2e(self, binding: AmqpExchangeBinding) -> bool:
        source, destination = self.exchanges.get(binding.source), self.exchanges.get(binding.destination)
        return source is not None and destination is not None and source.durable and destination.durable

    def _durable(self, binding: AmqpBinding) -> bool:
        queue, exchange = self.queues.get(binding.queue), self.exchanges.get(binding.exchange)
        return queue is not None and exchange is not None and queue.durable and exchange.durable

    # each change saves only when it touches something durable
    def put_exchange(self, exchange: AmqpExchange) -> None:
        self.exchanges[exchange.name] = exchange
        if exchange.durable:
            self._saved({"exchange": exchange.to_json()})

    def remove_exchange(self, name: str) -> AmqpExchange | None:
        exchange = self.exchanges.pop(name, None)
        if exchange is not None:
            self.bindings = {b for b in self.bindings if b.exchange != name}
            self.exchange_bindings = {b for b in self.exchange_bindings
                                      if name not in (b.source, b.destination)}
            if exchange.durable:
                self._saved({"removeExchange": name})
        return exchange

    def put_queue(self, queue: AmqpQueue) -> None:
        self.queues[queue.name] = queue
        if queue.durable:
            self._saved({"queue": queue.to_json()})

    def remove_queue(self, name: str) -> AmqpQueue | None:
        queue = self.queues.pop(name, None)
        if queue is not None:
            self.bindings = {b for b in self.bindings if b.queue != name}
            if queue.durable:
                self._saved({"removeQueue": name})
        return queue

    def bind(self, binding: AmqpBinding) -> bool:
        """False when the binding existed already."""
        if binding in self.bindings:
            return False
        self.bindings.add(binding)
        if self._durable(binding):
            self._saved({"bind": binding.to_json()})
        return True

    def unbind(self, binding: AmqpBinding) -> bool:
        if binding not in self.bindings:
            return False
        durable = self._durable(binding)
        self.bindings.discard(binding)
        if durable:
            self._saved({"unbind": binding.to_json()})
        return True

    def bind_exchange(self, binding: AmqpExchangeBinding) -> bool:
        """False when the binding existed already."""
        if binding in self.exchange_bindings:
            return False
        self.exchange_bindings.add(binding)
        if self._durable_e2e(binding):
            self._saved({"bindExchange": binding.to_json()})
        return True

    def unbind_exchange(self, binding: AmqpExchangeBinding) -> bool:
        if binding not in self.exchange_bindings:
            return False
        durable = self._durable_e2e(binding)
        self.exchange_bindings.discard(binding)
        if durable:
            self._saved({"unbindExchange": binding.to_json()})
        return True

    def _saved(self, change: dict) -> None:
        self.persist()
        for listener in self.listeners:
            listener([change])

    def apply_change(self, change: dict) -> None:
        """One change record a master's listeners were told (a slave replaying its log)."""
        (what, value), = change.items()
        if what == "exchange":
            self.put_exchange(AmqpExchange.from_json(value))
        elif what == "removeExchange":
            self.remove_exchange(str(value))
        elif what == "queue":
            self.put_queue(AmqpQueue.from_json(value))
        elif what == "removeQueue":
            self.remove_queue(str(value))
        elif what in ("bind", "unbind"):
            (self.bind if what == "bind" else self.unbind)(AmqpBinding.from_json(value))
        elif what in ("bindExchange", "unbindExchange"):
            e2e = AmqpExchangeBinding.from_json(value)
            (self.bind_exchange if what == "bindExchange" else self.unbind_exchange)(e2e)
        else:
            raise ValueError(f"unknown AMQP entity change {what!r}")

    def bindings_of_queue(self, queue: str) -> list[AmqpBinding]:
        return [b for b in self.bindings if b.queue == queue]

    def bindings_of_exchange(self, exchange: str) -> list[AmqpBinding]:
        return [b for b in self.bindings if b.exchange == exchange]
