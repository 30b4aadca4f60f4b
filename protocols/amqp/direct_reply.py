"""Direct reply-to (RabbitMQ's ``amq.rabbitmq.reply-to``): RPC replies without a reply queue.

A channel consumes from the pseudo-queue ``amq.rabbitmq.reply-to`` in no-ack mode; a publish
on that channel with that ``reply_to`` gets ``amq.rabbitmq.reply-to.<token>`` instead, the
token naming the channel (Spring's RabbitTemplate and many RPC clients rely on it). A reply
published to the default exchange with that routing key goes straight to the consuming
channel as a delivery: never stored, no queue, so a reply to a channel that is gone is
dropped; a mandatory reply is returned (312 NO_ROUTE) even when delivered, as no queue
took it. The rules and the 406 texts are RabbitMQ 3.10's (rabbit_channel). One registry
per virtual host, shared by its connections; the session writes what `DirectReplies.deliver` makes.
"""

from __future__ import annotations

import secrets
import uuid
from typing import TYPE_CHECKING, Final

from pamqp.commands import Basic

from . import codec
from .channel import Channel, Consumer
from .errors import ChannelError, ConnectionError_, Reply

if TYPE_CHECKING:
    from .session import AmqpSession

PSEUDO_QUEUE: Final = "amq.rabbitmq.reply-to"
REPLY_PREFIX: Final = PSEUDO_QUEUE + "."
_PSEUDO_BYTES: Final = PSEUDO_QUEUE.encode()


def named_in(raw_properties: list[bytes]) -> bool:
    """Whether some undecoded content header may say reply_to amq.rabbitmq.reply-to (then
    each publish goes the decoded way, where `DirectReplies.reply_to` rewrites it). One
    search of them all: the name holds no \x00, so none is found across two."""
    return _PSEUDO_BYTES in b"\x00".join(raw_properties)


class DirectReplies:
    """The channels consuming from ``amq.rabbitmq.reply-to``, by their token."""

    def __init__(self) -> None:
        self._targets: dict[str, tuple[AmqpSession, Channel]] = {}
        self._tokens: dict[Channel, str] = {}  # a channel keeps its token, as RabbitMQ's suffix

    def consume(self, session: AmqpSession, channel: Channel, method: Basic.Consume) -> None:
        """basic.consume on the pseudo-queue: a consumer without a queue or subscriber (cancel
        and close treat it as any other); acknowledging ones and a second one are refused."""
        tag = method.consumer_tag or "amq.ctag-" + uuid.uuid4().hex[:22]
        if tag in channel.consumers:
            raise ConnectionError_(Reply.NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'")
        if not method.no_ack:
            raise ChannelError(Reply.PRECONDITION_FAILED, "reply consumer cannot acknowledge")
        if _consumer_of(channel) is not None:
            raise ChannelError(Reply.PRECONDITION_FAILED, "reply consumer already set")
        channel.consumers[tag] = Consumer(tag, tag.encode("utf-8", "surrogateescape")[:255], PSEUDO_QUEUE, True,
                                          channel, lambda _consumer: None)
        if channel not in self._tokens:
            token = secrets.token_urlsafe(24)
            self._tokens[channel] = token
            self._targets[token] = (session, channel)
        if not method.nowait:
            session.send(channel.number, Basic.ConsumeOk(tag))

    def reply_to(self, channel: Channel) -> str:
        """The reply_to a publish on ``channel`` naming the pseudo-queue gets instead."""
        if _consumer_of(channel) is None:
            raise ChannelError(Reply.PRECONDITION_FAILED, "fast reply consumer does not exist")
        return REPLY_PREFIX + self._tokens[channel]

    def deliver(self, routing_key: str, properties: bytes, body: bytes) -> bool:
        """A reply (default exchange, ``routing_key`` amq.rabbitmq.reply-to.<token>) to its
        channel's consumer, as a no-ack delivery; False (dropped) when no such consumer is
        there any more. ``properties``: the content header's flags and list."""
        target = self._targets.get(routing_key[len(REPLY_PREFIX):])
        if target is None:
            return False
        session, channel = target
        consumer = _consumer_of(channel)
        if consumer is None or session.channels.get(channel.number) is not channel or not channel.active:
            return False
        tag = channel.next_tag
        channel.next_tag = tag + 1
        frames = [codec.method_frame(channel.number, Basic.Deliver(consumer.tag, tag, False, "", routing_key)),
                  *codec.content_frames(channel.number, properties, body, session.conn.frame_max)]
        session.write_now(b"".join(frames))
        traffic = session.front_end.traffic
        traffic.messages_out += 1
        traffic.bytes_out += len(body)
        return True

    def exists(self, name: str) -> bool:
        """queue.declare of the pseudo-queue, or of a reply name whose channel still consumes
        from it: RabbitMQ answers declare-ok with 0 messages and 1 consumer, else 404."""
        if name == PSEUDO_QUEUE:
            return True
        target = self._targets.get(name[len(REPLY_PREFIX):]) if name.startswith(REPLY_PREFIX) else None
        return (target is not None and target[0].channels.get(target[1].number) is target[1]
                and _consumer_of(target[1]) is not None)

    def forget(self, channel: Channel) -> None:
        """A closed channel: replies to its token are dropped from now on."""
        token = self._tokens.pop(channel, None)
        if token is not None:
            del self._targets[token]


def _consumer_of(channel: Channel) -> Consumer | None:
    for consumer in channel.consumers.values():
        if consumer.queue == PSEUDO_QUEUE:
            return consumer
    return None
