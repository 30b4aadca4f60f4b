"""STOMP's publish direction: SEND frames to the Broker facade's puts.

A SEND's headers become the message's properties (``x-tags`` and ``x-keys`` its TAGS and
KEYS, ``x-delay`` milliseconds a delivery time through the delay path), checked against the
account's PUB permission. A lone SEND is `Broker.put_message`. A run of plain SENDs to one
topic that came in one read (no transaction, no delay, nothing `put_messages` leaves to
`put_message`) is stored with one call, `put_run`, through the core's plain-send lane
(`Broker.put_plain`), and a pipelining producer's repeated header block is turned into a
message once (`plan`). This module never writes a frame: it hands the session each
frame's outcome, which the session answers in its turn.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
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
from rocketport.core.auth.plain_acl import PUB, Account
from rocketport.core.broker import Broker
from rocketport.core.errors import BrokerError
from rocketport.core.facade.types import PlainSend, needs_schedule

from .. import eager
from ..session_base import Outcome
from . import destinations
from .codec import Frame
from .destinations import DestinationError, Destinations
from .errors import StompError

# SEND headers that steer the frame rather than become message properties
_FRAME_HEADERS: Final = frozenset({
    "destination", "receipt", "transaction", "content-length", "x-tags", "x-keys", "x-delay"})
_BATCH_BYTES: Final = 1 << 20  # per run put in one append (maxMessageSize bounds the whole run)
_STORED: Final = eager.Done()
_RECORD_OVERHEAD: Final = 160  # a record's own octets (head, topic) beside its properties, about
_PUBLISHERS: Final = itertools.count()


@dataclass(slots=True)
class SendPlan:
    """What every plain SEND with one header block stores: its topic and properties."""

    topic: str
    properties: dict[str, str]  # shared by every message of the plan: read-only
    encoded: bytes  # the properties as the store takes them
    overhead: int  # octets a message's record takes beside its body (about)
    queue_id: int = -1  # the connection's queue of the topic (`Publisher.queue_of`)


class Publisher:
    """One connection's SENDs, as its account may make them."""

    def __init__(self, broker: Broker, account: Account | None, dests: Destinations,
                 peer: tuple[str, int], written: set[str]) -> None:
        self.broker = broker
        self.written = written  # the front-end's topics written to (Traffic.topics)
        self.account = account
        self.dests = dests
        self.peer = peer
        self.lane_cap = min(_BATCH_BYTES, broker.config.max_message_size // 2)  # octets per run
        self._last_plan: tuple[dict[str, str], SendPlan | None] | None = None  # see plan
        self._lane = next(_PUBLISHERS)  # spreads connections over a topic's queues

    async def send(self, frame: Frame) -> None:
        """A SEND outside the plain-send lane (or one the lane left to its handler)."""
        await self.store(self.message(frame))

    async def store(self, message: Message) -> None:
        await self.broker.put_message(message)
        self.written.add(message.topic)

    def message(self, frame: Frame) -> Message:
        """A SEND frame as the message to store (checked)."""
        topic, properties = self._properties(frame.headers)
        return Message(topic, frame.body, properties, queue_id=self.queue_of(topic), born_host=self.peer)

    def queue_of(self, topic: str) -> int:
        """The queue this connection's messages to ``topic`` go to: always the same one, so
        a subscriber gets one producer's messages in the order they were sent, as a
        RabbitMQ queue keeps one channel's (the broker's round robin over the topic's
        queues would interleave them). -1 (the broker's choice) for a topic it refuses
        to make: the put says why."""
        cfg = self.broker.topics.get(topic)
        if cfg is None:
            try:
                cfg = self.broker.topic_for_write(topic)  # made now: its first message too
            except BrokerError:
                return -1
        return self._lane % cfg.write_queue_nums if cfg.write_queue_nums > 0 else -1

    def plan(self, headers: dict[str, str]) -> SendPlan | None:
        """What a plain SEND with these headers stores (no transaction, no delay, nothing
        `Broker.put_messages` leaves to `put_message`), or None for the handler (which
        also names what is wrong). Frames with the same header block share one headers
        dict (`codec.parse_frame`), so a pipelining producer's plan is made once and
        recognised by identity."""
        last = self._last_plan
        if last is not None and last[0] is headers:
            return last[1]
        plan = None
        if "transaction" not in headers and "x-delay" not in headers \
                and not headers.get("reply-to", "").startswith("/temp-queue/"):  # the handler subscribes
            try:
                topic, properties = self._properties(headers)
            except (StompError, DestinationError):
                properties = None
            if (properties is not None and not needs_schedule(properties)
                    and PROPERTY_DEDUP_KEY not in properties
                    and properties.get(PROPERTY_TRANSACTION_PREPARED) != "true"):
                encoded = encode_properties(properties)
                plan = SendPlan(topic, properties, encoded, _RECORD_OVERHEAD + len(encoded),
                                self.queue_of(topic))
        self._last_plan = (headers, plan)
        return plan

    def put_run(self, bodies: list[bytes], plans: list[SendPlan], receipts: list[str | None],
                on_done: Callable[[Any], None]) -> list[tuple[Outcome, str | None]]:
        """Store a run of plain SENDs to one topic through the plain-send lane (a
        `PlainSend` per run of frames with one header block, all in one append, without a
        coroutine) and return the frames the session must answer, in order, with their
        outcomes (``on_done`` is called as a pending one ends). Under SYNC_FLUSH a receipt
        waits for the lane's fsync (one for the run; a SEND without a receipt asks for
        none, as RocketMQ's send without WAIT); a frame stored at once that wants no
        receipt has nothing to answer. What the lane refuses (a topic to auto-create...)
        it stores as `put_messages` would, and those frames wait for that. (One inner
        batch per run costs as much to store and up to twice as much to read back one by
        one, which is what a drain does.)"""
        peer = self.peer
        sends: list[PlainSend] = []
        last = None
        for body, plan in zip(bodies, plans):
            if plan is not last:
                last = plan
                sends.append(PlainSend(plan.topic, plan.queue_id, plan.encoded, [], peer))
            sends[-1].bodies.append(body)
        # SYNC_FLUSH or SYNC_MASTER: a receipt waits; asked each run, as an election may have
        # made this node SYNC_MASTER since the connection opened to it as a slave
        put = self.broker.put_plain(sends, durable=self.broker.waits_durable and any(r is not None for r in receipts))
        if put.later is not None or (put.stored and type(put.stored[0]) is tuple):  # one topic a run
            self.written.add(sends[0].topic)
        stored: Outcome = _STORED if put.durable is None else put.durable
        if put.durable is not None:
            put.durable.add_done_callback(on_done)
        outcomes: list[Outcome] = [stored if type(r) is tuple else eager.Done(error=r) for r in put.stored]
        if put.later is not None:
            later = eager.start(put.later)
            outcomes += [later] * (len(sends) - len(outcomes))
            if type(later) is not eager.Done:
                later.add_done_callback(on_done)
        receipt_of = iter(receipts)
        return [(outcome, receipt) for outcome, send in zip(outcomes, sends)
                for receipt in itertools.islice(receipt_of, len(send.bodies))
                if receipt is not None or outcome is not stored]

    def _properties(self, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
        """The topic and message properties a SEND's headers name (checked)."""
        _, dest = self.dests.of(headers)
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
            properties["reply-to"] = destinations.reply_to(reply_to, self.dests.temp_prefix)
        return dest.topic, properties
