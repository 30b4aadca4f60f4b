"""Dead-lettering: a message leaving a queue (rejected, expired, beyond its length, over
its delivery limit) is published again to the queue's ``x-dead-letter-exchange``, as
RabbitMQ 3.10 does it.

The copy keeps the body, the basic properties and the headers; its routing key is the
queue's ``x-dead-letter-routing-key`` or the message's own; a per-message ``expiration`` is
removed (kept in the death record as ``original-expiration``, so the copy does not expire
again at once); and the ``x-death`` header, an array of tables (count, reason, queue, time,
exchange, routing-keys), gets the death: the entry of the same queue and reason counts one
more and moves first, else a new entry with count 1 goes first. ``x-first-death-reason``,
``-queue`` and ``-exchange`` are set once, at the first death (3.10 writes no
``x-last-death-*``).

One `DeadLetters` per virtual host stores the copies in the order their deaths came, in
runs of one append each (`Broker.put_messages`), from one task: a queue expiring a hundred
thousand messages costs a hundred thousand records, not as many coroutines. Its backlog is
bounded: the expiry sweep waits while it is long. Never touches a connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rocketport.common.message import SYSTEM_PROPERTY_NAMES, Message
from rocketport.core.facade.types import now_ms

from .errors import ChannelError
from .properties import DEFAULT_EXCHANGE_MARK

if TYPE_CHECKING:
    from rocketport.core.broker import Broker

    from .vhost import QueueState, VirtualHost

log = logging.getLogger(__name__)

X_DEATH = "x-death"
X_FIRST_DEATH = ("x-first-death-reason", "x-first-death-queue", "x-first-death-exchange")
BACKLOG_MAX = 16_384  # dead-letter copies waiting to be stored: the sweep waits above it
_RUN_MAX = 512  # copies stored with one append
_RUN_BYTES = 1 << 20


def death_properties(props: Mapping[str, str], queue: str, exchange: str, reason: str,
                     dead_letter_routing_key: str | None, tag_header: str,
                     now: int | None = None) -> dict[str, str]:
    """The properties of a message's dead-letter copy, from its stored ``props`` (see the
    module docstring). ``exchange`` is the exchange the message reached ``queue`` through
    ("" for the default exchange)."""
    routing_key = props.get("TAGS", "")
    tags = routing_key
    out = {k: v for k, v in props.items()  # the tag header: see properties.encode_properties
           if k not in SYSTEM_PROPERTY_NAMES and k != DEFAULT_EXCHANGE_MARK
           and not (k == tag_header and v == tags)}
    death: dict[str, Any] = {"count": 1, "exchange": exchange, "queue": queue, "reason": reason,
                             "routing-keys": [routing_key],
                             "time": (now if now is not None else now_ms()) // 1000}
    expiration = out.pop("expiration", None)
    if expiration is not None:
        death["original-expiration"] = expiration
    deaths = read_header(props, X_DEATH)
    if not isinstance(deaths, list):
        deaths = []
    same = [d for d in deaths if isinstance(d, Mapping) and d.get("queue") == queue and d.get("reason") == reason]
    if same:
        death = dict(same[0])
        count = death.get("count")
        death["count"] = (count if isinstance(count, int) else 0) + 1
    others = [d for d in deaths if not any(d is s for s in same)]
    write_header(out, X_DEATH, [dict(sorted(death.items()))] + others)
    if X_FIRST_DEATH[0] not in out:
        out.update(zip(X_FIRST_DEATH, (reason, queue, exchange)))
    new_key = dead_letter_routing_key if dead_letter_routing_key is not None else routing_key
    if new_key:
        out["TAGS"] = new_key
    return out


class DeadLetters:
    """The dead-letter copies of one virtual host, stored in order (see the module docstring)."""

    def __init__(self, broker: Broker, vhost: VirtualHost) -> None:
        self.broker = broker
        self.vhost = vhost
        self._tag_header = broker.config.kafka_tag_header
        self._waiting: deque[Message] = deque()
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self.stored = 0  # copies stored since start (tests, benchmarks)

    @property
    def backlog(self) -> int:
        return len(self._waiting)

    def send(self, state: QueueState, messages: Iterable[tuple[Mapping[str, str], bytes, str]],
             reason: str) -> int:
        """Dead-letter ``messages`` (stored properties, body, the exchange each reached the
        queue through) leaving ``state``'s queue for ``reason``; returns how many copies go
        (none without a dead-letter exchange, or where it routes nowhere: RabbitMQ drops
        them then)."""
        policy = state.policy
        exchange = policy.dead_letter_exchange
        if exchange is None:
            return 0
        vhost, queue = self.vhost, state.entity.name
        waiting = self._waiting
        sent = 0
        stamp = now_ms()
        for properties, body, came_through in messages:
            props = death_properties(properties, queue, came_through, reason,
                                     policy.dead_letter_routing_key, self._tag_header, stamp)
            routing_key = props.get("TAGS", "")
            try:
                topic = vhost.publish_topic(exchange, routing_key)
            except ChannelError as exc:
                log.info("AMQP queue %s: dead-letter exchange: %s; message dropped", queue, exc.text)
                continue
            if topic is None:
                continue
            if vhost.needs_mark(exchange, routing_key):
                props[DEFAULT_EXCHANGE_MARK] = "1"
            waiting.append(Message(topic, body, props))
            sent += 1
        if sent:
            self._wake.set()
            if len(waiting) >= BACKLOG_MAX:
                self._room.clear()
        return sent

    async def room(self) -> None:
        """Until the backlog is below its bound."""
        await self._room.wait()

    async def drained(self) -> None:
        """Until every copy sent so far is stored (tests)."""
        while self._waiting:
            await asyncio.sleep(0.01)

    async def run(self) -> None:
        """Store the waiting copies, in order, in runs of one topic each; forever."""
        waiting = self._waiting
        while True:
            if not waiting:
                self._wake.clear()
                await self._wake.wait()
                continue
            run = [waiting.popleft()]
            topic, size = run[0].topic, len(run[0].body)
            while waiting and len(run) < _RUN_MAX and waiting[0].topic == topic and size < _RUN_BYTES:
                message = waiting.popleft()
                size += len(message.body)
                run.append(message)
            if len(waiting) < BACKLOG_MAX // 2:
                self._room.set()
            try:
                if len(run) == 1:
                    await self.broker.put_message(run[0])
                else:
                    await self.broker.put_messages(run)
                self.stored += len(run)
            except Exception as exc:  # noqa: BLE001 - a dead letter is at most once, as in RabbitMQ
                log.warning("AMQP dead-lettering of %d message(s) into %s failed: %s", len(run), topic, exc)


def read_header(properties: Mapping[str, str], name: str) -> Any:
    """A typed header's value as stored (see `write_header`), or None."""
    text = properties.get(name)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


_U32 = struct.Struct(">I")
_DEATH_TYPES = {"count": "l", "time": "T"}  # as RabbitMQ writes them; the rest long strings


def _long_string(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogateescape")
    return b"S" + _U32.pack(len(raw)) + raw


def _death_table(death: Mapping[str, Any]) -> bytes:
    parts = []
    for key, value in death.items():
        name = key.encode("utf-8", "surrogateescape")[:255]
        kind = _DEATH_TYPES.get(key)
        if kind == "l" and isinstance(value, int):
            field = b"l" + struct.pack(">q", value)
        elif kind == "T" and isinstance(value, int):
            field = b"T" + struct.pack(">Q", value)
        elif isinstance(value, list):
            items = b"".join(_long_string(str(v)) for v in value)
            field = b"A" + _U32.pack(len(items)) + items
        else:
            field = _long_string(str(value))
        parts.append(bytes((len(name),)) + name + field)
    body = b"".join(parts)
    return b"F" + _U32.pack(len(body)) + body


def typed_x_death(encoded: bytes, text: str) -> bytes:
    """A content header's property list (`properties.encode_properties`) with its x-death
    header, written there as the stored text, made RabbitMQ's array of tables (count a
    long, time a timestamp). Unchanged when it is not found."""
    deaths = read_header({X_DEATH: text}, X_DEATH)
    if not isinstance(deaths, list):
        return encoded
    flags = int.from_bytes(encoded[:2], "big")
    if not flags & (1 << 13):
        return encoded
    at = 2
    for bit in (15, 14):  # content_type, content_encoding come before the headers
        if flags & (1 << bit):
            at += 1 + encoded[at]
    raw = text.encode("utf-8", "surrogateescape")
    old = b"\x07x-deathS" + _U32.pack(len(raw)) + raw
    table_len = _U32.unpack_from(encoded, at)[0]
    table = encoded[at + 4:at + 4 + table_len]
    where = table.find(old)
    if where < 0:
        return encoded
    tables = b"".join(_death_table(d) for d in deaths if isinstance(d, Mapping))
    new = b"\x07x-deathA" + _U32.pack(len(tables)) + tables
    table = table[:where] + new + table[where + len(old):]
    return encoded[:at] + _U32.pack(len(table)) + table + encoded[at + 4 + table_len:]


def write_header(properties: dict[str, str], name: str, value: Any) -> None:
    """Store a typed header value. Interim: as JSON text until typed headers are kept in
    the store (protocols/amqp/properties.py); then this writes them as a table."""
    properties[name] = json.dumps(value, separators=(",", ":"))
