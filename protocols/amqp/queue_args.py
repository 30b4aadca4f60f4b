"""Queue arguments RabbitMQ users set (``x-message-ttl``, ``x-expires``, ``x-max-length``,
``x-dead-letter-exchange``, ``x-dead-letter-routing-key``), read once at declare.

A queue here is a reader of topics, not a store of its own, so these are applied where its
messages are handed out: a message past its TTL (the queue's, or the publisher's
``expiration``) or beyond ``x-max-length`` (drop-head: the oldest go) is not delivered but
dead-lettered when the queue names a dead-letter exchange, else dropped. ``x-expires``
deletes a queue unused for that long (no consumer, no get, no redeclare). ``x-delivery-limit``
(RabbitMQ's quorum queues) drops or dead-letters a message returned more often than that.
No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketport.common.message import MessageExt

from .errors import ChannelError, Reply

EXPIRED = "expired"
MAXLEN = "maxlen"
REJECTED = "rejected"
DELIVERY_LIMIT = "delivery_limit"


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

    @classmethod
    def of(cls, arguments: Mapping[str, Any] | None) -> QueuePolicy:
        """The policy of a declare's arguments; 406 for a value RabbitMQ would refuse."""
        arguments = arguments or {}
        dlx = arguments.get("x-dead-letter-exchange")
        dlrk = arguments.get("x-dead-letter-routing-key")
        if dlrk is not None and dlx is None:
            raise ChannelError(Reply.PRECONDITION_FAILED,
                               "invalid arg 'x-dead-letter-routing-key': x-dead-letter-exchange is missing")
        return cls(_non_negative(arguments, "x-message-ttl"), _non_negative(arguments, "x-expires", True),
                   _non_negative(arguments, "x-max-length"),
                   _text(dlx) if dlx is not None else None, _text(dlrk) if dlrk is not None else None,
                   _non_negative(arguments, "x-delivery-limit"))

    @property
    def drops(self) -> bool:
        """Whether deliveries must be checked at all (most queues have no such argument)."""
        return self.message_ttl is not None or self.max_length is not None or self.delivery_limit is not None

    def drop_reason(self, message: MessageExt, remaining: int, now_ms: int, returns: int = 0) -> str | None:
        """Why ``message`` must not be delivered: EXPIRED, MAXLEN, DELIVERY_LIMIT, or None.
        ``remaining`` is how many messages of the queue wait behind it, ``returns`` how
        often it came back (nack or reject with requeue, a closed channel's unacked)."""
        if self.delivery_limit is not None and returns > self.delivery_limit:
            return DELIVERY_LIMIT
        if self.max_length is not None and remaining >= self.max_length:
            return MAXLEN
        ttl = self.message_ttl
        expiration = message.properties.get("expiration")
        if expiration is not None:
            try:
                own = int(expiration)
            except ValueError:
                own = None
            if own is not None and own >= 0:
                ttl = own if ttl is None else min(ttl, own)
        if ttl is not None and message.store_timestamp + ttl <= now_ms:
            return EXPIRED
        return None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
