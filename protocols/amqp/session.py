"""One AMQP 0-9-1 client connection: connection events to vhost and Broker-facade calls.

The sans-IO `AmqpServerConnection` frames the bytes; this session logs the client in
(`access`), serves the channel methods (the exchange and queue classes in `declare`, the
consuming ones in `deliver`, the tx class in `tx`), and writes. Methods of one channel run
in order: a method that waits (a transaction commit, a get, a queue delete) holds the ones
after it on its channel, not other channels'. A publish does not wait in line: its put
starts at once (so stores keep publish order) and its confirm goes out when the store has
it (under SYNC_FLUSH after the fsync); confirms of publishes stored together leave as one
ack with ``multiple``. The codec hands over runs of publishes alike (a pipelining
publisher's read): a run is routed once (remembered until the vhost's declarations
change) and stored with one `Broker.put_plain` (under SYNC_FLUSH its confirms wait for the
one fsync it hands back; without confirms nothing waits). Frames written within one loop
iteration leave in one ``writelines``. A channel error closes its channel only; a
connection error, a protocol violation or a bug of ours closes this connection only
(logged), never the broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pamqp.base import Frame
from pamqp.commands import Basic
from pamqp.commands import Channel as ChannelMethods
from pamqp.commands import Confirm, Connection

from rocketport.common.message import PROPERTY_DEDUP_KEY, PROPERTY_TRANSACTION_PREPARED, Message
from rocketport.common.message import encode_properties as encode_stored  # not the content header's
from rocketport.core.auth.plain_acl import PUB, Account, AclError
from rocketport.core.errors import BrokerError, StoreUnavailable
from rocketport.core.facade.types import PlainSend, needs_schedule, now_ms

from .. import eager
from ..session_base import Buffer, Pausable, Session
from . import codec
from .access import MECHANISMS, SERVER_PROPERTIES, login, require
from .channel import Channel
from .connection import OPEN, AmqpServerConnection, shortstr_text
from .declare import DeclareHandlers
from .deliver import DeliverHandlers
from .errors import ChannelError, ConnectionError_, Reply, channel_error
from .events import (
    ChannelCloseOkReceived,
    CloseOkReceived,
    CloseReceived,
    ConnectionFailed,
    ContentReceived,
    ContentTooLarge,
    HeaderMismatch,
    HeaderReceived,
    MethodReceived,
    OpenReceived,
    StartOkReceived,
)
from .properties import DEFAULT_EXCHANGE_MARK, X_DELAY, encode_properties, to_message_properties
from .tx import TxHandlers
from .vhost import DEFAULT_EXCHANGE

if TYPE_CHECKING:
    from .frontend import AmqpFrontEnd

log = logging.getLogger(__name__)

MAX_PUTS_IN_FLIGHT = 4096  # per connection: reading pauses above it
# a publish not stored yet: (channel, publish sequence, body, message properties)
_Gathered = tuple[Channel, int, bytes, dict[str, str]]
_ROUTES_MAX = 1024  # distinct (exchange, routing key, content header) remembered per connection
# properties the core must see on a message of its own (`Broker.put_messages` refuses a
# transaction in a run; a dedup key is checked per message)
_ALONE = frozenset((PROPERTY_DEDUP_KEY, PROPERTY_TRANSACTION_PREPARED))

class AmqpSession(Session):
    def __init__(self, front_end: AmqpFrontEnd, on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None) -> None:
        super().__init__(on_open, on_closed)
        self.front_end = front_end
        self.broker = front_end.broker
        self.vhost = front_end.vhost
        config = self.broker.config
        self.conn = AmqpServerConnection(heartbeat=front_end.heartbeat, max_body=config.max_message_size)
        self.channels: dict[int, Channel] = {}
        self.account: Account | None = None
        self.client_capabilities: dict[str, Any] = {}
        self._puts = 0  # puts gathered or running
        # publishes of this read not stored yet, by topic
        self._gathered: dict[str, list[_Gathered]] = {}
        self._tag_header = config.kafka_tag_header
        self._run_bytes = config.max_message_size // 2  # bytes of one gathered run, at most
        self._routes: dict[tuple[str, str, int], _Route] = {}
        self._dirty_confirms: set[Channel] = set()
        self._closing = False
        self._heartbeat_timer: asyncio.TimerHandle | None = None
        self._blocked = False
        self._handlers: dict[type, Callable[[Channel, Any], Any]] = {
            ChannelMethods.Close: self._channel_close, ChannelMethods.Flow: self._channel_flow,
            ChannelMethods.FlowOk: lambda ch, m: None,
            Confirm.Select: self._confirm_select,
        }
        self.deliver = DeliverHandlers(self)
        for role in (self.deliver, DeclareHandlers(self), TxHandlers(self, self.deliver)):
            self._handlers.update(role.table)

    # ================================================================ transport
    @property
    def in_flight(self) -> int:
        """Puts running, and consumers: a connection that only receives deliveries (no_ack,
        heartbeats off) is busy, not idle, for the listener's idle sweep."""
        return self._puts + sum(len(channel.consumers) for channel in self.channels.values())

    def _busy(self) -> bool:
        return self._puts >= MAX_PUTS_IN_FLIGHT

    def data_received(self, data: bytes) -> None:
        if self._closing and self.conn.state == "closed":
            return
        events = self.conn.receive_data(data)
        self._note_input(bool(events), self.conn.buffered > 0)
        channels = self.channels
        for event in events:
            try:
                if type(event) is ContentReceived:  # the publish path, without the dispatch
                    channel = channels.get(event.channel)
                    if channel is not None and channel.busy is None:
                        try:
                            self._publish(channel, event)
                        except Exception as exc:  # noqa: BLE001 - mapped to the protocol's answer
                            self._failed(channel, event, exc)
                        continue
                elif self._gathered:
                    self._store_gathered()
                self._event(event)
            except Exception:
                log.exception("AMQP connection from %s:%d failed; closing it", *self.peer)
                self._close_connection(Reply.INTERNAL_ERROR, "INTERNAL_ERROR")
                break
        if self._gathered:
            self._store_gathered()
        self._flush()
        self._update_reading()

    def _subscribers(self) -> Iterator[Pausable]:
        """Consumers that may deliver: not cancelled, on a channel not stopped by flow."""
        for channel in self.channels.values():
            if channel.active:
                for consumer in channel.consumers.values():
                    if consumer.subscriber is not None and not consumer.cancelled:
                        yield consumer.subscriber

    def _flush(self) -> None:
        """Write what is queued, the channels' due publisher confirms first."""
        if self._dirty_confirms:
            out = self._out
            for channel in self._dirty_confirms:
                for ack, tag, multiple in channel.due_confirms():
                    method = Basic.Ack(tag, multiple) if ack else Basic.Nack(tag, multiple, requeue=False)
                    out.append(codec.method_frame(channel.number, method))
            self._dirty_confirms.clear()
        super()._flush()

    def close(self) -> None:
        """The broker closes this connection (shutdown, idle sweep): connection.close 320
        CONNECTION_FORCED first, as RabbitMQ says it, so the client knows why."""
        if self.transport is not None and not self._closing and self.conn.state == OPEN:
            self._closing = True
            self._emit(self.conn.close(Reply.CONNECTION_FORCED, "CONNECTION_FORCED - broker closed the connection"))
            self._flush()
        super().close()

    def _closed_hook(self) -> None:
        self._closing = True
        if self._heartbeat_timer is not None:
            self._heartbeat_timer.cancel()
        channels = list(self.channels.values())
        self.channels.clear()
        self.front_end.spawn(self._release(channels), f"amqp-release-{self.peer[0]}:{self.peer[1]}")

    async def _release(self, channels: list[Channel]) -> None:
        """What a closed connection held: consumers, unacked deliveries, exclusive queues."""
        for channel in channels:
            await self.deliver.release(channel)
        await self.vhost.connection_closed(self)

    # ================================================================ connection events
    def _event(self, event: Any) -> None:
        kind = type(event)
        if kind is ContentReceived:
            self._on_channel(event.channel, self._publish, event)
        elif kind is MethodReceived:
            self._method(event.channel, event.method)
        elif kind is HeaderReceived:
            self._emit(self.conn.send_start(SERVER_PROPERTIES, MECHANISMS))
        elif kind is StartOkReceived:
            self._start_ok(event)
        elif kind is OpenReceived:
            if event.virtual_host not in ("/", ""):
                self._close_connection(Reply.NOT_ALLOWED,
                                       f"NOT_ALLOWED - vhost {event.virtual_host} not found", 10, 40)
                return
            self._emit(self.conn.send_open_ok())
            self._start_heartbeats()
        elif kind is ContentTooLarge:
            self._on_channel(event.channel, self._too_large, event)
        elif kind is ChannelCloseOkReceived:
            self.channels.pop(event.channel, None)
        elif kind is CloseReceived:
            self._emit(self.conn.send_close_ok())
            self._flush()
            self._closing = True
            if self.transport is not None:
                self.transport.close()
        elif kind is CloseOkReceived:
            self._closing = True
            if self.transport is not None:
                self.transport.close()
        elif kind is HeaderMismatch:
            self._emit(codec.PROTOCOL_HEADER)
            self._flush()
            self._closing = True
            if self.transport is not None:
                self.transport.close()
        elif kind is ConnectionFailed:
            log.info("AMQP client %s:%d: %s; closing the connection", *self.peer, event.text)
            self._close_connection(event.code, event.text, event.class_id, event.method_id)

    def _close_connection(self, code: int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        """Our connection.close; the transport closes at the client's close-ok (or its timeout)."""
        if self._closing:
            return
        self._closing = True
        self._emit(self.conn.close(code, text, class_id, method_id))
        self._flush()
        self._loop.call_later(5.0, self.close)  # a client that never answers close-ok

    def _start_ok(self, event: StartOkReceived) -> None:
        capabilities = event.client_properties.get("capabilities")
        self.client_capabilities = dict(capabilities) if isinstance(capabilities, dict) else {}
        try:
            self.account = login(self.front_end.acl, event.mechanism, event.response)
        except AclError as exc:
            log.info("AMQP client %s:%d: %s", *self.peer, exc)
            self._close_connection(Reply.ACCESS_REFUSED, f"ACCESS_REFUSED - {exc}", 10, 11)
            return
        self._emit(self.conn.send_tune())

    def _start_heartbeats(self) -> None:
        interval = self.conn.heartbeat
        if interval > 0:
            self._heartbeat_timer = self._loop.call_later(interval / 2, self._heartbeat)

    def _heartbeat(self) -> None:
        """Send a heartbeat when we have been silent; close after two missed client intervals."""
        interval = self.conn.heartbeat
        now = self._loop.time()
        if now - self.last_input > 2 * interval:
            log.info("AMQP client %s:%d missed its heartbeats; closing", *self.peer)
            self.abort()
            return
        if now - self._last_output >= interval / 2:
            self._emit(codec.HEARTBEAT_FRAME)
        self._heartbeat_timer = self._loop.call_later(interval / 2, self._heartbeat)

    # ================================================================ channel methods
    def _method(self, number: int, method: Frame) -> None:
        if isinstance(method, ChannelMethods.Open):
            if number in self.channels:
                self._close_connection(Reply.CHANNEL_ERROR, f"CHANNEL_ERROR - channel {number} already open",
                                       20, 10)
                return
            self.channels[number] = Channel(number)
            self._emit(self.conn.send_method(number, ChannelMethods.OpenOk()))
            return
        handler = self._handlers.get(type(method))
        if handler is None:
            class_id, method_id = divmod(method.index, 1 << 16)
            self._close_connection(Reply.COMMAND_INVALID, f"COMMAND_INVALID - {method.name} is "
                                   "not a method a client sends", class_id, method_id)
            return
        self._on_channel(number, handler, method)

    def _on_channel(self, number: int, handler: Callable[[Channel, Any], Any], arg: Any) -> None:
        channel = self.channels.get(number)
        if channel is None:
            self._close_connection(Reply.CHANNEL_ERROR, f"CHANNEL_ERROR - expected 'channel.open' on "
                                   f"channel {number}")
            return
        if channel.busy is not None:
            channel.backlog.append((handler, arg))
            return
        self._run(channel, handler, arg)

    def _run(self, channel: Channel, handler: Callable[[Channel, Any], Any], arg: Any) -> None:
        try:
            result = handler(channel, arg)
        except Exception as exc:  # noqa: BLE001 - mapped to the protocol's answer
            self._failed(channel, arg, exc)
            return
        if result is None:
            return
        outcome = eager.start(result)
        if type(outcome) is eager.Done:
            try:
                outcome.result()
            except Exception as exc:  # noqa: BLE001
                self._failed(channel, arg, exc)
            return
        channel.busy = outcome
        outcome.add_done_callback(lambda task: self._resume(channel, task, arg))

    def _resume(self, channel: Channel, task: asyncio.Future, arg: Any) -> None:
        channel.busy = None
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._failed(channel, arg, exc)
        while channel.backlog and channel.busy is None and self.channels.get(channel.number) is channel:
            handler, next_arg = channel.backlog.popleft()
            if self._gathered and handler != self._publish:
                self._store_gathered()
            self._run(channel, handler, next_arg)
        if self._gathered:
            self._store_gathered()
        self._flush()

    def _failed(self, channel: Channel, arg: Any, exc: BaseException) -> None:
        method = arg.method if isinstance(arg, ContentReceived) else arg
        index = getattr(method, "index", None)
        class_id, method_id = divmod(index, 1 << 16) if isinstance(index, int) else (0, 0)
        if isinstance(exc, BrokerError):
            exc = channel_error(exc)
        if isinstance(exc, ChannelError):
            log.debug("AMQP client %s:%d channel %d: %s", *self.peer, channel.number, exc.text)
            self._close_channel(channel, exc.code, exc.text, class_id, method_id)
        elif isinstance(exc, ConnectionError_):
            self._close_connection(exc.code, exc.text, class_id, method_id)
        else:
            log.error("AMQP %s from %s:%d failed; closing the connection", getattr(method, "name", method),
                      *self.peer, exc_info=exc)
            self._close_connection(Reply.INTERNAL_ERROR, "INTERNAL_ERROR", class_id, method_id)

    def _close_channel(self, channel: Channel, code: int, text: str, class_id: int, method_id: int) -> None:
        """A channel error: channel.close to the client; the channel is freed at its close-ok."""
        if self.channels.get(channel.number) is not channel:
            return
        self._emit(self.conn.close_channel(channel.number, code, text, class_id, method_id))
        channel.backlog.clear()
        channel.active = False
        self.front_end.spawn(self.deliver.release(channel), f"amqp-channel-close-{channel.number}")

    # ---------------------------------------------------------------- channel class
    async def _channel_close(self, channel: Channel, method: ChannelMethods.Close) -> None:
        self.channels.pop(channel.number, None)
        self.conn.forget_channel(channel.number)
        await self.deliver.release(channel)
        self._emit(self.conn.send_method(channel.number, ChannelMethods.CloseOk()))

    def _channel_flow(self, channel: Channel, method: ChannelMethods.Flow) -> None:
        channel.active = method.active
        for consumer in channel.consumers.values():
            if consumer.subscriber is not None and not consumer.cancelled:
                if method.active:
                    consumer.subscriber.resume()
                else:
                    consumer.subscriber.pause()
        self._emit(self.conn.send_method(channel.number, ChannelMethods.FlowOk(method.active)))

    # ---------------------------------------------------------------- basic: publish
    def _publish(self, channel: Channel, event: ContentReceived) -> None:
        """A run of publishes alike: routed once; stored at once with one `Broker.put_plain`
        (no coroutine, no Message objects), else gathered for `_store_gathered`."""
        method = event.method
        exchange, routing_key = method.exchange, method.routing_key
        route = self._route(exchange, routing_key, event.properties)
        topic = route.topic
        if topic is not None:
            require(self.account, topic, PUB)
        bodies = event.bodies
        if not route.routed and (topic is None or method.mandatory):
            for body in bodies:
                seq = channel.next_publish()
                if method.mandatory:
                    self._emit(self.conn.send_method(channel.number, Basic.Return(
                        Reply.NO_ROUTE, "NO_ROUTE", shortstr_text(exchange), shortstr_text(routing_key))))
                    self._out.extend(codec.content_frames(channel.number, encode_properties(
                        route.properties, self._tag_header), body, self.conn.frame_max))
                self._confirm(channel, seq, True)
            return
        properties = route.properties
        if channel.tx:
            for body in bodies:
                channel.next_publish()
                channel.tx_publishes.append(Message(topic, body, dict(properties), born_host=self.peer))
            return
        if self._store_run(channel, route, bodies):  # type: ignore[arg-type]
            return
        self._puts += len(bodies)
        batch = self._gathered.get(topic)  # type: ignore[arg-type]
        if batch is None:
            batch = self._gathered[topic] = []  # type: ignore[index]
        for body in bodies:
            batch.append((channel, channel.next_publish(), body, properties))

    def _route(self, exchange: str, routing_key: str, basic: dict[str, Any]) -> _Route:
        """Where publishes with this exchange, routing key and content-header properties go
        and what they store, remembered until the vhost's declarations change (the codec
        shares one properties dict per distinct header: identity is part of the key, the
        entry keeps it alive; a publisher's messages mostly look alike)."""
        key = (exchange, routing_key, id(basic))
        vhost = self.vhost
        found = self._routes.get(key)
        if found is not None and found.basic is basic and found.generation == vhost.generation:
            return found
        topic = vhost.publish_topic(exchange, routing_key)
        properties = to_message_properties(basic, routing_key, now_ms())
        routed = topic is not None and (exchange == DEFAULT_EXCHANGE
                                        or vhost.router.routed(exchange, routing_key, properties))
        if vhost.needs_mark(exchange, routing_key):
            properties[DEFAULT_EXCHANGE_MARK] = "1"
        route = _Route(basic, vhost.generation, topic, properties, routed, encode_stored(properties))
        headers = basic.get("headers") if basic else None
        if not (headers and X_DELAY in headers):  # a delay is relative to now
            if len(self._routes) >= _ROUTES_MAX:
                self._routes.clear()
            self._routes[key] = route
        return route

    def _store_run(self, channel: Channel, route: _Route, bodies: list[bytes]) -> bool:
        """Store a run through the core's plain-send lane (`Broker.put_plain`, one send of
        many bodies) and settle its confirms (under SYNC_FLUSH once `PlainPut.durable` says
        it is on disk: one fsync for the run; a channel without confirms asks for none);
        False when the broker wants it put another way (a delay, a transaction or dedup
        property, dispatchAfterFlush: the gathered puts below, batched across runs)."""
        topic = route.topic
        accepted = self.broker.accept_now(topic, -1, route.encoded, 0,  # type: ignore[arg-type]
                                          answers_after_durable=True)
        if accepted is None:
            return False
        if self._gathered:  # stored in publish order
            self._store_gathered()
        put = self.broker.put_plain([PlainSend(topic, accepted[0], route.encoded, bodies,  # type: ignore[arg-type]
                                               self.peer, accepted[1])], durable=channel.confirm)
        refused = put.stored[0]
        if type(refused) is not tuple:  # refused as a whole
            for _ in bodies:
                self._settle(channel, channel.next_publish(), refused)
            return True
        durable = put.durable
        if durable is not None:  # SYNC_FLUSH: the confirms wait for the fsync
            entries: list[_Gathered] = [(channel, channel.next_publish(), body, route.properties)
                                        for body in bodies]
            self._puts += len(entries)
            durable.add_done_callback(lambda done: self._put_done(entries, done))
            return True
        channel.stored_at_once(len(bodies))
        self._stored(None)
        if channel.confirm:
            self._dirty_confirms.add(channel)
        return True

    def _store_gathered(self) -> None:
        """Store the publishes gathered since the last call, in order: runs of plain
        messages of one topic with one append each (`Broker.put_messages`: a pipelining
        publisher's read holds many, and the append's fixed costs are paid once per run),
        one put each for those the core must treat one by one (a delay, a transaction or
        dedup property, a large body). Called before any other method runs, so a method
        after a publish sees it stored in order."""
        gathered, self._gathered = self._gathered, {}
        cap = self._run_bytes
        last, gatherable, overhead = None, False, 0  # publishes mostly repeat one properties object
        for topic, entries in gathered.items():
            run: list[_Gathered] = []
            room = cap
            for entry in entries:
                body, props = entry[2], entry[3]
                if props is not last:
                    last, gatherable = props, _gatherable(props)
                    # a record's bytes beyond its body, at most (4 bytes a character)
                    overhead = 64 + 4 * sum(len(k) + len(v) + 2 for k, v in props.items())
                size = len(body) + overhead
                alone = size > cap or not gatherable
                if run and (alone or size > room):
                    self._put_run(topic, run)
                    run, room = [], cap
                if alone:
                    self._put_run(topic, [entry])
                else:
                    run.append(entry)
                    room -= size
            if run:
                self._put_run(topic, run)

    def _put_run(self, topic: str, run: list[_Gathered]) -> None:
        """One message, or a run in one append; plain records either way (a run stored as
        one inner batch costs less to write and several times more to read per message).
        The core may rewrite a message's properties: each gets a copy."""
        peer = self.peer
        if len(run) == 1:
            _, _, body, props = run[0]
            self._start_put(run, self.broker.put_message(Message(topic, body, dict(props), born_host=peer)))
        else:
            self._start_put(run, self.broker.put_messages(
                [Message(topic, body, dict(props), born_host=peer) for _, _, body, props in run]))

    def _start_put(self, entries: list[_Gathered], put: Any) -> None:
        outcome = eager.start(put)
        if type(outcome) is eager.Done:
            self._put_done(entries, outcome)
        else:
            outcome.add_done_callback(lambda task: self._put_done(entries, task))

    def _put_done(self, entries: list[_Gathered], outcome: Any) -> None:
        self._puts -= len(entries)
        error: BaseException | None = None
        try:
            outcome.result()
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - reported to the client below
            error = exc
        for channel, seq, _, _ in entries:
            self._settle(channel, seq, error)
        self._flush_soon()
        self._update_reading()

    def _settle(self, channel: Channel, seq: int, error: BaseException | None) -> None:
        """One publish's outcome: its confirm, or the channel's error when it has none."""
        self._stored(error)
        if error is None:
            self._confirm(channel, seq, True)
        elif channel.confirm:
            self._confirm(channel, seq, False)
        elif self.channels.get(channel.number) is channel and channel.active:
            self._failed(channel, Basic.Publish(), error)

    def _stored(self, error: BaseException | None) -> None:
        """connection.blocked while the store refuses writes, unblocked when it takes them."""
        if error is None:
            if self._blocked:
                self._blocked = False
                if self.client_capabilities.get("connection.blocked"):
                    self._emit(self.conn.send_method(0, Connection.Unblocked()))
        elif isinstance(error, StoreUnavailable) and not self._blocked:
            self._blocked = True
            if self.client_capabilities.get("connection.blocked"):
                self._emit(self.conn.send_method(0, Connection.Blocked(str(error)[:255])))

    def _confirm(self, channel: Channel, seq: int, ok: bool) -> None:
        if channel.confirm:
            channel.settle(seq, ok)
            self._dirty_confirms.add(channel)

    def _too_large(self, channel: Channel, event: ContentTooLarge) -> None:
        raise ChannelError(Reply.PRECONDITION_FAILED, f"message size {event.size} is larger than the "
                           f"configured max size {self.broker.config.max_message_size}")

    def _confirm_select(self, channel: Channel, method: Confirm.Select) -> None:
        if channel.tx:
            raise ChannelError(Reply.PRECONDITION_FAILED, "cannot switch from tx to confirm mode")
        channel.confirm = True
        if not method.nowait:
            self._emit(self.conn.send_method(channel.number, Confirm.SelectOk()))

    # ================================================================ for the handlers
    @property
    def write_paused(self) -> bool:
        """The transport's buffer is over its high-water mark: a new consumer starts paused."""
        return self._write_paused

    def send(self, number: int, method: Frame) -> None:
        """Queue one method frame on a channel (0: the connection) for this iteration's write."""
        self._emit(self.conn.send_method(number, method))

    def write(self, *frames: Buffer) -> None:
        """Queue encoded frames (a method and its content) for this iteration's write."""
        self._emit_all(frames)

    def write_now(self, frames: bytes) -> None:
        """A delivery slice is one write: now, not an iteration later (latency), unless a
        write is already due this iteration (then it joins that one)."""
        self._out.append(frames)
        if not self._flush_due:
            self._flush()

@dataclass(slots=True)
class _Route:
    """Where publishes of one (exchange, routing key, content header) go (`AmqpSession._route`)."""

    basic: dict[str, Any]  # the content header's properties: the key holds its id
    generation: int  # the vhost's, when this was worked out
    topic: str | None  # None: the default exchange names no queue
    properties: dict[str, str]  # as stored; shared, never modified
    routed: bool  # some queue takes it
    encoded: bytes  # ``properties`` as the store writes them


def _gatherable(properties: dict[str, str]) -> bool:
    """Whether a publish may be stored in a run (`Broker.put_messages`)."""
    return not (needs_schedule(properties) or not _ALONE.isdisjoint(properties))

