"""The consuming direction: basic.qos/consume/cancel/get, the delivery frames, ack, nack,
reject and recover, and dead-lettering.

A consumer is a subscriber of its queue's core delivery group (`rocketport.core.delivery`);
the group hands it a dispatch slice's deliveries at once and `DeliverHandlers.deliverer`
renders them into one write from frame parts kept per stored property set (deliveries
mostly repeat a few: a repeat decodes nothing). Acks, nacks and rejects become group calls;
a nack without requeue goes to the queue's dead-letter exchange when it has one, else to
the group's ``%DLQ%`` topic. Queue arguments (TTL, max length, delivery limit) are applied
here, where the queue hands a message out. One object per connection; never touches the
transport: frames go out through the session.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pamqp.commands import Basic

from rocketport.common.message import PROPERTY_RETRY_TOPIC, MessageExt, without_unique_key
from rocketport.core.auth.plain_acl import SUB
from rocketport.core.facade.types import StoredMessage, now_ms

from . import codec
from .access import require
from .channel import Channel, Consumer, MethodHandler, Source, Unacked, group_tags, sources
from .dead_letter import cycles, with_long_header
from .direct_reply import PSEUDO_QUEUE
from .errors import ChannelError, ConnectionError_, Reply
from .properties import encode_properties
from .queue_args import DELIVERY_LIMIT, QUORUM, REJECTED
from .vhost import QueueState

if TYPE_CHECKING:
    from .session import AmqpSession

log = logging.getLogger(__name__)

_RENDERED_MAX = 256  # distinct (stored properties, topic) a consumer keeps frames for


class DeliverHandlers:
    """The consuming methods of one connection's channels, and its consumers' deliveries."""

    def __init__(self, session: AmqpSession) -> None:
        self.session = session
        self.vhost = session.vhost
        self.broker = session.broker
        self.front_end = session.front_end
        self._tag_header = session.broker.config.kafka_tag_header
        self.table: dict[type, MethodHandler] = {
            Basic.Qos: self.basic_qos, Basic.Consume: self.basic_consume,
            Basic.Cancel: self.basic_cancel, Basic.Get: self.basic_get,
            Basic.Ack: self.basic_ack, Basic.Nack: self.basic_nack,
            Basic.Reject: self.basic_reject, Basic.Recover: self.basic_recover,
            Basic.RecoverAsync: self.basic_recover,
        }

    # ---------------------------------------------------------------- consumers
    def basic_qos(self, channel: Channel, method: Basic.Qos) -> None:
        channel.prefetch = method.prefetch_count
        for consumer in channel.consumers.values():
            if consumer.subscriber is not None:
                consumer.subscriber.set_prefetch(method.prefetch_count)
        self.session.send(channel.number, Basic.QosOk())

    def basic_consume(self, channel: Channel, method: Basic.Consume) -> None:
        session = self.session
        session.consumes = True
        if method.queue == PSEUDO_QUEUE:  # direct reply-to: no queue behind it
            session.vhost.direct_replies.consume(session, channel, method)
            return
        name = channel.queue_named(method.queue)
        state = self.vhost.queue(name, session, use=True)
        require(session.account, name, SUB)
        session.note_group(state.group.name)
        priority = _consumer_priority(method.arguments)
        tag = method.consumer_tag or "amq.ctag-" + uuid.uuid4().hex[:22]
        if tag in channel.consumers:
            raise ConnectionError_(Reply.NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'")
        if state.exclusive_consumer or (method.exclusive and state.group.consumer_count):
            raise ChannelError(Reply.ACCESS_REFUSED, f"queue '{name}' in vhost '/' in exclusive use")
        consumer = Consumer(tag, tag.encode("utf-8", "surrogateescape")[:255], name, method.no_ack, channel,
                            self.queue_deleted)
        channel.consumers[tag] = consumer
        if not method.nowait:  # consume-ok before the first delivery
            session.send(channel.number, Basic.ConsumeOk(tag))
        deliver = self.deliverer(channel, consumer, state)
        if state.policy.max_length is None:
            consumer.subscriber = state.group.subscribe(deliver, prefetch=channel.prefetch,
                                                        auto_ack=method.no_ack, many=True, priority=priority)
        else:  # one at a time: whether to drop one counts the messages still waiting behind it
            consumer.subscriber = state.group.subscribe(lambda delivery: deliver([delivery]),
                                                        prefetch=channel.prefetch, auto_ack=method.no_ack,
                                                        priority=priority)
        if not channel.active or session.write_paused:
            consumer.subscriber.pause()
        state.consumers.add(consumer)
        state.had_consumer = True
        state.exclusive_consumer = method.exclusive

    def deliverer(self, channel: Channel, consumer: Consumer, state: QueueState) -> Callable[[Any], None]:
        """The consumer's delivery callback, called with a list of deliveries (a dispatch
        slice's to it). Deliveries mostly repeat a few property sets: their frames'
        fixed parts (`codec.Deliveries`) are kept by the stored properties' octets and topic
        until the vhost's declarations change (the exchange a delivery names depends on
        them), so a repeat decodes nothing."""
        group, queue = state.group, state.entity.name
        drops = state.policy.drops  # the policy is the declare's: fixed
        quorum = state.policy.queue_type == QUORUM
        number = channel.number
        tag_bytes = bytes((len(consumer.tag_bytes),)) + consumer.tag_bytes
        no_ack = consumer.no_ack
        conn, vhost = self.session.conn, self.vhost
        write_now = self.session.write_now
        add = channel.add_delivery
        source = Source(group, queue)
        # by stored properties and topic: (expiring, frames, names, content properties)
        rendered: dict[tuple[bytes, str], tuple[bool, codec.Deliveries, bytes, bytes]] = {}
        generation = vhost.generation
        traffic = self.session.front_end.traffic

        def render(message: MessageExt, topic: str) -> tuple[bool, codec.Deliveries, bytes, bytes]:
            props = message.properties
            names = (codec.shortstr_of(vhost.exchange_name(props.get(PROPERTY_RETRY_TOPIC, topic), queue, props))
                     + codec.shortstr_of(props.get("TAGS", "")))
            content = self.content_properties(props)
            return "expiration" in props, codec.Deliveries(number, tag_bytes, names, content), names, content

        def deliver(run: list[Any]) -> None:
            nonlocal generation
            if generation != vhost.generation:
                rendered.clear()
                generation = vhost.generation
            frame_max = conn.frame_max
            parts: list[Any] = []
            sent = size = 0
            for delivery in run:
                message = delivery.message
                ledger = delivery.ledger
                topic = message.topic if ledger is None else ledger.topic
                if type(message) is StoredMessage:
                    # UNIQ_KEY is never a header (SYSTEM_PROPERTY_NAMES): messages that differ only in it share frames
                    key = (without_unique_key(message.properties_bytes()), topic)
                    found = rendered.get(key)
                    if found is None:
                        found = render(message, topic)
                        if len(rendered) >= _RENDERED_MAX:
                            rendered.clear()
                        rendered[key] = found
                else:
                    found = render(message, topic)
                expiring, frames, names, content = found
                if (drops or expiring) and self._dropped(state, delivery, no_ack):
                    continue
                if quorum:  # x-delivery-count: how often it came back, on every delivery
                    frames = codec.Deliveries(number, tag_bytes, names, self._counted(state, message, content))
                frames.frames_into(parts, add(source, delivery.tag, message, no_ack),
                                   delivery.redelivered or message.reconsume_times > 0, message.body, frame_max)
                sent += 1
                size += len(message.body)
            if parts:
                write_now(b"".join(parts))
                traffic.messages_out += sent
                traffic.bytes_out += size
        return deliver

    @staticmethod
    def _counted(state: QueueState, message: MessageExt, properties: bytes) -> bytes:
        """A quorum queue's delivery properties with x-delivery-count (its returns so far)."""
        returns = state.returns.get((message.topic, message.queue_id, message.queue_offset), 0)
        return with_long_header(properties, "x-delivery-count", returns)

    def content_properties(self, props: dict[str, str]) -> bytes:
        return encode_properties(props, self._tag_header)

    def queue_deleted(self, consumer: Consumer) -> None:
        """consumer_cancel_notify: the server cancels consumers of a deleted queue."""
        channel = consumer.channel
        if channel.consumers.pop(consumer.tag, None) is None:
            return
        consumer.subscriber = None
        session = self.session
        if session.client_capabilities.get("consumer_cancel_notify") and session.channels.get(channel.number) is channel:
            session.send(channel.number, Basic.Cancel(consumer.tag, nowait=True))

    async def basic_cancel(self, channel: Channel, method: Basic.Cancel) -> None:
        consumer = channel.consumers.pop(method.consumer_tag, None)
        if consumer is not None:
            consumer.cancelled = True
            state = self.vhost.queues.get(consumer.queue)
            if state is not None:
                state.exclusive_consumer = False
            # its unacknowledged deliveries stay on the channel, as RabbitMQ leaves them
            # (Celery's warm shutdown: cancel, finish the running tasks, ack them, close)
            await self._drop_consumer(consumer, keep_unacked=True)
        if not method.nowait:
            self.session.send(channel.number, Basic.CancelOk(method.consumer_tag))

    async def release(self, channel: Channel) -> None:
        """A closed channel: cancel its consumers; its unacked deliveries go back, redelivered."""
        self.vhost.direct_replies.forget(channel)
        taken = self._returned(channel.take_all())  # before the groups take theirs back
        consumers = list(channel.consumers.values())
        channel.consumers.clear()
        for consumer in consumers:
            await self._drop_consumer(consumer)
        for group, tags in group_tags(taken).items():
            await group.nack(tags, requeue=True)

    async def _drop_consumer(self, consumer: Consumer, keep_unacked: bool = False) -> None:
        state = self.vhost.queues.get(consumer.queue)
        if consumer.subscriber is not None and state is not None:
            state.consumers.discard(consumer)
            await state.group.unsubscribe(consumer.subscriber, keep_unacked=keep_unacked)
            await self.vhost.consumer_gone(consumer.queue)

    # ---------------------------------------------------------------- queue arguments
    def _dropped(self, state: QueueState, delivery: Any, auto_ack: bool) -> bool:
        """A delivery the queue's TTL, max length or delivery limit refuses: acknowledged at
        once (the group holds it as unacknowledged before `deliver` is called), so a consumer
        cancelled right after cannot have it requeued, then dead-lettered (RabbitMQ's
        dead-lettering is at most once too) or dropped."""
        message = delivery.message
        key = (message.topic, message.queue_id, message.queue_offset)
        returns = state.returns.get(key, 0) if state.returns else 0
        reason = state.policy.drop_reason(message, state.group.message_count, now_ms(), returns,
                                          consumer=delivery.subscriber is not None)
        cycle = reason is None and cycles(message, state.entity.name)  # dropped, not dead-lettered
        if reason is None and not cycle:
            return False
        if returns:
            del state.returns[key]
        if not auto_ack:
            state.group.ack([delivery.tag])
        if reason is not None:
            self._dead_letter(state, [message], reason)
        return True

    def _dead_letter(self, state: QueueState, messages: list[MessageExt], reason: str) -> None:
        """Copies to the queue's dead-letter exchange, as RabbitMQ makes them (`dead_letter`)."""
        self.vhost.dead_letters.send(state, messages, reason)

    # ---------------------------------------------------------------- get
    async def basic_get(self, channel: Channel, method: Basic.Get) -> None:
        session = self.session
        session.consumes = True
        name = channel.queue_named(method.queue)
        state = self.vhost.queue(name, session, use=True)
        require(session.account, name, SUB)
        session.note_group(state.group.name)
        self.vhost.limits.enforce(state)
        while True:  # bounded by the queue's messages: each one is dropped or handed out
            delivery = await state.group.get(auto_ack=method.no_ack)
            if delivery is None:
                session.send(channel.number, Basic.GetEmpty())
                return
            props = delivery.message.properties
            if not ((state.policy.drops or "expiration" in props) and self._dropped(state, delivery, method.no_ack)):
                break
        message = delivery.message
        traffic = session.front_end.traffic
        traffic.messages_out += 1
        traffic.bytes_out += len(message.body)
        tag = channel.add_delivery(Source(state.group, name), delivery.tag, message, method.no_ack)
        exchange = props.get(PROPERTY_RETRY_TOPIC, message.topic)
        session.write(codec.get_ok_frame(channel.number, tag, delivery.redelivered or message.reconsume_times > 0,
                                         codec.shortstr_of(self.vhost.exchange_name(exchange, name, props))[1:],
                                         codec.shortstr_of(props.get("TAGS", ""))[1:],
                                         min(state.group.message_count, 0xFFFFFFFF)),
                      *codec.content_frames(channel.number, self._counted(state, message, self.content_properties(props))
                                            if state.policy.queue_type == QUORUM else self.content_properties(props),
                                            message.body, session.conn.frame_max))

    # ---------------------------------------------------------------- ack, nack, reject, recover
    def basic_ack(self, channel: Channel, method: Basic.Ack) -> None:
        if channel.tx:
            channel.tx_answers.append((method.delivery_tag, method.multiple, None))
            return
        self.ack(channel.take(method.delivery_tag, method.multiple))

    def ack(self, taken: list[Unacked]) -> None:
        """Acknowledge deliveries taken off their channel; their returns stop counting."""
        for group, tags in group_tags(taken).items():
            group.ack(tags)
        queues = self.vhost.queues
        for source in sources(taken):
            state = queues.get(source.queue)
            if state is not None and state.returns:
                for entry_source, _, message in taken:
                    if entry_source is source:
                        state.returns.pop((message.topic, message.queue_id, message.queue_offset), None)

    def _returned(self, taken: list[Unacked]) -> list[Unacked]:
        """Deliveries going back to their queues: each return counted (x-delivery-limit,
        a quorum queue's x-delivery-count); one returned more often than its queue's limit
        leaves at once instead, dead-lettered (reason delivery_limit) or dropped, as RabbitMQ
        does at the return. The others, to requeue."""
        queues = self.vhost.queues
        back = []
        for entry in taken:
            source, group_tag, message = entry
            state = queues.get(source.queue)
            if state is not None and (state.policy.delivery_limit is not None
                                      or state.policy.queue_type == QUORUM):
                key = (message.topic, message.queue_id, message.queue_offset)
                returns = state.returns.get(key, 0) + 1
                limit = state.policy.delivery_limit
                if limit is not None and returns > limit:
                    state.returns.pop(key, None)
                    source.group.ack([group_tag])
                    self._dead_letter(state, [message], DELIVERY_LIMIT)
                    continue
                state.returns[key] = returns
            back.append(entry)
        return back

    async def _nack(self, channel: Channel, tag: int, multiple: bool, requeue: bool) -> None:
        if channel.tx:
            channel.tx_answers.append((tag, multiple, requeue))
            return
        await self.settle_nack(channel.take(tag, multiple), requeue)

    async def settle_nack(self, taken: list[Unacked], requeue: bool) -> None:
        """Requeue (redelivered), or without requeue: to the queue's dead-letter exchange
        when it has one, else straight to the group's ``%DLQ%`` topic (RabbitMQ would drop)."""
        if requeue:
            for group, tags in group_tags(self._returned(taken)).items():
                await group.nack(tags, requeue=True)
            return
        for source, group_tag, message in taken:
            state = self.vhost.queues.get(source.queue)
            if state is not None and state.policy.dead_letter_exchange is not None:
                self._dead_letter(state, [message], REJECTED)
                source.group.ack([group_tag])
            else:
                await source.group.nack([group_tag], requeue=False, delay_level=-1)

    async def basic_nack(self, channel: Channel, method: Basic.Nack) -> None:
        await self._nack(channel, method.delivery_tag, method.multiple, method.requeue)

    async def basic_reject(self, channel: Channel, method: Basic.Reject) -> None:
        await self._nack(channel, method.delivery_tag, False, method.requeue)

    async def basic_recover(self, channel: Channel, method: Any) -> None:
        await self.settle_nack(channel.take_all(), True)
        if isinstance(method, Basic.Recover):
            self.session.send(channel.number, Basic.RecoverOk())


def _consumer_priority(arguments: dict[str, Any] | None) -> int:
    """basic.consume's x-priority (RabbitMQ's consumer priorities): an integer, else 406."""
    value = (arguments or {}).get("x-priority", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ChannelError(Reply.PRECONDITION_FAILED, f"invalid arg 'x-priority' for consumer: {value!r}")
    return value
