"""One AMQP 0-9-1 client connection: bytes in through the sans-IO connection, frames out.

The transport of the AMQP front-end, as `protocols/remoting` and `protocols/kafka` have
theirs: `AmqpServerConnection` frames the bytes; this session keeps the connection's state
(the handshake and its login, heart-beats, the close handshake) and its channels, and hands
each channel method to the handlers of its role, which turn it into vhost and Broker-facade
calls: `publish` (basic.publish, confirms, returns), `deliver` (consumers, get, acks,
dead-lettering), `declare` (exchanges and queues), `tx`; `access` checks the login and the
permissions. Methods of one channel run in order: a method that waits (a transaction
commit, a get, a queue delete) holds the ones after it on its channel, not other channels'.
A publish does not wait in line (see `publish`); the publishes of one read are stored
before any other method runs. Frames queued within one loop iteration leave in one
``writelines``, the channels' due confirms first. A channel error closes its channel only;
a connection error, a protocol violation or a bug of ours closes this connection only
(logged), never the broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from time import perf_counter
from typing import TYPE_CHECKING, Any

from pamqp.base import Frame
from pamqp.commands import Channel as ChannelMethods

from rocketport.core.auth.plain_acl import Account
from rocketport.core.errors import BrokerError

from .. import eager
from ..session_base import Buffer, Pausable, Session
from ..tls import certificate_name
from . import codec
from .access import EXTERNAL, MECHANISMS, SERVER_PROPERTIES, LoginRefused
from .channel import Channel, MethodHandler
from .connection import OPEN, AmqpServerConnection
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
from .publish import MAX_PUTS_IN_FLIGHT, PublishHandlers
from .tx import TxHandlers

if TYPE_CHECKING:
    from .frontend import AmqpFrontEnd

log = logging.getLogger(__name__)


class AmqpSession(Session):
    """One client connection: its state and channels; each channel method goes to the
    handlers of its role (the session's ``publisher`` and ``deliver``, and the declare and
    tx handlers), which answer through `send`, `write` and `write_now`."""

    def __init__(self, front_end: AmqpFrontEnd, on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None) -> None:
        super().__init__(on_open, on_closed)
        self.front_end = front_end
        self.broker = front_end.broker
        self.vhost = front_end.vhost
        config = self.broker.config
        self.conn = AmqpServerConnection(heartbeat=front_end.heartbeat, max_body=config.message_size_of(config.amqp))
        self.channels: dict[int, Channel] = {}
        self.account: Account | None = None
        self._certificate_name: str | None = None  # a verified client certificate's CN (EXTERNAL)
        self.client_capabilities: dict[str, Any] = {}
        self._closing = False
        self._heartbeat_timer: asyncio.TimerHandle | None = None
        self._read_at = 0.0  # perf_counter() when this read came, while latency is recorded
        self.publisher = PublishHandlers(self)
        self.deliver = DeliverHandlers(self)
        self._handlers: dict[type, MethodHandler] = {
            ChannelMethods.Close: self._channel_close, ChannelMethods.Flow: self._channel_flow,
            ChannelMethods.FlowOk: lambda ch, m: None,
        }
        for role in (self.publisher, self.deliver, DeclareHandlers(self), TxHandlers(self, self.deliver)):
            self._handlers.update(role.table)

    # ================================================================ transport
    @property
    def in_flight(self) -> int:
        """Puts running, and consumers: a connection that only receives deliveries (no_ack,
        heartbeats off) is busy, not idle, for the listener's idle sweep."""
        return self.publisher.puts + sum(len(channel.consumers) for channel in self.channels.values())

    def _busy(self) -> bool:
        return self.publisher.puts >= MAX_PUTS_IN_FLIGHT

    def data_received(self, data: bytes) -> None:
        if self._closing and self.conn.state == "closed":
            return
        traffic = self.front_end.traffic  # /metrics: publishes received, as RabbitMQ counts them
        if traffic.latency is not None:
            self._read_at = perf_counter()
        events = self.conn.receive_data(data)
        self._note_input(bool(events), self.conn.buffered > 0)
        channels, publisher = self.channels, self.publisher
        for event in events:
            try:
                if type(event) is ContentReceived:  # the publish path, without the dispatch
                    bodies = event.bodies
                    size = sum(map(len, bodies))
                    traffic.messages_in += len(bodies)
                    traffic.bytes_in += size
                    if traffic.sizes is not None and bodies:
                        traffic.sizes.observe_batch(size, len(bodies))
                    self.produces = True
                    channel = channels.get(event.channel)
                    if channel is not None and channel.busy is None:
                        try:
                            publisher.publish(channel, event)
                        except Exception as exc:  # noqa: BLE001 - mapped to the protocol's answer
                            self.failed(channel, event, exc)
                        continue
                elif publisher.pending:
                    publisher.store_pending()
                self._event(event)
            except Exception:
                log.exception("AMQP connection from %s:%d failed; closing it", *self.peer)
                self._close_connection(Reply.INTERNAL_ERROR, "INTERNAL_ERROR")
                break
        if publisher.pending:
            publisher.store_pending()
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
        if self.publisher.dirty_confirms:
            self.publisher.confirms_into(self._out)
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
            self._on_channel(event.channel, self.publisher.publish, event)
        elif kind is MethodReceived:
            self._method(event.channel, event.method)
        elif kind is HeaderReceived:
            self._certificate_name = certificate_name(self.transport)
            self._emit(self.conn.send_start(SERVER_PROPERTIES, MECHANISMS if self._certificate_name is None
                                            else f"{EXTERNAL} {MECHANISMS}"))
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
            self._on_channel(event.channel, self.publisher.too_large, event)
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
            self.account = self.front_end.logins.login(event.mechanism, event.response, self.peer[0],
                                                       self._certificate_name)
        except LoginRefused as exc:
            log.info("AMQP client %s:%d: login refused: %s", *self.peer, exc)
            self._close_connection(Reply.ACCESS_REFUSED, exc.reply_text, 10, 11)
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

    def _on_channel(self, number: int, handler: MethodHandler, arg: Any) -> None:
        channel = self.channels.get(number)
        if channel is None:
            self._close_connection(Reply.CHANNEL_ERROR, f"CHANNEL_ERROR - expected 'channel.open' on "
                                   f"channel {number}")
            return
        if channel.busy is not None:
            channel.backlog.append((handler, arg))
            return
        self._run(channel, handler, arg)

    def _run(self, channel: Channel, handler: MethodHandler, arg: Any) -> None:
        started = self._read_at
        try:
            result = handler(channel, arg)
        except Exception as exc:  # noqa: BLE001 - mapped to the protocol's answer
            self.failed(channel, arg, exc)
            self._timed(arg, started)
            return
        if result is None:
            self._timed(arg, started)
            return
        outcome = eager.start(result)
        if type(outcome) is eager.Done:
            try:
                outcome.result()
            except Exception as exc:  # noqa: BLE001
                self.failed(channel, arg, exc)
            self._timed(arg, started)
            return
        channel.busy = outcome
        outcome.add_done_callback(lambda task: self._resume(channel, task, arg, started))

    def _timed(self, arg: Any, started: float) -> None:
        """A method answered (or refused), timed from the read it came in, by its name
        (rocketmq_rpc_latency's request_code: queue.declare, basic.get...); publishes are not
        requests (their confirms are the store's)."""
        if started and type(arg) is not ContentReceived:
            latency = self.front_end.traffic.latency
            if latency is not None:
                latency.observe(arg.name.lower(), (perf_counter() - started) * 1000)

    def _resume(self, channel: Channel, task: asyncio.Future, arg: Any, started: float) -> None:
        channel.busy = None
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.failed(channel, arg, exc)
        self._timed(arg, started)
        publisher = self.publisher
        while channel.backlog and channel.busy is None and self.channels.get(channel.number) is channel:
            handler, next_arg = channel.backlog.popleft()
            if publisher.pending and handler != publisher.publish:
                publisher.store_pending()
            self._run(channel, handler, next_arg)
        if publisher.pending:
            publisher.store_pending()
        self._flush()

    def failed(self, channel: Channel, arg: Any, exc: BaseException) -> None:
        """A method's (or a publish's) error as the protocol answers it: a channel error
        closes the channel, a connection error or a bug of ours the connection."""
        method = arg.method if isinstance(arg, ContentReceived) else arg
        index = getattr(method, "index", None)
        class_id, method_id = divmod(index, 1 << 16) if isinstance(index, int) else (0, 0)
        if isinstance(exc, OSError):
            log.warning("AMQP %s from %s:%d refused with RESOURCE_ERROR: %s",
                        getattr(method, "name", method), *self.peer, exc)
        if isinstance(exc, (BrokerError, OSError)):  # OSError: a limit or fault of the store's
            exc = channel_error(exc)  # files (EMFILE, EIO...), retriable: the connection stays
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

    def puts_settled(self) -> None:
        """Puts finished: their confirms leave with this iteration's write, and reading
        resumes if it paused at the in-flight bound."""
        self._flush_soon()
        self._update_reading()
