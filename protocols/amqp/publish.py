"""The publishing direction: basic.publish routed and stored, confirms, mandatory returns.

A publish does not wait in line behind its channel's methods: its put starts at once (so
stores keep publish order) and its confirm goes out when the store has it (under
SYNC_FLUSH after the fsync); confirms of publishes stored together leave as one ack with
``multiple``. The codec hands over runs of publishes alike (a pipelining publisher's
read): a run is routed once (remembered until the vhost's declarations change). The runs
of one read that the core's plain-send lane takes are stored together with one
`Broker.put_plain` when the read ends or another method comes (`PublishHandlers.store_plain`:
one append for a read of publishes that each differ, a keyed publisher's; under SYNC_FLUSH
their confirms wait for the one fsync it hands back; without confirms nothing waits). What
the lane declines is gathered per topic and stored in runs at the same points
(`PublishHandlers.store_gathered`); publish order holds across both. A refused put nacks
under confirms, else closes the channel; a full store also sends connection.blocked. One
object per connection; never touches the transport: frames go out through the session.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pamqp.commands import Basic, Confirm, Connection

from rocketport.common.message import PROPERTY_DEDUP_KEY, PROPERTY_TAGS, PROPERTY_TRANSACTION_PREPARED, Message
from rocketport.common.message import encode_properties as encode_stored  # not the content header's
from rocketport.core.auth.plain_acl import PUB
from rocketport.core.errors import NotMaster, StoreUnavailable
from rocketport.core.facade.types import PlainSend, needs_schedule, now_ms

from .. import eager
from . import codec
from .access import require
from .channel import Channel, MethodHandler
from .connection import shortstr_text
from .direct_reply import PSEUDO_QUEUE, REPLY_PREFIX, named_in
from .errors import ChannelError, ConnectionError_, Reply
from .events import ContentReceived, ContentTooLarge
from .properties import (
    DEFAULT_EXCHANGE_MARK,
    X_DELAY,
    encode_properties,
    stored_properties,
    to_message_properties,
)
from .queue_args import check_expiration
from .vhost import DEFAULT_EXCHANGE, QueueState

if TYPE_CHECKING:
    from .session import AmqpSession

MAX_PUTS_IN_FLIGHT = 4096  # per connection: reading pauses above it
# a publish not stored yet: (channel, publish sequence, body, message properties)
_Gathered = tuple[Channel, int, bytes, dict[str, str]]
_ROUTES_MAX = 1024  # distinct (exchange, routing key, content header) remembered per connection
# properties the core must see on a message of its own (`Broker.put_messages` refuses a
# transaction in a run; a dedup key is checked per message)
_ALONE = frozenset((PROPERTY_DEDUP_KEY, PROPERTY_TRANSACTION_PREPARED))
_STORED: dict[str, str] = {}  # a stored publish waiting for its fsync keeps no properties
_MARK = encode_stored({DEFAULT_EXCHANGE_MARK: "1"})


@dataclass(slots=True)
class _Route:
    """Where publishes of one (exchange, routing key, content header) go (`PublishHandlers._route`)."""

    basic: dict[str, Any]  # the content header's properties: the key holds its id
    generation: int  # the vhost's, when this was worked out
    topic: str | None  # None: the default exchange names no queue
    properties: dict[str, str]  # as stored; shared, never modified
    routed: bool | None  # some queue takes it; None: not worked out yet (only mandatory asks)
    encoded: bytes  # ``properties`` as the store writes them
    limited: tuple[QueueState, ...] | None = None  # queues it reaches with a TTL or length limit


@dataclass(slots=True)
class _Target:
    """The topic of an (exchange, routing key) and whether its publishes carry the mark
    (`vhost.needs_mark`), whatever their content headers: what a keyed publisher's
    publishes, each with properties of its own, share."""

    generation: int
    topic: str | None
    mark: bool


class PublishHandlers:
    """The publishes of one connection's channels: storing them and settling their confirms."""

    def __init__(self, session: AmqpSession) -> None:
        self.session = session
        self.front_end = session.front_end
        self.broker = session.broker
        self.vhost = session.vhost
        config = self.broker.config
        self.puts = 0  # puts gathered or running
        # publishes of this read not stored yet: runs for the plain-send lane with their
        # channels, or (never both at once: publish order) the others by topic
        self.plain: list[PlainSend] = []
        self.plain_channels: list[Channel] = []
        self.gathered: dict[str, list[_Gathered]] = {}
        self.dirty_confirms: set[Channel] = set()  # channels with confirms due
        self._tag_header = config.kafka_tag_header
        self._run_bytes = config.max_message_size // 2  # bytes of one gathered run, at most
        self._routes: dict[tuple[str, str, int], _Route] = {}
        self._targets: dict[tuple[str, str], _Target] = {}
        self._tails: dict[str, bytes] = {}  # by routing key: its TAGS, encoded
        self._blocked = False
        self.table: dict[type, MethodHandler] = {Confirm.Select: self.confirm_select}

    def publish(self, channel: Channel, event: ContentReceived, admitted: bool = False) -> None:
        """A run of publishes alike: routed once; stored at once with one `Broker.put_plain`
        (no coroutine, no Message objects), else gathered for `store_gathered`. Into
        queues with limits, `queue_limits` admits each first (``admitted``: it did). A
        slave takes none (`_not_master`)."""
        if not self.front_end.writable:
            self._not_master(channel, event)
            return
        if event.varied is not None and not admitted:
            self._publish_varied(channel, event)
            return
        session = self.session
        basic = event.properties
        if basic and basic.get("reply_to") == PSEUDO_QUEUE:  # direct reply-to: the channel's own name
            event = dataclasses.replace(event, properties=dict(
                basic, reply_to=session.vhost.direct_replies.reply_to(channel)))
        method = event.method
        exchange, routing_key = method.exchange, method.routing_key
        route = self._route(exchange, routing_key, event.properties)
        topic = route.topic
        if topic is not None:
            require(session.account, topic, PUB)
        bodies = event.bodies
        if topic is None or (method.mandatory and not self._routed(route, exchange, routing_key)):
            if self.plain:  # their sequence numbers come first
                self.store_plain()
            replies = (session.vhost.direct_replies if topic is None and exchange == DEFAULT_EXCHANGE
                       and routing_key.startswith(REPLY_PREFIX) else None)
            for body in bodies:
                seq = channel.next_publish()
                if replies is not None:  # a direct reply: no queue takes it, so mandatory returns it too (RabbitMQ)
                    replies.deliver(routing_key, encode_properties(route.properties, self._tag_header), body)
                if method.mandatory:
                    session.write(session.conn.send_method(channel.number, Basic.Return(
                        Reply.NO_ROUTE, "NO_ROUTE", shortstr_text(exchange), shortstr_text(routing_key))),
                        *codec.content_frames(channel.number, encode_properties(route.properties, self._tag_header),
                                              body, session.conn.frame_max))
                self._confirm(channel, seq, True)
            return
        if route.limited is not None and not admitted and self._admit(channel, event, route):
            return
        session.front_end.traffic.topics.add(topic)  # a run of publishes: one addition
        properties = route.properties
        if channel.tx:
            for body in bodies:
                channel.next_publish()
                channel.tx_publishes.append(Message(topic, body, dict(properties), born_host=session.peer))
            return
        accepted = self.broker.accept_now(topic, -1, route.encoded, 0,  # type: ignore[arg-type]
                                          answers_after_durable=True)
        if accepted is not None:  # the plain-send lane's: stored with the read's others
            if self.gathered:  # stored in publish order
                self.store_gathered()
            self.plain.append(PlainSend(topic, accepted[0], route.encoded, bodies,  # type: ignore[arg-type]
                                        session.peer, accepted[1]))
            self.plain_channels.append(channel)
            return
        if self.plain:
            self.store_plain()
        self.puts += len(bodies)
        batch = self.gathered.get(topic)  # type: ignore[arg-type]
        if batch is None:
            batch = self.gathered[topic] = []  # type: ignore[index]
        for body in bodies:
            batch.append((channel, channel.next_publish(), body, properties))

    def _not_master(self, channel: Channel, event: ContentReceived) -> None:
        """Publishes reaching a slave: nacked under confirms (never acked: nothing is
        stored), else the channel closes with 406, as a put the store refuses is answered."""
        if not channel.confirm:
            self.front_end.require_writable("publishes go to")
        self.store_pending()  # the sequence numbers of this read's earlier publishes come first
        for _ in event.bodies:
            self._confirm(channel, channel.next_publish(), False)

    def _route(self, exchange: str, routing_key: str, basic: dict[str, Any]) -> _Route:
        """Where publishes with this exchange, routing key and content-header properties go
        and what they store, remembered until the vhost's declarations change (the codec
        shares one properties dict per distinct header: identity is part of the key, the
        entry keeps it alive; a publisher's messages mostly look alike)."""
        key = (exchange, routing_key, id(basic))
        vhost = self.vhost
        generation = vhost.generation
        found = self._routes.get(key)
        if found is not None and found.basic is basic and found.generation == generation:
            return found
        if basic and "expiration" in basic:  # refused before routing, as RabbitMQ does; never remembered
            check_expiration(basic["expiration"])
        target = self._target(exchange, routing_key)
        topic = target.topic
        properties = to_message_properties(basic, routing_key, now_ms())
        if target.mark:
            properties[DEFAULT_EXCHANGE_MARK] = "1"
        # routed is worked out when a mandatory publish asks (`_routed`); a queue reached
        # is one routed to, so no limited queue without a route
        route = _Route(basic, generation, topic, properties,
                       True if exchange == DEFAULT_EXCHANGE and topic is not None else None,
                       encode_stored(properties),
                       vhost.limited_queues(exchange, routing_key, properties) if topic is not None else None)
        headers = basic.get("headers") if basic else None
        if not (headers and X_DELAY in headers):  # a delay is relative to now
            if len(self._routes) >= _ROUTES_MAX:
                self._routes.clear()
            self._routes[key] = route
        return route

    def _target(self, exchange: str, routing_key: str) -> _Target:
        """The topic and mark of (exchange, routing key), remembered for the vhost's
        declarations (publish_topic raises when the exchange is missing or internal)."""
        names = (exchange, routing_key)
        vhost = self.vhost
        target = self._targets.get(names)
        if target is None or target.generation != vhost.generation:
            if len(self._targets) >= _ROUTES_MAX:
                self._targets.clear()
            target = self._targets[names] = _Target(vhost.generation, vhost.publish_topic(exchange, routing_key),
                                                    vhost.needs_mark(exchange, routing_key))
        return target

    def _publish_varied(self, channel: Channel, event: ContentReceived) -> None:
        """Publishes of one method whose properties differ (`ContentReceived.varied`: a
        keyed publisher's, a key each): the target is worked out once, and each one's
        properties go from the content header's bytes to the stored encoding in one step
        (`stored_properties`; typed headers through the general conversion; none is
        remembered as a route, none repeats) to join the read's plain sends. What that does
        not take (a mandatory or transactional publish, queues with limits, a delay, what
        the lane declines) goes through `publish` one by one."""
        method, varied, bodies = event.method, event.varied, event.bodies
        exchange, routing_key = method.exchange, method.routing_key
        target = self._target(exchange, routing_key)
        topic = target.topic
        if topic is None or method.mandatory or channel.tx or self.vhost.has_limits or named_in(varied):  # type: ignore[arg-type]
            for raw, body in zip(varied, bodies):  # type: ignore[arg-type]
                self.publish(channel, ContentReceived(event.channel, method, _decoded(raw), [body]))
            return
        session = self.session
        require(session.account, topic, PUB)
        session.front_end.traffic.topics.add(topic)
        tail = self._tails.get(routing_key)
        if tail is None:
            if len(self._tails) >= _ROUTES_MAX:
                self._tails.clear()
            tail = self._tails[routing_key] = encode_stored({PROPERTY_TAGS: routing_key} if routing_key else {})
        if target.mark:
            tail += _MARK
        accept, peer, now, mark = self.broker.accept_now, session.peer, now_ms(), target.mark
        # where the lane puts what `stored_properties` makes: its tail decides (the same TAGS;
        # none of its headers names what the core would put another way), so asked once
        lane = accept(topic, -1, tail, 0, answers_after_durable=True)
        for raw, body in zip(varied, bodies):  # type: ignore[arg-type]
            encoded = stored_properties(raw, tail)
            if encoded is not None and lane is not None:
                if self.gathered:  # stored in publish order
                    self.store_gathered()
                self.plain.append(PlainSend(topic, lane[0], encoded, [body], peer, lane[1]))
                self.plain_channels.append(channel)
                continue
            if encoded is None:  # typed headers, say (Celery's): the general conversion, no route kept
                basic = _decoded(raw, remember=False)
                if "expiration" in basic:  # a TTL of its own: the queue limits look at it (`publish`)
                    self.publish(channel, ContentReceived(event.channel, method, basic, [body]))
                    continue
                properties = to_message_properties(basic, routing_key, now)
                if mark:
                    properties[DEFAULT_EXCHANGE_MARK] = "1"
                encoded = encode_stored(properties)
            else:
                basic = None
            accepted = accept(topic, -1, encoded, 0, answers_after_durable=True)
            if accepted is None:  # a delay, say
                self.publish(channel, ContentReceived(event.channel, method, basic or _decoded(raw), [body]))
                continue
            if self.gathered:  # stored in publish order
                self.store_gathered()
            self.plain.append(PlainSend(topic, accepted[0], encoded, [body], peer, accepted[1]))  # type: ignore[arg-type]
            self.plain_channels.append(channel)

    def _admit(self, channel: Channel, event: ContentReceived, route: _Route) -> bool:
        """Publishes into queues with a TTL or length limit (`queue_limits`). Under
        x-overflow reject-publish(-dlx) each is admitted in turn: refused (nacked under
        confirms, not stored) while a queue is full, else stored at once, so the next one
        sees the queue's count; True when done here. Otherwise the sweep is told."""
        limits, limited = self.vhost.limits, route.limited or ()
        if channel.tx or not any(state.policy.refuses_publishes for state in limited):
            limits.published(limited)
            return False
        exchange, properties = event.method.exchange, route.properties
        for body in event.bodies:
            self.store_pending()
            if limits.refuses(limited, properties, body, exchange):
                self._confirm(channel, channel.next_publish(), False)
            else:
                self.publish(channel, dataclasses.replace(event, bodies=[body]), admitted=True)
        self.store_pending()
        return True

    def _routed(self, route: _Route, exchange: str, routing_key: str) -> bool:
        """Whether some queue takes what ``route`` stores: worked out when first asked (a
        mandatory publish), as the content header may decide it (a headers exchange)."""
        if route.routed is None:
            route.routed = self.vhost.router.routed(exchange, routing_key, route.properties)
        return route.routed

    @property
    def pending(self) -> bool:
        """Publishes of this read not stored yet (`store_pending` before another method)."""
        return bool(self.plain or self.gathered)

    def store_pending(self) -> None:
        """Store this read's publishes not stored yet, in order."""
        if self.plain:
            self.store_plain()
        if self.gathered:
            self.store_gathered()

    def store_plain(self) -> None:
        """Store the runs the plain-send lane accepted since the last call with one
        `Broker.put_plain` (one append, whatever their channels, topics and properties) and
        settle their confirms in publish order (under SYNC_FLUSH once `PlainPut.durable`
        says they are on disk: one fsync; a channel without confirms asks for none)."""
        sends, self.plain = self.plain, []
        channels, self.plain_channels = self.plain_channels, []
        put = self.broker.put_plain(sends, durable=any(channel.confirm for channel in channels))
        durable = put.durable
        waiting: list[_Gathered] = []  # confirms that wait for the fsync
        stored_on: Channel | None = None  # sends stored at once, on one channel in a row
        stored = 0
        for channel, send, refused in zip(channels, sends, put.stored):
            bodies = send.bodies
            if type(refused) is tuple and (durable is None or not channel.confirm):
                if channel is not stored_on:
                    if stored:
                        self._stored_at_once(stored_on, stored)  # type: ignore[arg-type]
                    stored_on, stored = channel, 0
                stored += len(bodies)
                continue
            if stored:
                self._stored_at_once(stored_on, stored)  # type: ignore[arg-type]
                stored_on, stored = None, 0
            if type(refused) is not tuple:  # refused as a whole
                for _ in bodies:
                    self._settle(channel, channel.next_publish(), refused)  # type: ignore[arg-type]
            else:  # a loop, no comprehension: mostly one body (a varied run's publish each)
                for body in bodies:
                    waiting.append((channel, channel.next_publish(), body, _STORED))  # type: ignore[arg-type]
        if stored:
            self._stored_at_once(stored_on, stored)  # type: ignore[arg-type]
        if waiting:
            self.puts += len(waiting)
            durable.add_done_callback(lambda done: self._put_done(waiting, done))  # type: ignore[union-attr]

    def _stored_at_once(self, channel: Channel, count: int) -> None:
        channel.stored_at_once(count)
        self._stored(None)
        if channel.confirm:
            self.dirty_confirms.add(channel)

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
        if error is None:  # `_settle` of each, its steps shared: a stored run is many publishes
            self._stored(None)
            dirty = self.dirty_confirms
            for channel, seq, _, _ in entries:
                if channel.confirm:
                    channel.settle(seq, True)
                    dirty.add(channel)
        else:
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
        elif isinstance(error, StoreUnavailable) and not isinstance(error, NotMaster) and not self._blocked:
            # (a slave's refusal is for good: the client goes to the master, blocked would hold it)
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
        raise ChannelError(Reply.PRECONDITION_FAILED, f"message size {event.size} is larger than "
                           f"configured max size {self.session.conn.max_body}")

    def confirm_select(self, channel: Channel, method: Confirm.Select) -> None:
        if channel.tx:
            raise ChannelError(Reply.PRECONDITION_FAILED, "cannot switch from tx to confirm mode")
        channel.confirm = True
        if not method.nowait:
            self.session.send(channel.number, Confirm.SelectOk())


def _decoded(raw: bytes, remember: bool = True) -> dict[str, Any]:
    """A varied publish's properties (`ContentReceived.varied`), decoded; a malformed list
    closes the connection as the codec's checks would have."""
    try:
        return codec.decode_properties(raw, remember)
    except codec.FrameError as exc:
        raise ConnectionError_(Reply(exc.code), exc.text.partition(" - ")[2] or exc.text) from None


def _gatherable(properties: dict[str, str]) -> bool:
    """Whether a publish may be stored in a run (`Broker.put_messages`)."""
    return not (needs_schedule(properties) or not _ALONE.isdisjoint(properties))
