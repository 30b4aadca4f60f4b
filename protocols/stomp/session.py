"""One STOMP client connection: frames to Broker-facade calls and delivery-engine subscriptions.

Frames are handled in the order they arrive and their answers (RECEIPT, ERROR) leave in
that order, but a SEND's store write does not hold back the frames behind it: each frame's
handler starts at once (`eager.start`) and only its answer waits its turn, so a pipelining
producer under SYNC_FLUSH has many writes in one fsync. A run of plain SENDs to one topic
that came in one read is stored with one call (`_put_lane`), with a receipt per frame as
asked; a pipelining producer's repeated header block is turned into a message once
(`_plan`). At most ``max_in_flight`` frames wait for their answer; past that, reading pauses. DISCONNECT is answered once everything
before it is, so its RECEIPT means every earlier SEND is stored (synced under SYNC_FLUSH).

Consuming is the core's delivery engine (`core.delivery`): SUBSCRIBE joins a group
(`destinations` says which), the engine calls back with a slice's deliveries and the session
writes a MESSAGE each; ACK/NACK map onto the group's ack and nack (NACK = the retry path, or a requeue
with ``requeue:true``). A delivery's ``ack``/``message-id`` is ``{subscription serial}-{tag}``,
so an ACK finds its subscription in any version. Writes are gathered and leave once per loop
iteration; while the transport's buffer is full every subscriber is paused, so a slow
consumer never makes the broker buffer without bound.

Transactions are buffers of SEND/ACK/NACK frames applied at COMMIT. Heart-beats are
negotiated as the specification says; a client silent for twice its interval (at least
its interval plus two seconds) is dropped.
Any protocol or broker error is an ERROR frame (``message`` from the error map, `errors`, and
``receipt-id`` when the frame asked for one) and the connection closes; nothing here can
reach another connection.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from rocketport.common.message import (
    PROPERTY_DEDUP_KEY,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    Message,
    encode_properties,
)
from rocketport.core.auth.plain_acl import PUB, SUB, Account, AclError, PlainAcl, group_resource
from rocketport.core.broker import Broker
from rocketport.core.errors import TopicNotFound
from rocketport.core.facade.types import (
    Delivery,
    DeliveryGroup,
    FilterError,
    PlainSend,
    Source,
    StoredMessage,
    Subscriber,
    needs_schedule,
)

from .. import eager
from ..session_base import OrderedSession, Pausable, Session
from . import destinations
from .codec import V10, V12, VERSIONS, Frame, Limits
from .connection import ProtocolError, StompConnection
from .destinations import QUEUE, Destination, DestinationError
from .errors import StompError, error_message, is_refusal
from .headers import PropertyHeaders
from .login import VersionRefused, log_in

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT: Final = 1024
DEFAULT_PREFETCH: Final = 100
SERVER_NAME: Final = "Rocketport/0.1.0"
# SEND headers that steer the frame rather than become message properties
_FRAME_HEADERS: Final = frozenset({
    "destination", "receipt", "transaction", "content-length", "x-tags", "x-keys", "x-delay"})
_ACK_MODES: Final = ("auto", "client", "client-individual")
_DESTINATION_CACHE: Final = 1024
_BATCH_BYTES: Final = 1 << 20  # per run put in one append (maxMessageSize bounds the whole run)
_STORED: Final = eager.Done()
_RECORD_OVERHEAD: Final = 160  # a record's own octets (head, topic) beside its properties, about


@dataclass(slots=True)
class StompContext:
    """What every STOMP connection of one front-end shares."""

    broker: Broker
    acl: PlainAcl | None
    limits: Limits
    spawn: Callable[[Coroutine[Any, Any, Any], str], None]  # work outliving a connection
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    serials: itertools.count = field(default_factory=lambda: itertools.count(1))


@dataclass(slots=True)
class _Subscription:
    serial: int
    id: str
    destination: str  # as the client wrote it: MESSAGE frames carry it back
    group: DeliveryGroup
    ack: str
    drop_group: bool  # a non-durable topic subscription's own group: dropped when it ends
    sub: Subscriber | None = None
    unacked: dict[int, None] = field(default_factory=dict)  # delivery tags, in delivery order
    head: bytes = b""  # the start of each MESSAGE frame, encoded once
    ack_header: bool = False  # MESSAGE frames carry an ack header (1.2, not ack auto)
    id_prefix: str = ""  # "{serial}-": a delivery's message-id and ack id, before its tag


@dataclass(slots=True)
class _SendPlan:
    """What every plain SEND with one header block stores: its topic and properties."""

    topic: str
    properties: dict[str, str]  # shared by every message of the plan: read-only
    encoded: bytes  # the properties as the store takes them
    overhead: int  # octets a message's record takes beside its body (about)


@dataclass(slots=True)
class _Pending:
    """A frame awaiting its turn to be answered."""

    result: asyncio.Future | eager.Done
    receipt: str | None
    disconnect: bool = False


def _silence_allowed(interval_ms: int) -> float:
    """Seconds without input before a client that promised heart-beats is dropped: twice
    its interval, and at least two seconds more than one (a busy client's timer slips)."""
    return max(2 * interval_ms, interval_ms + 2000) / 1000


class StompSession(OrderedSession[_Pending]):
    def __init__(self, ctx: StompContext, on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None) -> None:
        super().__init__(ctx.max_in_flight, on_open, on_closed)
        self.ctx = ctx
        self.broker = ctx.broker
        self.conn = StompConnection(ctx.limits)
        self.serial = next(ctx.serials)
        self.connected = False
        self.account: Account | None = None
        self._temp_prefix = f"stomp-temp-{secrets.token_hex(4)}"
        self._subs: dict[str, _Subscription] = {}
        self._dests: dict[str, Destination] = {}  # parsed destinations, by their text
        self._last_plan: tuple[dict[str, str], _SendPlan | None] | None = None  # see _plan
        self._sync = ctx.broker.config.flush_disk_type == "SYNC_FLUSH"
        self._tag_header = ctx.broker.config.kafka_tag_header
        self._property_headers = PropertyHeaders(self.conn.version, self._tag_header)
        self._lane_cap = min(_BATCH_BYTES, ctx.broker.config.max_message_size // 2)
        self._by_serial: dict[int, _Subscription] = {}
        self._tx: dict[str, list[Frame]] = {}
        self._beat_send = 0
        self._beat_receive = 0
        self._beat_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ transport callbacks
    def data_received(self, data: bytes) -> None:
        self._receive(data)

    def _receive(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        events = self.conn.receive_data(data)
        self._note_input(bool(events), self.conn.buffered > 0)
        self._received(events)

    @property
    def in_flight(self) -> int:
        """Frames awaiting their answer, and subscriptions awaiting messages: a subscriber
        with nothing to read is not idle (the listener's idle sweep must leave it open)."""
        return len(self._queue) + len(self._subs)

    def _subscribers(self) -> list[Pausable]:
        return [s.sub for s in self._subs.values() if s.sub is not None]

    def _closed_hook(self) -> None:
        self._abandon()
        if self._beat_timer is not None:
            self._beat_timer.cancel()
        self._tx.clear()
        subs = list(self._subs.values())
        self._subs.clear()
        self._by_serial.clear()
        if subs:
            self.ctx.spawn(self._release_all(subs), f"stomp-release-{self.serial}")

    async def _release_all(self, subs: list[_Subscription]) -> None:
        for s in subs:
            await self._release(s)

    # ------------------------------------------------------------------ output
    def _fail(self, message: str, receipt: str | None = None, detail: str = "") -> None:
        """ERROR, then close: the specification's answer to anything the server refuses."""
        if self._closing:
            return
        headers = {"message": message[:1000], "content-type": "text/plain"}
        if receipt is not None:
            headers["receipt-id"] = receipt
        body = (detail or message).encode("utf-8", "replace")
        headers["content-length"] = str(len(body))
        log.info("STOMP client %s:%d: %s; closing", *self.peer, message)
        self._emit(self.conn.send("ERROR", headers, body))
        self._close_after_output()

    def _close_after_output(self) -> None:
        self._closing = True
        self._backlog.clear()
        self._flush()
        if self.transport is not None:
            self.transport.close()  # sends what is buffered first

    # ------------------------------------------------------------------ frames
    def _start(self, backlog: deque[Frame | ProtocolError]) -> None:
        self._start_frames(backlog, self._queue, self.max_in_flight)

    def _start_frames(self, backlog: deque[Frame | ProtocolError], queue: deque[_Pending],
                      limit: int) -> None:
        # a run of plain SENDs to one topic (see _plan): bodies, plans and receipts
        bodies: list[bytes] = []
        plans: list[_SendPlan] = []
        receipts: list[str | None] = []
        lane_bytes = 0
        cap = self._lane_cap
        while backlog and len(queue) + len(bodies) < limit and not self._closing:
            event = backlog.popleft()
            if type(event) is Frame and event.command == "SEND" and self.connected:
                plan = self._plan(event.headers)
                if plan is not None and (size := len(event.body) + plan.overhead) <= cap:
                    if bodies and (plan.topic != plans[0].topic or lane_bytes + size > cap):
                        self._put_lane(bodies, plans, receipts)
                        bodies, plans, receipts, lane_bytes = [], [], [], 0
                    bodies.append(event.body)
                    plans.append(plan)
                    receipts.append(event.headers.get("receipt"))
                    lane_bytes += size
                    continue
            if bodies:
                self._put_lane(bodies, plans, receipts)
                bodies, plans, receipts, lane_bytes = [], [], [], 0
            if type(event) is ProtocolError:
                self._track(_Pending(eager.Done(error=StompError(event.reason)), None))
                backlog.clear()
                break
            frame: Frame = event  # type: ignore[assignment]
            receipt = frame.headers.get("receipt")
            if not self.connected:
                self._connect(frame)
                continue
            handler = self._handlers.get(frame.command)
            if frame.command == "DISCONNECT":  # its receipt: what was sent is on disk (SYNC_FLUSH)
                durable = self.broker.durable() if receipt is not None else None
                self._track(_Pending(durable or eager.Done(), receipt, disconnect=True))
                backlog.clear()
                break
            if handler is None:  # CONNECT again
                outcome: asyncio.Future | eager.Done = eager.Done(
                    error=StompError(f"{frame.command} on a connected session"))
            else:
                outcome = eager.start(handler(self, frame))
            self._track(_Pending(outcome, receipt))
        if bodies:
            self._put_lane(bodies, plans, receipts)

    # ------------------------------------------------------------------ the send lane
    def _put_lane(self, bodies: list[bytes], plans: list[_SendPlan],
                  receipts: list[str | None]) -> None:
        """Store a run of plain SENDs to one topic that came in one read through the core's
        plain-send lane (`Broker.put_plain`: a `PlainSend` per run of frames with one header
        block, all in one append, without a coroutine), then answer each frame in its turn
        like any other; under SYNC_FLUSH a receipt waits for the lane's fsync (one for the
        run; a SEND without a receipt asks for none, as RocketMQ's send without WAIT). What
        the lane refuses (a topic to auto-create...) it stores as `put_messages` would, and
        those frames wait for that. (One inner batch per run costs as much to store and up
        to twice as much to read back one by one, which is what a drain does.)"""
        peer = self.peer
        sends: list[PlainSend] = []
        last = None
        for body, plan in zip(bodies, plans):
            if plan is not last:
                last = plan
                sends.append(PlainSend(plan.topic, -1, plan.encoded, [], peer))
            sends[-1].bodies.append(body)
        put = self.broker.put_plain(sends, durable=self._sync and any(r is not None for r in receipts))
        stored = _STORED if put.durable is None else put.durable
        if put.durable is not None:
            put.durable.add_done_callback(self._on_done)
        outcomes: list[asyncio.Future | eager.Done] = [
            stored if type(r) is tuple else eager.Done(error=r) for r in put.stored]
        if put.later is not None:
            later = eager.start(put.later)
            outcomes += [later] * (len(sends) - len(outcomes))
            if type(later) is not eager.Done:
                later.add_done_callback(self._on_done)
        # a frame stored at once that wants no receipt has nothing to answer: not queued
        receipt_of = iter(receipts)
        self._queue.extend([_Pending(outcome, receipt) for outcome, send in zip(outcomes, sends)
                            for receipt in itertools.islice(receipt_of, len(send.bodies))
                            if receipt is not None or outcome is not stored])

    def _answer(self, pending: _Pending) -> bool:
        """A frame's RECEIPT when it asked for one; an ERROR (and the end) when it failed."""
        try:
            pending.result.result()
        except asyncio.CancelledError:
            return False
        except Exception as exc:  # noqa: BLE001 - said to the client through the error map
            if not is_refusal(exc):  # our bug: this connection only
                log.exception("STOMP frame from %s:%d failed", *self.peer)
            self._fail(error_message(exc), pending.receipt)
            return False
        if pending.receipt is not None:
            self._out.append(self.conn.send("RECEIPT", {"receipt-id": pending.receipt}))
        if pending.disconnect:
            self._close_after_output()
            return False
        return True

    # ------------------------------------------------------------------ CONNECT
    def _connect(self, frame: Frame) -> None:
        receipt = frame.headers.get("receipt")
        if frame.command not in ("CONNECT", "STOMP"):
            self._fail(f"expected CONNECT or STOMP, got {frame.command}", receipt)
            return
        try:
            login = log_in(frame.headers, self.ctx.acl)
        except VersionRefused:
            body = f"Supported protocol versions are {' '.join(reversed(VERSIONS))}"
            self._emit(self.conn.send("ERROR", {"version": ",".join(reversed(VERSIONS)),
                                               "content-type": "text/plain",
                                               "message": "Supported protocol versions are 1.0 1.1 1.2"},
                                      body.encode()))
            self._close_after_output()
            return
        except (StompError, AclError) as exc:
            self._fail(error_message(exc), receipt)
            return
        version, send_ms, receive_ms = login.version, login.beat_send_ms, login.beat_receive_ms
        self.account = login.account
        self.connected = True
        self._backlog.extend(self.conn.negotiated(version))
        self._property_headers = PropertyHeaders(version, self._tag_header)
        self._beat_send, self._beat_receive = send_ms, receive_ms
        reply = {"version": version, "server": SERVER_NAME, "session": f"session-{self.serial}",
                 "heart-beat": f"{send_ms},{receive_ms}"}
        self._emit(self.conn.send("CONNECTED", reply))
        if send_ms or receive_ms:
            self._schedule_beat()

    def _schedule_beat(self) -> None:
        intervals = [ms for ms in (self._beat_send, self._beat_receive) if ms]
        self._beat_timer = self._loop.call_later(min(intervals) / 2000, self._beat)

    def _beat(self) -> None:
        if self._closing or self.transport is None:
            return
        now = self._loop.time()
        if self._beat_receive and now - self.last_input > _silence_allowed(self._beat_receive):
            log.info("STOMP client %s:%d sent no heart-beat for %.1f s; closing", *self.peer,
                     now - self.last_input)
            self._closing = True
            self.abort()
            return
        if self._beat_send and now - self._last_output >= self._beat_send / 2000:
            self._emit(b"\n")
        self._schedule_beat()

    # ------------------------------------------------------------------ SEND
    def _destination(self, headers: dict[str, str]) -> tuple[str, Destination]:
        text = headers.get("destination")
        if not text:
            raise StompError("the frame has no destination header")
        dest = self._dests.get(text)
        if dest is None:
            if len(self._dests) >= _DESTINATION_CACHE:
                self._dests.clear()
            dest = self._dests[text] = destinations.parse(text, self._temp_prefix)
        return text, dest

    def _message(self, frame: Frame) -> Message:
        """A SEND frame as the message to store: headers are properties (x-tags and x-keys
        the TAGS and KEYS, x-delay milliseconds a delivery time through the delay path)."""
        topic, properties = self._properties(frame.headers)
        return Message(topic, frame.body, properties, born_host=self.peer)

    def _plan(self, headers: dict[str, str]) -> _SendPlan | None:
        """What a plain SEND with these headers stores (no transaction, no delay, nothing
        `Broker.put_messages` leaves to `put_message`), or None for the handler (which
        also names what is wrong). Frames with the same header
        block share one headers dict (`codec.parse_frame`), so a pipelining producer's
        plan is made once and recognised by identity."""
        last = self._last_plan
        if last is not None and last[0] is headers:
            return last[1]
        plan = None
        if "transaction" not in headers and "x-delay" not in headers:
            try:
                topic, properties = self._properties(headers)
            except (StompError, DestinationError):
                properties = None
            if (properties is not None and not needs_schedule(properties)
                    and PROPERTY_DEDUP_KEY not in properties
                    and properties.get(PROPERTY_TRANSACTION_PREPARED) != "true"):
                encoded = encode_properties(properties)
                plan = _SendPlan(topic, properties, encoded, _RECORD_OVERHEAD + len(encoded))
        self._last_plan = (headers, plan)
        return plan

    def _properties(self, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
        """The topic and message properties a SEND's headers name (checked)."""
        _, dest = self._destination(headers)
        if self.account is not None and not self.account.permits(dest.topic, PUB):
            raise StompError(f"No permission to send to topic {dest.topic} "
                             f"(login={self.account.access_key})")
        properties: dict[str, str] = {}
        for name, value in headers.items():
            if name in _FRAME_HEADERS:
                continue
            if "\x01" in name or "\x02" in name or "\x01" in value or "\x02" in value:
                raise StompError(f"header {name[:64]!r}: the octets 0x01 and 0x02 are reserved")
            properties[name] = value
        tags = headers.get("x-tags", dest.tag)
        if tags:
            properties[PROPERTY_TAGS] = tags
        keys = headers.get("x-keys")
        if keys:
            properties[PROPERTY_KEYS] = keys
        delay = headers.get("x-delay")
        if delay is not None:
            if not delay.strip().isdigit():
                raise StompError(f"x-delay {delay[:32]!r} is not a number of milliseconds")
            properties[PROPERTY_TIMER_DELIVER_MS] = str(int(time.time() * 1000) + int(delay))
        reply_to = properties.get("reply-to")
        if reply_to is not None:
            properties["reply-to"] = destinations.reply_to(reply_to, self._temp_prefix)
        return dest.topic, properties

    async def _send(self, frame: Frame) -> None:
        tx = frame.headers.get("transaction")
        if tx is not None:
            self._buffer(tx, frame)
            return
        await self.broker.put_message(self._message(frame))

    def _buffer(self, tx: str, frame: Frame) -> None:
        try:
            self._tx[tx].append(frame)
        except KeyError:
            raise StompError(f"transaction {tx[:64]!r} was not begun") from None

    # ------------------------------------------------------------------ transactions
    async def _begin(self, frame: Frame) -> None:
        tx = self._tx_id(frame)
        if tx in self._tx:
            raise StompError(f"transaction {tx[:64]!r} is already open")
        self._tx[tx] = []

    async def _commit(self, frame: Frame) -> None:
        frames = self._tx.pop(self._tx_id(frame), None)
        if frames is None:
            raise StompError(f"transaction {self._tx_id(frame)[:64]!r} was not begun")
        messages = [self._message(f) for f in frames if f.command == "SEND"]  # all checked first
        sends = iter(messages)
        for f in frames:
            if f.command == "SEND":
                await self.broker.put_message(next(sends))
            elif f.command == "ACK":
                self._apply_ack(f)
            else:
                await self._apply_nack(f)

    async def _abort(self, frame: Frame) -> None:
        if self._tx.pop(self._tx_id(frame), None) is None:
            raise StompError(f"transaction {self._tx_id(frame)[:64]!r} was not begun")

    @staticmethod
    def _tx_id(frame: Frame) -> str:
        tx = frame.headers.get("transaction")
        if not tx:
            raise StompError(f"{frame.command} needs a transaction header")
        return tx

    # ------------------------------------------------------------------ SUBSCRIBE
    async def _subscribe(self, frame: Frame) -> None:
        headers = frame.headers
        text, dest = self._destination(headers)
        sub_id = headers.get("id")
        if sub_id is None:
            if self.conn.version != V10:
                raise StompError("SUBSCRIBE needs an id header")
            sub_id = text
        if sub_id in self._subs:
            raise StompError(f"subscription id {sub_id[:64]!r} is already in use")
        ack = headers.get("ack", "auto")
        if ack not in _ACK_MODES:
            raise StompError(f"ack mode {ack[:32]!r}; use auto, client or client-individual")
        prefetch = self._prefetch(headers)
        group_name, start, drop = self._group_of(dest, headers, sub_id)
        if self.account is not None:
            for resource, what in ((dest.topic, f"topic {dest.topic}"),
                                   (group_resource(group_name), f"group {group_name}")):
                if not self.account.permits(resource, SUB):
                    raise StompError(f"No permission to subscribe: {what} "
                                     f"(login={self.account.access_key})")
        source = self._source(dest, headers)
        durable = not drop and start == "last"  # a durable topic subscription
        if durable:  # on a topic that exists (as a SEND would auto-create it): it has a start
            try:
                self.broker.topic_for_write(dest.topic)
            except TopicNotFound:
                pass
        try:
            group = self.broker.delivery_group(group_name, [source], start=start)
            if group.consumer_count == 0:  # an idle open group takes its new first subscriber's filter
                group.set_sources([source], start=start)
        except FilterError as exc:
            raise StompError(f"selector or tag filter refused: {exc}") from None
        s = _Subscription(next(self.ctx.serials), sub_id, text, group, ack, drop)
        s.head = self._message_head(s)
        s.ack_header = ack != "auto" and self.conn.version == V12
        s.id_prefix = f"{s.serial}-"
        self._subs[sub_id] = s
        self._by_serial[s.serial] = s
        s.sub = group.subscribe(functools.partial(self._deliver, s), prefetch=prefetch,
                                auto_ack=ack == "auto", many=True)
        if self._write_paused:
            s.sub.pause()
        if durable:  # its start outlives a crash from the RECEIPT on, as ActiveMQ's record
            await self.broker.offsets_durable()

    @staticmethod
    def _prefetch(headers: dict[str, str]) -> int:
        text = headers.get("prefetch-count", headers.get("activemq.prefetchSize"))
        if text is None:
            return DEFAULT_PREFETCH
        if not text.strip().isdigit():
            raise StompError(f"prefetch {text[:32]!r} is not a non-negative integer")
        return int(text)

    def _group_of(self, dest: Destination, headers: dict[str, str], sub_id: str) -> tuple[str, str, bool]:
        """(group, where a new group starts, whether the group ends with the subscription)."""
        if dest.kind == QUEUE:
            return destinations.queue_group(dest, headers.get("x-group")), "first", False
        durable = _durable_name(headers, sub_id)
        if durable:
            return destinations.group_name(durable), "last", False
        return f"stomp-sub-{secrets.token_hex(8)}", "last", True

    @staticmethod
    def _source(dest: Destination, headers: dict[str, str]) -> Source:
        tag_filter = headers.get("x-tag-filter") or dest.tag
        selector = headers.get("selector")
        if selector:
            if tag_filter:
                wanted = {t.strip() for t in tag_filter.split("||")}
                return Source(dest.topic, selector, sql=True,
                              match=lambda m: "*" in wanted or m.tags in wanted)
            return Source(dest.topic, selector, sql=True)
        return Source(dest.topic, tag_filter or "*")

    async def _unsubscribe(self, frame: Frame) -> None:
        sub_id = frame.headers.get("id")
        if sub_id is None and self.conn.version == V10:
            sub_id = frame.headers.get("destination")
        durable = _durable_name(frame.headers, sub_id)
        if sub_id is None and not durable:
            raise StompError("UNSUBSCRIBE needs an id header")
        s = self._subs.pop(sub_id, None) if sub_id is not None else None
        if s is None and not durable:
            raise StompError(f"no subscription {sub_id[:64]!r}")
        if s is not None:
            del self._by_serial[s.serial]
            await self._release(s)
        # ActiveMQ and RabbitMQ: UNSUBSCRIBE naming a durable subscription removes it (not a
        # queue's group, which a durable header on a /queue subscription does not name)
        if durable and (s is None or s.group.name == durable):
            await self._remove_durable(destinations.group_name(durable))

    async def _remove_durable(self, name: str) -> None:
        """Drop a durable subscription's group and its offsets, unless a subscriber still
        uses it (ActiveMQ refuses to remove an active durable subscriber, too)."""
        if self.account is not None and not self.account.permits(group_resource(name), SUB):
            raise StompError(f"No permission to remove the durable subscription {name} "
                             f"(login={self.account.access_key})")
        if self.broker.find_group(name) is None:  # (get_group would make it)
            raise StompError(f"no durable subscription {name[:64]!r}")
        group = self.broker.open_delivery_group(name)
        if group is not None and group.consumer_count:
            raise StompError(f"durable subscription {name!r} is in use by {group.consumer_count} subscriber(s)")
        await self.broker.drop_delivery_group(name, forget_offsets=True)

    async def _release(self, s: _Subscription) -> None:
        if s.sub is not None:
            await s.group.unsubscribe(s.sub)
            s.sub = None
        if s.drop_group:
            await self.broker.drop_delivery_group(s.group.name, forget_offsets=True)

    # ------------------------------------------------------------------ MESSAGE
    def _message_head(self, s: _Subscription) -> bytes:
        """Each MESSAGE frame's start, up to the value of its message-id header."""
        return self.conn.send("MESSAGE", {"subscription": s.id, "destination": s.destination},
                              b"")[:-3] + b"\nmessage-id:"  # the last EOL, blank line and NUL off

    def _deliver(self, s: _Subscription, deliveries: list[Delivery]) -> None:
        """The engine's callback with a slice's deliveries to ``s``: a MESSAGE each,
        written at once (or with this iteration's write when one is due). A frame is the subscription's encoded head,
        then one string of the message's headers, its property lines rendered from the
        stored octets once per connection (`PropertyHeaders`)."""
        if self._closing:
            return  # unacked deliveries go back when the subscription is released
        out = self._out
        headers = self._property_headers
        head, prefix, unacked = s.head, s.id_prefix, s.unacked
        client = s.ack != "auto"
        ack_header = s.ack_header
        for delivery in deliveries:
            msg = delivery.message
            tag = delivery.tag
            if type(msg) is StoredMessage:
                text = headers.of_stored(msg.properties_bytes())
            else:
                text = headers.of(msg.properties)
            reconsumed = msg.reconsume_times
            if delivery.redelivered or reconsumed:
                text = (f"redelivered:true\nx-reconsume-times:{reconsumed}\n{text}" if reconsumed
                        else f"redelivered:true\n{text}")
            ident = f"{prefix}{tag}"
            if client:
                unacked[tag] = None
                if ack_header:
                    ident = f"{ident}\nack:{ident}"
            body = msg.body
            out.append(b"".join((head, f"{ident}\n{text}content-length:{len(body)}\n\n"
                                 .encode("utf-8", "surrogateescape"), body, b"\0")))
        if not self._flush_due:  # else they join the write already due this iteration
            self._flush()  # a slice is one write: now, not an iteration later (latency)

    # ------------------------------------------------------------------ ACK / NACK
    async def _ack(self, frame: Frame) -> None:
        tx = frame.headers.get("transaction")
        if tx is not None:
            self._find(frame)  # refused now, not at COMMIT, when it names nothing
            self._buffer(tx, frame)
            return
        self._apply_ack(frame)

    async def _nack(self, frame: Frame) -> None:
        tx = frame.headers.get("transaction")
        if tx is not None:
            self._find(frame)
            self._buffer(tx, frame)
            return
        await self._apply_nack(frame)

    def _find(self, frame: Frame) -> tuple[_Subscription, list[int]]:
        """The subscription an ACK/NACK names and the delivery tags it settles."""
        headers = frame.headers
        ack_id = headers.get("id") if self.conn.version == V12 else headers.get("message-id")
        if ack_id is None:
            need = "id" if self.conn.version == V12 else "message-id"
            raise StompError(f"{frame.command} needs a {need} header")
        serial, _, tag_text = ack_id.partition("-")
        s = self._by_serial.get(int(serial)) if serial.isdigit() else None
        if s is None or not tag_text.isdigit():
            raise StompError(f"{frame.command} of unknown message {ack_id[:64]!r}")
        tag = int(tag_text)
        if tag not in s.unacked:
            raise StompError(f"{frame.command} of {ack_id[:64]!r}, which is not awaiting "
                             "acknowledgement on this connection")
        if s.ack == "client":  # cumulative: everything up to it (tags rise in delivery order)
            tags = list(itertools.takewhile(tag.__ge__, s.unacked))
        else:
            tags = [tag]
        return s, tags

    def _settle(self, frame: Frame) -> tuple[_Subscription, list[int]]:
        s, tags = self._find(frame)
        unacked = s.unacked
        if len(tags) == len(unacked):
            unacked.clear()
        else:
            for t in tags:
                del unacked[t]
        return s, tags

    def _apply_ack(self, frame: Frame) -> None:
        s, tags = self._settle(frame)
        s.group.ack(tags)

    async def _apply_nack(self, frame: Frame) -> None:
        s, tags = self._settle(frame)
        await s.group.nack(tags, requeue=frame.headers.get("requeue") == "true")

    _handlers: dict[str, Callable[[StompSession, Frame], Any]] = {
        "SEND": _send, "SUBSCRIBE": _subscribe, "UNSUBSCRIBE": _unsubscribe, "ACK": _ack,
        "NACK": _nack, "BEGIN": _begin, "COMMIT": _commit, "ABORT": _abort,
    }


def _durable_name(headers: dict[str, str], sub_id: str | None) -> str | None:
    """The durable subscription a SUBSCRIBE or UNSUBSCRIBE names: ours (x-durable-name),
    ActiveMQ's (activemq.subscriptionName) or RabbitMQ's (durable or persistent: true, named
    by the id)."""
    name = headers.get("x-durable-name") or headers.get("activemq.subscriptionName")
    if not name and "true" in (headers.get("durable"), headers.get("persistent")):
        name = sub_id
    return name or None

