"""The AMQP virtual host ``/``: declared exchanges, queues and bindings, and their rules.

Every connection of the front-end shares one `VirtualHost`. It keeps RabbitMQ's rules for
declarations (equivalence on redeclare, passive declares, ``amq.`` names reserved,
server-named queues, exclusive queues owned by one connection, auto-delete, if-unused /
if-empty deletes) and turns them into core calls: an exchange is a topic of its name
(one queue, so a queue bound to it keeps publish order), a queue is a delivery group and a
topic of its own (the default exchange's target), and every binding change re-derives the
group's Sources (`exchanges.queue_sources`). Errors are `ChannelError`s with the code a
RabbitMQ client expects.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.facade.types import (
    EXCHANGE_TYPES,
    AmqpBinding,
    AmqpEntityManager,
    AmqpExchange,
    AmqpExchangeBinding,
    AmqpQueue,
    DeliveryGroup,
    SubscriptionGroupConfig,
    binding_arguments,
    plain_arguments,
    validate_topic,
)

from .dead_letter import DeadLetters
from .direct_reply import DirectReplies
from .errors import ChannelError, ConnectionError_, Reply, channel_error
from .exchanges import Router, name_of, queue_sources, topic_of
from .properties import DEFAULT_EXCHANGE_MARK
from .queue_args import QueuePolicy
from .queue_limits import QueueLimits

log = logging.getLogger(__name__)

DEFAULT_EXCHANGE = ""
# RabbitMQ's pre-declared exchanges
STANDARD_EXCHANGES = (("amq.direct", "direct"), ("amq.fanout", "fanout"), ("amq.topic", "topic"),
                      ("amq.headers", "headers"), ("amq.match", "headers"))
# an exchange's or a queue's topic: one queue keeps AMQP's per-queue order
ENTITY_QUEUE_NUMS = 1


@dataclass(slots=True)
class QueueState:
    """A declared queue's live side: its group and who may use it."""

    entity: AmqpQueue
    group: DeliveryGroup
    policy: QueuePolicy
    last_used: float  # monotonic seconds: x-expires counts from here
    owner: object | None = None  # the connection of an exclusive queue
    had_consumer: bool = False
    exclusive_consumer: bool = False  # a basic.consume with exclusive holds it
    consumers: set = field(default_factory=set)  # live consumer objects (cancel notify)
    # x-delivery-limit: how often each message came back, by (topic, queue id, offset)
    returns: dict[tuple[str, int, int], int] = field(default_factory=dict)


def _name(name: str, what: str) -> str:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ChannelError(Reply.PRECONDITION_FAILED, f"{what} name is not valid UTF-8") from None
    try:
        validate_topic(topic_of(name))
    except BrokerError as exc:
        raise ChannelError(Reply.PRECONDITION_FAILED, f"{what} name {name!r}: {exc}") from None
    return name


# the queue arguments a redeclare must repeat (RabbitMQ's rabbit_amqqueue equivalence check)
EQUIVALENT_ARGUMENTS = ("x-dead-letter-exchange", "x-dead-letter-routing-key", "x-expires", "x-max-length",
                        "x-max-length-bytes", "x-max-priority", "x-message-ttl", "x-overflow", "x-queue-mode",
                        "x-queue-type", "x-single-active-consumer", "x-delivery-limit")


def _same_arguments(name: str, current: dict[str, Any], received: dict[str, Any]) -> None:
    """406 when a redeclare's arguments differ from the queue's in one RabbitMQ compares."""
    for key in EQUIVALENT_ARGUMENTS:
        mine, theirs = current.get(key), received.get(key)
        if mine != theirs and not (key == "x-overflow" and {mine, theirs} <= {None, "drop-head"}):
            said = "none" if theirs is None else f"the value '{theirs}'"
            held = "none" if mine is None else f"the value '{mine}'"
            raise ChannelError(Reply.PRECONDITION_FAILED,
                               f"inequivalent arg '{key}' for queue '{name}' in vhost '/': "
                               f"received {said} but current is {held}")


class VirtualHost:
    def __init__(self, broker: Broker, entities: AmqpEntityManager) -> None:
        self.broker = broker
        self.entities = entities
        self.router = Router()
        self.queues: dict[str, QueueState] = {}
        # moves on every change of exchanges, queues or bindings: a session remembers where
        # its publishes go for as long as it stays the same
        self.generation = 0
        self.dead_letters = DeadLetters(broker, self)
        self.limits = QueueLimits(self, self.dead_letters)
        self.direct_replies = DirectReplies()  # amq.rabbitmq.reply-to's channels, across connections
        # queues with a TTL or a length limit: publishes into them are looked at (queue_limits)
        self._limited: dict[str, QueueState] = {}

    # ------------------------------------------------------------------ start / stop
    def open(self) -> None:
        """Take what was declared durably (the broker loaded it), add the standard
        exchanges, open the groups."""
        for name, kind in STANDARD_EXCHANGES:
            if name not in self.entities.exchanges:
                self.entities.put_exchange(AmqpExchange(name, kind))
        for exchange in self.entities.exchanges.values():
            self._topic(exchange.name)
        for queue in list(self.entities.queues.values()):
            self._topic(queue.name)
            self._add(QueueState(queue, self._group(queue.name), QueuePolicy.of(queue.arguments),
                                 time.monotonic()))
        self._reroute()

    async def take_replicated(self) -> None:
        """A slave made master (an election): the entities its replicated log applied since
        it opened (core/ha/metadata_log.py) become live: new queues opened, queues its
        master deleted closed (their offsets stay: the log forgets them), routes rebuilt;
        x-expires counts from now (the queues were used on the old master). A new queue
        without offsets on its own topic (the master's are replicated at an interval: it
        may have gone first) reads that topic from its start: all it holds was sent to the
        queue, whereas starting at its end, as a declare does, would skip it."""
        for name in [n for n in self.queues if n not in self.entities.queues]:
            self.queues.pop(name)
            self._limited.pop(name, None)
            await self.broker.drop_delivery_group(topic_of(name), forget_offsets=False)
        now = time.monotonic()
        for state in self.queues.values():
            state.last_used = now
        for exchange in self.entities.exchanges.values():
            self._topic(exchange.name)
        for queue in list(self.entities.queues.values()):
            if queue.name not in self.queues:
                self._topic(queue.name)
                topic = topic_of(queue.name)  # the group's name too
                for queue_id in range(ENTITY_QUEUE_NUMS):
                    if self.broker.query_offset(topic, topic, queue_id) < 0:
                        self.broker.commit_offset(topic, topic, queue_id, self.broker.min_offset(topic, queue_id))
                self._add(QueueState(queue, self._group(queue.name), QueuePolicy.of(queue.arguments),
                                     time.monotonic()))
        self._rebind(set(self.queues))

    def _topic(self, name: str) -> None:
        topic = topic_of(name)
        self.broker.views.note_header_tables(topic)  # a typed publish keeps its table there
        if self.broker.get_topic(topic) is None:
            self.broker.create_topic(topic, read_queue_nums=ENTITY_QUEUE_NUMS,
                                     write_queue_nums=ENTITY_QUEUE_NUMS)

    def _group(self, queue: str) -> DeliveryGroup:
        """The queue's delivery group; declaring a queue creates its subscription group
        even when autoCreateSubscriptionGroup is off (the declare is the explicit act)."""
        sources = self._sources(queue)
        name = topic_of(queue)
        if self.broker.find_group(name) is None:
            self.broker.update_group(SubscriptionGroupConfig(name))
        try:
            return self.broker.delivery_group(name, sources, start="last")
        except BrokerError as exc:
            raise channel_error(exc) from None

    # ------------------------------------------------------------------ exchanges
    def exchange(self, name: str) -> AmqpExchange | None:
        return self.entities.exchanges.get(name)

    def declare_exchange(self, name: str, kind: str, *, passive: bool, durable: bool,
                         auto_delete: bool, internal: bool, arguments: dict[str, Any] | None) -> None:
        if name == DEFAULT_EXCHANGE:
            if passive:
                return
            raise ChannelError(Reply.ACCESS_REFUSED, "operation not permitted on the default exchange")
        existing = self.entities.exchanges.get(name)
        if passive:
            if existing is None:
                raise ChannelError(Reply.NOT_FOUND, f"no exchange '{name}' in vhost '/'")
            return
        if existing is not None:
            if existing.type != kind:
                raise ChannelError(Reply.PRECONDITION_FAILED,
                                   f"inequivalent arg 'type' for exchange '{name}' in vhost '/': "
                                   f"received '{kind}' but current is '{existing.type}'")
            if existing.durable != durable:
                raise ChannelError(Reply.PRECONDITION_FAILED,
                                   f"inequivalent arg 'durable' for exchange '{name}' in vhost '/': "
                                   f"received '{str(durable).lower()}' but current is "
                                   f"'{str(existing.durable).lower()}'")
            return
        if name.startswith("amq."):
            raise ChannelError(Reply.ACCESS_REFUSED,
                               f"exchange name '{name}' contains reserved prefix 'amq.*'")
        if kind not in EXCHANGE_TYPES:
            raise ConnectionError_(Reply.COMMAND_INVALID, f"unknown exchange type '{kind}'")
        _name(name, "exchange")
        self._topic(name)
        self.entities.put_exchange(AmqpExchange(name, kind, durable, auto_delete, internal,
                                                plain_arguments(arguments)))
        self.generation += 1
        if name in self.queues:  # the queue's own topic is now the exchange's too
            self._rebind({name})

    def delete_exchange(self, name: str, *, if_unused: bool) -> None:
        if name == DEFAULT_EXCHANGE or name.startswith("amq."):
            raise ChannelError(Reply.ACCESS_REFUSED, f"operation not permitted on exchange '{name}'")
        if name not in self.entities.exchanges:
            return  # RabbitMQ 3.x: deleting a missing exchange succeeds
        if if_unused and (self.entities.bindings_of_exchange(name)
                          or any(b.source == name for b in self.entities.exchange_bindings)):
            raise ChannelError(Reply.PRECONDITION_FAILED, f"exchange '{name}' in vhost '/' in use")
        downstream = any(name in (b.source, b.destination) for b in self.entities.exchange_bindings)
        queues = {b.queue for b in self.entities.bindings_of_exchange(name)} | {name}
        self.entities.remove_exchange(name)
        if downstream:
            queues = set(self.queues)
        self._rebind(queues)

    # ------------------------------------------------------------------ queues
    def queue(self, name: str, owner: object, use: bool = False) -> QueueState:
        """A declared queue another connection does not hold exclusively; ``use``: a
        consume, get or redeclare, which x-expires counts from."""
        state = self.queues.get(name)
        if state is None:
            raise ChannelError(Reply.NOT_FOUND, f"no queue '{name}' in vhost '/'")
        if state.owner is not None and state.owner is not owner:
            raise ChannelError(Reply.RESOURCE_LOCKED,
                               f"cannot obtain exclusive access to locked queue '{name}' in vhost '/'")
        if use:
            state.last_used = time.monotonic()
        return state

    def declare_queue(self, name: str, *, passive: bool, durable: bool, exclusive: bool,
                      auto_delete: bool, arguments: dict[str, Any] | None, owner: object) -> QueueState:
        if passive:
            return self.queue(name, owner)
        if not name:
            name = "amq.gen-" + uuid.uuid4().hex[:22]
        elif name.startswith("amq."):
            raise ChannelError(Reply.ACCESS_REFUSED, f"queue name '{name}' contains reserved prefix 'amq.*'")
        policy = QueuePolicy.of(arguments)  # bad arguments are refused first, as RabbitMQ does
        existing = self.queues.get(name)
        if existing is not None:
            state = self.queue(name, owner, use=True)
            entity = state.entity
            for arg, mine, theirs in (("durable", entity.durable, durable),
                                      ("exclusive", state.owner is not None, exclusive),
                                      ("auto_delete", entity.auto_delete, auto_delete)):
                if mine != theirs:
                    raise ChannelError(Reply.PRECONDITION_FAILED,
                                       f"inequivalent arg '{arg}' for queue '{name}' in vhost '/': "
                                       f"received '{str(theirs).lower()}' but current is '{str(mine).lower()}'")
            _same_arguments(name, entity.arguments, plain_arguments(arguments))
            return state
        _name(name, "queue")
        policy.check(name, durable=durable, exclusive=exclusive, auto_delete=auto_delete)
        self._topic(name)
        entity = AmqpQueue(name, durable and not exclusive, exclusive, auto_delete, plain_arguments(arguments))
        group = self._group(name)
        self.entities.put_queue(entity)
        if entity.durable:  # its start on its topic, saved as its entity is: before the answer
            self.broker.persist_offsets()
        state = self._add(QueueState(entity, group, policy, time.monotonic(), owner if exclusive else None))
        self.generation += 1
        return state

    def _add(self, state: QueueState) -> QueueState:
        name = state.entity.name
        self.queues[name] = state
        policy = state.policy
        if policy.message_ttl is not None or policy.limits_length:
            self._limited[name] = state
        if policy.max_priority is not None:
            state.group.order_by_priority(policy.priority_of)
        state.group.single_active = policy.single_active_consumer
        return state

    async def delete_queue(self, name: str, *, if_unused: bool, if_empty: bool, owner: object) -> int:
        state = self.queues.get(name)
        if state is None:
            return 0  # RabbitMQ 3.x: deleting a missing queue succeeds
        self.queue(name, owner)
        if if_unused and state.group.consumer_count:
            raise ChannelError(Reply.PRECONDITION_FAILED, f"queue '{name}' in vhost '/' in use")
        count = state.group.message_count
        if if_empty and count:
            raise ChannelError(Reply.PRECONDITION_FAILED, f"queue '{name}' in vhost '/' is not empty")
        await self._remove_queue(state)
        return count

    async def _remove_queue(self, state: QueueState) -> None:
        name = state.entity.name
        self.queues.pop(name, None)
        self._limited.pop(name, None)
        self.entities.remove_queue(name)
        self._reroute()
        for consumer in list(state.consumers):
            consumer.queue_deleted()
        await self.broker.drop_delivery_group(topic_of(name), forget_offsets=True)

    async def purge_queue(self, name: str, owner: object) -> int:
        state = self.queue(name, owner)
        self.limits.enforce(state)  # what has expired is dead-lettered, not purged
        return await state.group.purge()

    async def connection_closed(self, owner: object) -> None:
        """An exclusive queue goes with its connection."""
        for state in [s for s in self.queues.values() if s.owner is owner]:
            await self._remove_queue(state)

    async def consumer_gone(self, name: str) -> None:
        """An auto-delete queue goes once it had a consumer and has none left."""
        state = self.queues.get(name)
        if state is None:
            return
        state.last_used = time.monotonic()
        if state.entity.auto_delete and state.had_consumer and not state.consumers:
            await self._remove_queue(state)

    async def expire_unused(self) -> None:
        """x-expires: drop the queues unused (no consumer, get or declare) for that long.
        Not on a slave: its queues are its master's (used there), and one it dropped would be
        missing when it is made master."""
        if self.broker.config.is_slave:
            return
        now = time.monotonic()
        for state in list(self.queues.values()):
            expires = state.policy.expires
            if expires is not None and not state.consumers and now - state.last_used >= expires / 1000:
                log.info("AMQP queue %s unused for %d ms (x-expires): deleted", state.entity.name, expires)
                await self._remove_queue(state)

    # ------------------------------------------------------------------ bindings
    def bind(self, queue: str, exchange: str, routing_key: str, arguments: dict[str, Any] | None,
             owner: object) -> None:
        self._check_binding(queue, exchange, owner)
        binding = AmqpBinding(queue, exchange, routing_key, binding_arguments(arguments))
        if self.entities.bind(binding):
            self._rebind({queue})
            if self.queues[queue].entity.durable:  # the queue's start on the exchange's topic
                self.broker.persist_offsets()

    def unbind(self, queue: str, exchange: str, routing_key: str, arguments: dict[str, Any] | None,
               owner: object) -> None:
        if queue not in self.queues or exchange not in self.entities.exchanges:
            if exchange == DEFAULT_EXCHANGE:
                raise ChannelError(Reply.ACCESS_REFUSED, "operation not permitted on the default exchange")
            return  # RabbitMQ 3.x: unbinding what is not there succeeds (aio-pika's RPC.close relies on it)
        self._check_binding(queue, exchange, owner)
        if self.entities.unbind(AmqpBinding(queue, exchange, routing_key, binding_arguments(arguments))):
            self._rebind({queue})

    def _check_binding(self, queue: str, exchange: str, owner: object) -> None:
        if exchange == DEFAULT_EXCHANGE:
            raise ChannelError(Reply.ACCESS_REFUSED, "operation not permitted on the default exchange")
        self.queue(queue, owner)
        if exchange not in self.entities.exchanges:
            raise ChannelError(Reply.NOT_FOUND, f"no exchange '{exchange}' in vhost '/'")

    def _rebind(self, queues: set[str]) -> None:
        self._reroute()
        for name in queues:
            state = self.queues.get(name)
            if state is not None:  # what the queue holds stays: a binding changes later routing
                state.group.set_sources(self._sources(name), keep_routed=True)

    def _sources(self, queue: str) -> list:
        entities = self.entities
        return queue_sources(queue, entities.bindings_of_queue(queue), entities.exchanges,
                             entities.exchange_bindings)

    def _reroute(self) -> None:
        self.router.rebuild(self.entities.exchanges, self.entities.bindings, self.entities.exchange_bindings)
        self.generation += 1

    def bind_exchange(self, destination: str, source: str, routing_key: str,
                      arguments: dict[str, Any] | None, *, unbind: bool = False) -> None:
        """exchange.bind / exchange.unbind: every queue's Sources are derived again (a queue
        may be downstream of ``destination`` through other exchange bindings)."""
        for name in (destination, source):
            if name == DEFAULT_EXCHANGE:
                raise ChannelError(Reply.ACCESS_REFUSED, "operation not permitted on the default exchange")
            if name not in self.entities.exchanges:
                raise ChannelError(Reply.NOT_FOUND, f"no exchange '{name}' in vhost '/'")
        binding = AmqpExchangeBinding(destination, source, routing_key, binding_arguments(arguments))
        changed = (self.entities.unbind_exchange(binding) if unbind else self.entities.bind_exchange(binding))
        if changed:
            self._rebind(set(self.queues))
            if not unbind and any(q.entity.durable for q in self.queues.values()):
                self.broker.persist_offsets()  # durable queues' starts on a new source topic

    # ------------------------------------------------------------------ publishing
    def publish_topic(self, exchange: str, routing_key: str) -> str | None:
        """The topic a publish is stored in, or None when the default exchange names no queue.
        A default-exchange publish into a topic an exchange shares carries
        `DEFAULT_EXCHANGE_MARK` (the session adds it: `needs_mark`)."""
        if exchange == DEFAULT_EXCHANGE:
            return topic_of(routing_key) if routing_key in self.queues else None
        found = self.entities.exchanges.get(exchange)
        if found is None:
            raise ChannelError(Reply.NOT_FOUND, f"no exchange '{exchange}' in vhost '/'")
        if found.internal:
            raise ChannelError(Reply.ACCESS_REFUSED, f"cannot publish to internal exchange '{exchange}'")
        return topic_of(exchange)

    @property
    def limited(self) -> dict[str, QueueState]:
        """The queues with a TTL or a length limit, by name."""
        return self._limited

    @property
    def has_limits(self) -> bool:
        """Whether some queue has a TTL or a length limit (else only a publish's own
        expiration makes `limited_queues` name any)."""
        return bool(self._limited)

    def limited_queues(self, exchange: str, routing_key: str,
                       properties: dict[str, str]) -> tuple[QueueState, ...] | None:
        """The queues a publish reaches that have a TTL or a length limit (every queue it
        reaches when it has its own ``expiration``), or None: `queue_limits` looks at them."""
        if not self._limited and "expiration" not in properties:
            return None
        if exchange == DEFAULT_EXCHANGE:
            names = {routing_key}
        else:
            names = self.router.queues(exchange, routing_key, properties)
        pool = self.queues if "expiration" in properties else self._limited
        found = tuple(pool[name] for name in names if name in pool)
        return found or None

    def exchange_name(self, topic: str, queue: str, props: dict[str, str]) -> str:
        """The exchange a message of ``queue`` read from ``topic`` came through: "" for the
        queue's own topic (the default exchange), else the exchange of that topic."""
        name = name_of(topic)
        if name == queue and (DEFAULT_EXCHANGE_MARK in props or name not in self.entities.exchanges):
            return ""
        return name

    def needs_mark(self, exchange: str, routing_key: str) -> bool:
        """Whether a publish must carry `DEFAULT_EXCHANGE_MARK` (see `publish_topic`)."""
        return exchange == DEFAULT_EXCHANGE and routing_key in self.entities.exchanges
