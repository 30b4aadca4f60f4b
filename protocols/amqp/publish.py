"""The publishing direction: basic.publish routed and stored, confirms, mandatory returns.

A publish does not wait in line behind its channel's methods: its put starts at once (so
stores keep publish order) and its confirm goes out when the store has it (under
SYNC_FLUSH after the fsync); confirms of publishes stored together leave as one ack with
``multiple``. The codec hands over runs of publishes alike (a pipelining publisher's
read): a run is routed once (remembered until the vhost's declarations change) and stored
with one `Broker.put_plain`, the core's plain-send lane (under SYNC_FLUSH its confirms wait
for the one fsync it hands back; without confirms nothing waits). What the lane declines is
gathered per topic and stored in runs when the read ends or another method comes
(`PublishHandlers.store_gathered`). A refused put nacks under confirms, else closes the
channel; a full store also sends connection.blocked. One object per connection; never
touches the transport: frames go out through the session.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pamqp.commands import Basic, Confirm, Connection

from rocketport.common.message import PROPERTY_DEDUP_KEY, PROPERTY_TRANSACTION_PREPARED, Message
from rocketport.common.message import encode_properties as encode_stored  # not the content header's
from rocketport.core.auth.plain_acl import PUB
from rocketport.core.errors import StoreUnavailable
from rocketport.core.facade.types import PlainSend, needs_schedule, now_ms

from .. import eager
from . import codec
from .access import require
from .channel import Channel, MethodHandler
from .connection import shortstr_text
from .errors import ChannelError, Reply
from .events import ContentReceived, ContentTooLarge
from .properties import DEFAULT_EXCHANGE_MARK, X_DELAY, encode_properties, to_message_properties
from .vhost import DEFAULT_EXCHANGE

if TYPE_CHECKING:
    from .session import AmqpSession

MAX_PUTS_IN_FLIGHT = 4096  # per connection: reading pauses above it
# a publish not stored yet: (channel, publish sequence, body, message properties)
_Gathered = tuple[Channel, int, bytes, dict[str, str]]
_ROUTES_MAX = 1024  # distinct (exchange, routing key, content header) remembered per connection
# properties the core must see on a message of its own (`Broker.put_messages` refuses a
# transaction in a run; a dedup key is checked per message)
_ALONE = frozenset((PROPERTY_DEDUP_KEY, PROPERTY_TRANSACTION_PREPARED))


@dataclass(slots=True)
class _Route:
    """Where publishes of one (exchange, routing key, content header) go (`PublishHandlers._route`)."""

    basic: dict[str, Any]  # the content header's properties: the key holds its id
    generation: int  # the vhost's, when this was worked out
    topic: str | None  # None: the default exchange names no queue
    properties: dict[str, str]  # as stored; shared, never modified
    routed: bool  # some queue takes it
    encoded: bytes  # ``properties`` as the store writes them


class PublishHandlers:
    """The publishes of one connection's channels: storing them and settling their confirms."""

    def __init__(self, session: AmqpSession) -> None:
        self.session = session
        self.broker = session.broker
        self.vhost = session.vhost
        config = self.broker.config
        self.puts = 0  # puts gathered or running
        # publishes of this read not stored yet, by topic
        self.gathered: dict[str, list[_Gathered]] = {}
        self.dirty_confirms: set[Channel] = set()  # channels with confirms due
        self._tag_header = config.kafka_tag_header
        self._run_bytes = config.max_message_size // 2  # bytes of one gathered run, at most
        self._routes: dict[tuple[str, str, int], _Route] = {}
        self._blocked = False
        self.table: dict[type, MethodHandler] = {Confirm.Select: self.confirm_select}

    def publish(self, channel: Channel, event: ContentReceived) -> None:
        """A run of publishes alike: routed once; stored at once with one `Broker.put_plain`
        (no coroutine, no Message objects), else gathered for `store_gathered`."""
        session = self.session
        method = event.method
        exchange, routing_key = method.exchange, method.routing_key
        route = self._route(exchange, routing_key, event.properties)
        topic = route.topic
        if topic is not None:
            require(session.account, topic, PUB)
        bodies = event.bodies
        if not route.routed and (topic is None or method.mandatory):
            for body in bodies:
                seq = channel.next_publish()
                if method.mandatory:
                    session.write(session.conn.send_method(channel.number, Basic.Return(
                        Reply.NO_ROUTE, "NO_ROUTE", shortstr_text(exchange), shortstr_text(routing_key))),
                        *codec.content_frames(channel.number, encode_properties(route.properties, self._tag_header),
                                              body, session.conn.frame_max))
                self._confirm(channel, seq, True)
            return
        properties = route.properties
        if channel.tx:
            for body in bodies:
                channel.next_publish()
                channel.tx_publishes.append(Message(topic, body, dict(properties), born_host=session.peer))
            return
        if self._store_run(channel, route, bodies):  # type: ignore[arg-type]
            return
        self.puts += len(bodies)
        batch = self.gathered.get(topic)  # type: ignore[arg-type]
        if batch is None:
            batch = self.gathered[topic] = []  # type: ignore[index]
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
        if self.gathered:  # stored in publish order
            self.store_gathered()
        put = self.broker.put_plain([PlainSend(topic, accepted[0], route.encoded, bodies,  # type: ignore[arg-type]
                                               self.session.peer, accepted[1])], durable=channel.confirm)
        refused = put.stored[0]
        if type(refused) is not tuple:  # refused as a whole
            for _ in bodies:
                self._settle(channel, channel.next_publish(), refused)
            return True
        durable = put.durable
        if durable is not None:  # SYNC_FLUSH: the confirms wait for the fsync
            entries: list[_Gathered] = [(channel, channel.next_publish(), body, route.properties)
                                        for body in bodies]
            self.puts += len(entries)
            durable.add_done_callback(lambda done: self._put_done(entries, done))
            return True
        channel.stored_at_once(len(bodies))
        self._stored(None)
        if channel.confirm:
            self.dirty_confirms.add(channel)
        return True

    def store_gathered(self) -> None:
        """Store the publishes gathered since the last call, in order: runs of plain
        messages of one topic with one append each (`Broker.put_messages`: a pipelining
        publisher's read holds many, and the append's fixed costs are paid once per run),
        one put each for those the core must treat one by one (a delay, a transaction or
        dedup property, a large body). Called before any other method runs, so a method
        after a publish sees it stored in order."""
        gathered, self.gathered = self.gathered, {}
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
        peer = self.session.peer
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
        self.puts -= len(entries)
        error: BaseException | None = None
        try:
            outcome.result()
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - reported to the client below
            error = exc
        for channel, seq, _, _ in entries:
            self._settle(channel, seq, error)
        self.session.puts_settled()

    def _settle(self, channel: Channel, seq: int, error: BaseException | None) -> None:
        """One publish's outcome: its confirm, or the channel's error when it has none."""
        self._stored(error)
        if error is None:
            self._confirm(channel, seq, True)
        elif channel.confirm:
            self._confirm(channel, seq, False)
        elif self.session.channels.get(channel.number) is channel and channel.active:
            self.session.failed(channel, Basic.Publish(), error)

    def _stored(self, error: BaseException | None) -> None:
        """connection.blocked while the store refuses writes, unblocked when it takes them."""
        if error is None:
            if self._blocked:
                self._blocked = False
                if self.session.client_capabilities.get("connection.blocked"):
                    self.session.send(0, Connection.Unblocked())
        elif isinstance(error, StoreUnavailable) and not self._blocked:
            self._blocked = True
            if self.session.client_capabilities.get("connection.blocked"):
                self.session.send(0, Connection.Blocked(str(error)[:255]))

    def _confirm(self, channel: Channel, seq: int, ok: bool) -> None:
        if channel.confirm:
            channel.settle(seq, ok)
            self.dirty_confirms.add(channel)

    def confirms_into(self, out: list[Any]) -> None:
        """The due publisher confirms of every channel with some, as frames onto ``out``."""
        for channel in self.dirty_confirms:
            for ack, tag, multiple in channel.due_confirms():
                method = Basic.Ack(tag, multiple) if ack else Basic.Nack(tag, multiple, requeue=False)
                out.append(codec.method_frame(channel.number, method))
        self.dirty_confirms.clear()

    def too_large(self, channel: Channel, event: ContentTooLarge) -> None:
        raise ChannelError(Reply.PRECONDITION_FAILED, f"message size {event.size} is larger than the "
                           f"configured max size {self.broker.config.max_message_size}")

    def confirm_select(self, channel: Channel, method: Confirm.Select) -> None:
        if channel.tx:
            raise ChannelError(Reply.PRECONDITION_FAILED, "cannot switch from tx to confirm mode")
        channel.confirm = True
        if not method.nowait:
            self.session.send(channel.number, Confirm.SelectOk())


def _gatherable(properties: dict[str, str]) -> bool:
    """Whether a publish may be stored in a run (`Broker.put_messages`)."""
    return not (needs_schedule(properties) or not _ALONE.isdisjoint(properties))
