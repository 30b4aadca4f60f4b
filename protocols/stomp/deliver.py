"""STOMP's deliver direction: subscriptions on the core's delivery engine, MESSAGE frames,
ACK and NACK.

SUBSCRIBE joins a delivery group (`destinations` says which: a queue's shared group, a
topic subscription's own or its durable one) with the account's SUB permission; the engine
calls back with a slice's deliveries and `render` makes a MESSAGE frame of each, which the
session writes. ACK/NACK map onto the group's ack and nack (NACK = a requeue as RabbitMQ's, a
dead-letter or the retry path: see `Deliverer.nack`). A delivery's ``ack``/``message-id`` is
``{subscription serial}-{tag}``, so an ACK finds its subscription in any version. This
module never writes to the transport nor decides when a write happens: the session does.
"""

from __future__ import annotations

import functools
import itertools
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from rocketport.core.auth.plain_acl import SUB, Account, group_resource
from rocketport.core.broker import Broker
from rocketport.core.errors import TopicNotFound
from rocketport.core.facade.types import Delivery, DeliveryGroup, FilterError, Source, StoredMessage, Subscriber

from ..session_base import Buffer
from . import destinations
from .codec import V10, V12, Frame, serialize
from .destinations import QUEUE, Destination, Destinations
from .errors import StompError
from .headers import PropertyHeaders

# RabbitMQ's STOMP sets no prefetch limit unless prefetch-count asks for one: 0, the
# engine's cap (core/delivery MAX_UNACKED, 10,000); a full socket pauses deliveries anyway
DEFAULT_PREFETCH: Final = 0
DEAD_LETTER: Final = -1  # a negative delay level: to the group's %DLQ% at once
_ACK_MODES: Final = ("auto", "client", "client-individual")


@dataclass(slots=True)
class Subscription:
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
    topic: str = ""  # the topic it reads
    retry: bool = False  # SUBSCRIBE's x-retry: true: its NACKs take the retry schedule


Write = Callable[[Subscription, list[Delivery]], None]  # the session's: render and write a slice


class Deliverer:
    """One connection's subscriptions and the deliveries awaiting its acknowledgement."""

    def __init__(self, broker: Broker, account: Account | None, version: str,
                 dests: Destinations, serials: itertools.count, write: Write,
                 write_paused: Callable[[], bool]) -> None:
        self.broker = broker
        self.account = account
        self.version = version
        self.dests = dests
        self.subs: dict[str, Subscription] = {}
        self._serials = serials
        self._write = write
        self._write_paused = write_paused
        self._by_serial: dict[int, Subscription] = {}
        self._headers = PropertyHeaders(version, broker.config.kafka_tag_header)

    # ------------------------------------------------------------------ SUBSCRIBE
    async def subscribe(self, frame: Frame, *, shown: str | None = None) -> None:
        """``shown``: the destination MESSAGE frames carry, when not the one subscribed to."""
        headers = frame.headers
        text, dest = self.dests.of(headers)
        sub_id = headers.get("id")
        if sub_id is None:
            if self.version != V10:
                raise StompError("SUBSCRIBE needs an id header")
            sub_id = text
        if sub_id in self.subs:
            raise StompError(f"subscription id {sub_id[:64]!r} is already in use")
        ack = headers.get("ack", "auto")
        if ack not in _ACK_MODES:
            raise StompError(f"ack mode {ack[:32]!r}; use auto, client or client-individual")
        prefetch = _prefetch(headers)
        group_name, start, drop = _group_of(dest, headers, sub_id)
        if self.account is not None:
            for resource, what in ((dest.topic, f"topic {dest.topic}"),
                                   (group_resource(group_name), f"group {group_name}")):
                if not self.account.permits(resource, SUB):
                    raise StompError(f"No permission to subscribe: {what} "
                                     f"(login={self.account.access_key})")
        source = _source(dest, headers)
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
        s = Subscription(next(self._serials), sub_id, shown or text, group, ack, drop)
        s.head = self._message_head(s)
        s.ack_header = ack != "auto" and self.version == V12
        s.id_prefix = f"{s.serial}-"
        s.topic = dest.topic
        s.retry = headers.get("x-retry") == "true"
        self.subs[sub_id] = s
        self._by_serial[s.serial] = s
        s.sub = group.subscribe(functools.partial(self._write, s), prefetch=prefetch,
                                auto_ack=ack == "auto", many=True)
        if self._write_paused():
            s.sub.pause()
        if durable:  # its start outlives a crash from the RECEIPT on, as ActiveMQ's record
            await self.broker.offsets_durable()

    async def subscribe_temporary(self, reply_to: str) -> None:
        """RabbitMQ's temporary queue: a SEND whose ``reply-to`` names ``/temp-queue/NAME``
        subscribes the connection to it (id ``/temp-queue/NAME``, ack auto) unless it is
        already, so the replies sent to its real name (``/queue/stomp-temp-...``, what the
        receiver sees as ``reply-to`` and the MESSAGE's ``destination``) come back."""
        real = destinations.reply_to(reply_to, self.dests.temp_prefix)
        if any(s.topic == real[7:] for s in self.subs.values()):
            return  # subscribed to it already (explicitly, or by an earlier SEND)
        await self.subscribe(Frame("SUBSCRIBE", {"destination": reply_to, "id": reply_to, "ack": "auto"}, b""),
                             shown=real)

    # ------------------------------------------------------------------ UNSUBSCRIBE
    async def unsubscribe(self, frame: Frame) -> None:
        sub_id = frame.headers.get("id")
        if sub_id is None and self.version == V10:
            sub_id = frame.headers.get("destination")
        durable = _durable_name(frame.headers, sub_id)
        if sub_id is None and not durable:
            raise StompError("UNSUBSCRIBE needs an id header")
        s = self.subs.pop(sub_id, None) if sub_id is not None else None
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

    def take_all(self) -> list[Subscription]:
        """Every subscription, forgotten here: the connection is gone (`release_all` them)."""
        subs = list(self.subs.values())
        self.subs.clear()
        self._by_serial.clear()
        return subs

    async def release_all(self, subs: list[Subscription]) -> None:
        """End the subscriptions; their unacked deliveries go back to their groups."""
        for s in subs:
            await self._release(s)

    async def _release(self, s: Subscription) -> None:
        if s.sub is not None:
            await s.group.unsubscribe(s.sub)
            s.sub = None
        if s.drop_group:
            await self.broker.drop_delivery_group(s.group.name, forget_offsets=True)

    # ------------------------------------------------------------------ MESSAGE
    def _message_head(self, s: Subscription) -> bytes:
        """Each MESSAGE frame's start, up to the value of its message-id header."""
        return serialize("MESSAGE", {"subscription": s.id, "destination": s.destination}, b"",
                         self.version)[:-3] + b"\nmessage-id:"  # the last EOL, blank line and NUL off

    def render(self, s: Subscription, deliveries: list[Delivery], out: list[Buffer]) -> None:
        """A MESSAGE frame for each of a slice's deliveries to ``s``, appended to ``out``.
        A frame is the subscription's encoded head, then one string of the message's
        headers, its property lines rendered from the stored octets once per connection
        (`PropertyHeaders`)."""
        headers = self._headers
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
            if delivery.redelivered or reconsumed:  # RabbitMQ's header, always there
                flag = (f"redelivered:true\nx-reconsume-times:{reconsumed}\n" if reconsumed
                        else "redelivered:true\n")
            else:
                flag = "redelivered:false\n"
            ident = f"{prefix}{tag}"
            if client:
                unacked[tag] = None
                if ack_header:
                    ident = f"{ident}\nack:{ident}"
            body = msg.body
            out.append(b"".join((head, f"{ident}\n{flag}{text}content-length:{len(body)}\n\n"
                                 .encode("utf-8", "surrogateescape"), body, b"\0")))

    # ------------------------------------------------------------------ ACK / NACK
    def find(self, frame: Frame) -> tuple[Subscription, list[int]]:
        """The subscription an ACK/NACK names and the delivery tags it settles."""
        headers = frame.headers
        ack_id = headers.get("id") if self.version == V12 else headers.get("message-id")
        if ack_id is None:
            need = "id" if self.version == V12 else "message-id"
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

    def _settle(self, frame: Frame) -> tuple[Subscription, list[int]]:
        s, tags = self.find(frame)
        unacked = s.unacked
        if len(tags) == len(unacked):
            unacked.clear()
        else:
            for t in tags:
                del unacked[t]
        return s, tags

    def ack(self, frame: Frame) -> None:
        s, tags = self._settle(frame)
        s.group.ack(tags)

    async def nack(self, frame: Frame) -> None:
        """RabbitMQ's NACK: back to the queue at once, ``redelivered: true`` (``requeue``
        defaults to true); ``requeue: false`` dead-letters it (``%DLQ%{group}``, where
        RabbitMQ without a dead-letter exchange drops it). ``x-retry: true`` asks for
        RocketMQ's retry schedule instead: ``%RETRY%{group}`` after delay level 3 + its
        reconsume count, to ``%DLQ%{group}`` after the group's retryMaxTimes; on SUBSCRIBE it
        is every NACK's default there (for clients that NACK on their own, without headers)."""
        headers = frame.headers
        requeue = headers.get("requeue", "true")
        if requeue not in ("true", "false"):
            raise StompError(f"requeue {requeue[:32]!r}: true or false")
        s, tags = self._settle(frame)
        retry = headers.get("x-retry")
        if retry == "true" or (retry is None and s.retry and "requeue" not in headers):
            await s.group.nack(tags, requeue=False)
        elif requeue == "true":
            await s.group.nack(tags, requeue=True)
        else:
            await s.group.nack(tags, requeue=False, delay_level=DEAD_LETTER)


def _prefetch(headers: dict[str, str]) -> int:
    text = headers.get("prefetch-count", headers.get("activemq.prefetchSize"))
    if text is None:
        return DEFAULT_PREFETCH
    if not text.strip().isdigit():
        raise StompError(f"prefetch {text[:32]!r} is not a non-negative integer")
    return int(text)


def _group_of(dest: Destination, headers: dict[str, str], sub_id: str) -> tuple[str, str, bool]:
    """(group, where a new group starts, whether the group ends with the subscription)."""
    if dest.kind == QUEUE:
        return destinations.queue_group(dest, headers.get("x-group")), "first", False
    durable = _durable_name(headers, sub_id)
    if durable:
        return destinations.group_name(durable), "last", False
    return f"stomp-sub-{secrets.token_hex(8)}", "last", True


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


def _durable_name(headers: dict[str, str], sub_id: str | None) -> str | None:
    """The durable subscription a SUBSCRIBE or UNSUBSCRIBE names: ours (x-durable-name),
    ActiveMQ's (activemq.subscriptionName) or RabbitMQ's (durable or persistent: true, named
    by the id)."""
    name = headers.get("x-durable-name") or headers.get("activemq.subscriptionName")
    if not name and "true" in (headers.get("durable"), headers.get("persistent")):
        name = sub_id
    return name or None
