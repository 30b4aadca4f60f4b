"""Queue arguments RabbitMQ users set (``x-message-ttl``, ``x-expires``, ``x-max-length``,
``x-overflow``, ``x-dead-letter-exchange``, ``x-dead-letter-routing-key``,
``x-delivery-limit``), read once at declare, and the rule each makes.

A message past its TTL (the queue's, or the publisher's ``expiration``) or beyond
``x-max-length`` (``x-overflow`` drop-head, the default: the oldest go) leaves the queue
from its head, dead-lettered when the queue names a dead-letter exchange, else dropped:
when the queue hands it out, and on time when nobody consumes (`queue_limits`).
reject-publish refuses a publish into a full queue (nacked under confirms),
reject-publish-dlx dead-letters it too. ``x-expires`` deletes a queue unused for that
long (no consumer, no get, no redeclare). ``x-delivery-limit`` (RabbitMQ's quorum queues)
drops or dead-letters a message returned more often than that. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketport.common.message import MessageExt

from .errors import ChannelError, Reply

EXPIRED = "expired"
MAXLEN = "maxlen"
REJECTED = "rejected"
DELIVERY_LIMIT = "delivery_limit"
DROP_HEAD = "drop-head"
REJECT_PUBLISH = "reject-publish"
REJECT_PUBLISH_DLX = "reject-publish-dlx"
OVERFLOWS = (DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX)
MAX_PRIORITY = 255
CLASSIC, QUORUM = "classic", "quorum"
QUEUE_TYPES = (CLASSIC, QUORUM)  # x-queue-type values served
_EXPIRATION_NEEDLE = b"expiration\x01"  # as properties are stored: name \x01 value \x02


def _non_negative(arguments: Mapping[str, Any], key: str, positive: bool = False) -> int | None:
    value = arguments.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        raise ChannelError(Reply.PRECONDITION_FAILED,
                           f"invalid arg '{key}' for queue: {value!r} is not a {'positive' if positive else 'non-negative'} integer")
    return value


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    message_ttl: int | None = None  # ms
    expires: int | None = None  # ms
    max_length: int | None = None
    dead_letter_exchange: str | None = None
    dead_letter_routing_key: str | None = None
    delivery_limit: int | None = None  # returns (requeues) a message may have
    overflow: str = DROP_HEAD
    max_priority: int | None = None
    max_length_bytes: int | None = None  # body bytes of the ready messages
    queue_type: str = CLASSIC
    single_active_consumer: bool = False  # one consumer gets everything while it lasts

    @classmethod
    def of(cls, arguments: Mapping[str, Any] | None) -> QueuePolicy:
        """The policy of a declare's arguments; 406 for a value RabbitMQ would refuse."""
        arguments = arguments or {}
        dlx = arguments.get("x-dead-letter-exchange")
        dlrk = arguments.get("x-dead-letter-routing-key")
        if dlrk is not None and dlx is None:
            raise ChannelError(Reply.PRECONDITION_FAILED,
                               "invalid arg 'x-dead-letter-routing-key': x-dead-letter-exchange is missing")
        overflow = _text(arguments.get("x-overflow", DROP_HEAD))
        if overflow not in OVERFLOWS:
            raise ChannelError(Reply.PRECONDITION_FAILED,
                               f"invalid arg 'x-overflow' for queue: {overflow!r} is not one of {', '.join(OVERFLOWS)}")
        max_priority = _non_negative(arguments, "x-max-priority")
        if max_priority is not None and max_priority > MAX_PRIORITY:
            raise ChannelError(Reply.PRECONDITION_FAILED,
                               f"invalid arg 'x-max-priority' for queue: {max_priority} is above {MAX_PRIORITY}")
        return cls(_non_negative(arguments, "x-message-ttl"), _non_negative(arguments, "x-expires", True),
                   _non_negative(arguments, "x-max-length"),
                   _text(dlx) if dlx is not None else None, _text(dlrk) if dlrk is not None else None,
                   _non_negative(arguments, "x-delivery-limit"), overflow, max_priority,
                   _non_negative(arguments, "x-max-length-bytes"), _text(arguments.get("x-queue-type", CLASSIC)),
                   _boolean(arguments, "x-single-active-consumer"))

    def check(self, name: str, *, durable: bool, exclusive: bool, auto_delete: bool) -> None:
        """RabbitMQ 3.10's rules for a new queue of this type: 406 otherwise. A quorum queue
        is durable, has no owner and is never auto-deleted, and has no priorities; a
        delivery limit is a quorum queue's. Streams are not served (docs/protocol-amqp.md)."""
        where = f"for queue '{name}' in vhost '/'"
        if self.queue_type not in QUEUE_TYPES:
            raise ChannelError(Reply.PRECONDITION_FAILED,
                               f"invalid arg 'x-queue-type' {where}: \"unsupported queue type '{self.queue_type}'\"")
        if self.queue_type == QUORUM:
            for flag, bad in (("non-durable", not durable), ("exclusive-owner", exclusive),
                              ("auto-delete", auto_delete)):
                if bad:
                    raise ChannelError(Reply.PRECONDITION_FAILED, f"invalid property '{flag}' {where}")
        bad_arg = ("x-max-priority" if self.queue_type == QUORUM and self.max_priority is not None
                   else "x-delivery-limit" if self.queue_type == CLASSIC and self.delivery_limit is not None
                   else None)
        if bad_arg is not None:
            raise ChannelError(Reply.PRECONDITION_FAILED,
                               f"invalid arg '{bad_arg}' {where} of queue type rabbit_{self.queue_type}_queue")

    @property
    def drops(self) -> bool:
        """Whether deliveries must be checked at all (most queues have no such argument)."""
        return self.message_ttl is not None or self.drops_head or self.delivery_limit is not None

    @property
    def limits_length(self) -> bool:
        return self.max_length is not None or self.max_length_bytes is not None

    @property
    def drops_head(self) -> bool:
        """Whether a full queue loses its oldest (drop-head) rather than refusing publishes."""
        return self.limits_length and self.overflow == DROP_HEAD

    @property
    def refuses_publishes(self) -> bool:
        return self.limits_length and self.overflow != DROP_HEAD

    def priority_of(self, message: MessageExt) -> int:
        """x-max-priority: a message's priority in this queue (none is 0, above the
        maximum counts as the maximum, as in RabbitMQ)."""
        text = message.properties.get("priority")
        if not text:
            return 0
        try:
            return max(0, min(int(text), self.max_priority or 0))
        except ValueError:
            return 0

    def full(self, ready: int, ready_bytes: int = 0, body: int = 0) -> bool:
        """Whether a queue with ``ready`` messages (``ready_bytes`` of bodies) waiting
        takes no more, or not one of ``body`` bytes (reject-publish)."""
        return ((self.max_length is not None and ready >= self.max_length)
                or (self.max_length_bytes is not None and ready_bytes + body > self.max_length_bytes))

    def drop_reason(self, message: MessageExt, remaining: int, now_ms: int, returns: int = 0,
                    consumer: bool = False) -> str | None:
        """Why ``message`` must not be delivered: EXPIRED, MAXLEN, DELIVERY_LIMIT, or None.
        ``remaining`` is how many messages of the queue wait behind it, ``returns`` how
        often it came back (nack or reject with requeue, a closed channel's unacked);
        ``consumer``: it goes to a consumer, which a TTL of 0 allows (RabbitMQ: expired
        unless it can be delivered at once)."""
        if self.delivery_limit is not None and returns > self.delivery_limit:
            return DELIVERY_LIMIT
        if self.max_length is not None and remaining >= self.max_length and self.overflow == DROP_HEAD:
            return MAXLEN
        expires_at = self.expires_at(message)
        if expires_at is not None and expires_at <= now_ms and not (consumer and expires_at == message.store_timestamp):
            return EXPIRED
        return None

    def expires_at(self, message: MessageExt, stored: int | None = None) -> int | None:
        """When ``message`` expires in this queue (ms since the epoch), or None: the
        queue's TTL or the publisher's ``expiration``, whichever is shorter, from when the
        message entered the queue (was stored: ``stored`` when the caller has it)."""
        ttl = self.message_ttl
        # a stored message's properties are decoded only when they may name an expiration
        raw = getattr(message, "properties_bytes", None)
        expiration = (message.properties.get("expiration") if raw is None or _EXPIRATION_NEEDLE in raw()
                      else None)
        if expiration is not None:
            own = message_expiration(expiration)
            if own is not None:
                ttl = own if ttl is None else min(ttl, own)
        if ttl is None:
            return None
        return (message.store_timestamp if stored is None else stored) + ttl


def message_expiration(text: str) -> int | None:
    """A publisher's ``expiration`` property in ms, or None when it is no such number."""
    try:
        own = int(text)
    except ValueError:
        return None
    return own if own >= 0 else None


_ERLANG_INTEGER = re.compile(r"[+-]?[0-9]+")
_MAX_EXPIRY_MS = 4294967295  # RabbitMQ's ?MAX_EXPIRY_TIMER


def check_expiration(text: str) -> None:
    """A publish's ``expiration`` as RabbitMQ's basic.publish checks it (Erlang's
    string:to_integer, then not negative, not above its timer's bound): anything else
    closes the channel, 406 PRECONDITION_FAILED, with RabbitMQ's words for why."""
    match = _ERLANG_INTEGER.match(text)
    if match is None:
        why = "no_integer"
    elif match.end() < len(text):
        rest = text[match.end():].replace("\\", "\\\\").replace('"', '\\"')
        why = f'{{leftover_string,"{rest}"}}'
    else:
        value = int(text)
        if value < 0:
            why = f"{{value_negative,{value}}}"
        elif value > _MAX_EXPIRY_MS:
            why = f"{{value_too_large,{value}}}"
        else:
            return
    raise ChannelError(Reply.PRECONDITION_FAILED, f"invalid expiration '{text}': {why}")


def _boolean(arguments: Mapping[str, Any], key: str) -> bool:
    value = arguments.get(key, False)
    if not isinstance(value, bool):
        raise ChannelError(Reply.PRECONDITION_FAILED, f"invalid arg '{key}' for queue: {value!r} is not a boolean")
    return value


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
