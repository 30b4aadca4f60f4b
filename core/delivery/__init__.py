"""Server-side delivery: consumer groups whose messages the broker hands out one by one
(STOMP subscriptions, AMQP queues), on the same offsets every other protocol uses. The
messages read from plain records are `StoredMessage`s (decoded as their fields are read)."""

from ..store.stored_message import StoredMessage
from .group import MAX_UNACKED, Delivery, DeliveryGroup, Source, Subscriber

__all__ = ["MAX_UNACKED", "Delivery", "DeliveryGroup", "Source", "StoredMessage", "Subscriber"]
