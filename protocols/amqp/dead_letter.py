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
import base64
import datetime
import json
import logging
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pamqp import decode

from rocketport.common.message import (
    PROPERTY_AMQP_HEADERS,
    SYSTEM_PROPERTY_NAMES,
    Message,
    MessageExt,
    without_unique_key,
)
from rocketport.common.message import encode_properties as encode_stored  # not the content header's
from rocketport.core.facade.types import PlainSend, now_ms

from .errors import ChannelError
from .exchanges import name_of
from .properties import DEFAULT_EXCHANGE_MARK, typed_headers
from .queue_args import MAXLEN

if TYPE_CHECKING:
    from rocketport.core.broker import Broker

    from .vhost import QueueState, VirtualHost

log = logging.getLogger(__name__)

X_DEATH = "x-death"
X_FIRST_DEATH = ("x-first-death-reason", "x-first-death-queue", "x-first-death-exchange")
BACKLOG_MAX = 16_384  # dead-letter copies waiting to be stored: the sweep waits above it
_RUN_MAX = 512  # copies stored with one append
_RUN_BYTES = 1 << 20
_HOST = ("127.0.0.1", 0)  # a dead-letter copy's born host: the broker's own


def _key(message: MessageExt) -> bytes:
    """What a message's dead-letter copy depends on besides the death: its stored
    properties but their UNIQ_KEY (one publisher's messages share it)."""
    raw = message.properties_bytes() if hasattr(message, "properties_bytes") else encode_stored(message.properties)
    return without_unique_key(raw)


def death_properties(props: Mapping[str, str], queue: str, exchange: str, reason: str,
                     dead_letter_routing_key: str | None, tag_header: str,
                     now: int | None = None) -> dict[str, str]:
    """The properties of a message's dead-letter copy, from its stored ``props`` (see the
    module docstring). ``exchange`` is the exchange the message reached ``queue`` through
    ("" for the default exchange)."""
    routing_key = props.get("TAGS", "")
    tags = routing_key
    out = {k: v for k, v in props.items()  # the tag header: see properties.encode_properties
           if (k not in SYSTEM_PROPERTY_NAMES or k == PROPERTY_AMQP_HEADERS) and k != DEFAULT_EXCHANGE_MARK
           and not (k == tag_header and v == tags)}
    death: dict[str, Any] = {"count": 1, "exchange": exchange, "queue": queue, "reason": reason,
                             "routing-keys": [routing_key],
                             "time": (now if now is not None else now_ms()) // 1000}
    expiration = out.pop("expiration", None)
    if expiration is not None:
        death["original-expiration"] = expiration
    deaths = read_deaths(props)
    same = [d for d in deaths if d.get("queue") == queue and d.get("reason") == reason]
    if same:
        death = dict(same[0])
        count = death.get("count")
        death["count"] = (count if isinstance(count, int) else 0) + 1
    others = [d for d in deaths if not any(d is s for s in same)]
    write_deaths(out, [dict(sorted(death.items()))] + others)
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

    def send(self, state: QueueState, messages: Iterable[MessageExt], reason: str) -> int:
        """Dead-letter stored ``messages`` leaving ``state``'s queue for ``reason``."""
        queue, exchange_name = state.entity.name, self.vhost.exchange_name
        exchanges = self.vhost.entities.exchanges
        names: dict[str, str] = {}  # by topic, where that alone says which

        def came_through(message: MessageExt) -> str:
            topic = message.topic
            name = names.get(topic)
            if name is None:
                name = name_of(topic)
                if name == queue and name in exchanges:  # shared with an exchange: its mark says
                    return exchange_name(topic, queue, message.properties)
                name = names[topic] = "" if name == queue else name  # the default exchange's
            return name
        return self._send(state, ((_key(m), m, m.body, came_through(m)) for m in messages), reason)

    def send_refused(self, state: QueueState, properties: Mapping[str, str], body: bytes,
                     exchange: str) -> int:
        """Dead-letter a publish ``state``'s queue refused (reject-publish-dlx: maxlen)."""
        return self._send(state, [(None, properties, body, exchange)], MAXLEN)

    def _send(self, state: QueueState, messages: Iterable[tuple[bytes | None, Any, bytes, str]],
              reason: str) -> int:
        """The copies of ``messages`` (a key their dead-letter properties can be kept by,
        the message or its properties, the body, the exchange it reached the queue
        through); returns how many go (none without a dead-letter exchange, or where it
        routes nowhere: RabbitMQ drops them then). Copies alike (one publisher's, dying
        together) are made once and stored as one plain send (`Broker.put_plain`) at once;
        what that lane declines waits for `run`, and so does all after it (order)."""
        policy = state.policy
        exchange = policy.dead_letter_exchange
        if exchange is None:
            return 0
        queue, broker = state.entity.name, self.broker
        stamp = now_ms()
        made: dict[tuple[bytes, str], tuple[str, dict[str, str], bytes, Any] | None] = {}
        sends: list[PlainSend] = []
        sent = 0
        for key, source, body, came_through in messages:
            found = made.get((key, came_through)) if key is not None else None
            if found is None:
                properties = source if isinstance(source, Mapping) else source.properties
                found = self._copy(properties, queue, came_through, reason, policy.dead_letter_routing_key,
                                   exchange, stamp)
                if found is None:
                    continue
                if key is not None:
                    made[(key, came_through)] = found
            topic, props, encoded, accepted = found
            sent += 1
            if accepted is None or self._waiting:
                self._waiting.append(Message(topic, body, dict(props)))
                continue
            last = sends[-1] if sends else None
            if last is not None and last.topic == topic and last.properties is encoded and len(last.bodies) < _RUN_MAX:
                last.bodies.append(body)
            else:
                sends.append(PlainSend(topic, accepted[0], encoded, [body], _HOST, accepted[1]))
        if sends:
            put = broker.put_plain(sends)
            for send, outcome in zip(sends, put.stored):
                if type(outcome) is tuple:
                    self.stored += len(send.bodies)
                else:
                    log.warning("AMQP dead-lettering of %d message(s) into %s failed: %s",
                                len(send.bodies), send.topic, outcome)
        if self._waiting:
            self._wake.set()
            if len(self._waiting) >= BACKLOG_MAX:
                self._room.clear()
        return sent

    def _copy(self, properties: Mapping[str, str], queue: str, came_through: str, reason: str,
              routing_key: str | None, exchange: str,
              stamp: int) -> tuple[str, dict[str, str], bytes, Any] | None:
        """(topic, properties, encoded, accepted by the plain lane or None) of one copy."""
        vhost = self.vhost
        props = death_properties(properties, queue, came_through, reason, routing_key, self._tag_header, stamp)
        new_key = props.get("TAGS", "")
        try:
            topic = vhost.publish_topic(exchange, new_key)
        except ChannelError as exc:
            log.info("AMQP queue %s: dead-letter exchange: %s; message dropped", queue, exc.text)
            return None
        if topic is None:
            return None
        if vhost.needs_mark(exchange, new_key):
            props[DEFAULT_EXCHANGE_MARK] = "1"
        encoded = encode_stored(props)
        return topic, props, encoded, self.broker.accept_now(topic, -1, encoded, 0, answers_after_durable=True)

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


_DEATH_NEEDLE = X_DEATH.encode() + b"\x01"  # as properties are stored: name \x01 value \x02


def cycles(message: MessageExt, queue: str) -> bool:
    """Whether ``message`` came back to ``queue`` through dead-lettering alone (RabbitMQ's
    cycle detection: its x-death names ``queue`` and no death since, that one included, was
    a rejection); such a message is dropped there, not dead-lettered again. Decodes only
    messages that have an x-death."""
    raw = message.properties_bytes() if hasattr(message, "properties_bytes") else None
    if raw is not None and _DEATH_NEEDLE not in raw:
        return False
    for death in read_deaths(message.properties):  # most recent first
        if death.get("reason") == "rejected":
            return False
        if death.get("queue") == queue:
            return True
    return False


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


def with_long_header(encoded: bytes, name: str, value: int) -> bytes:
    """A content header's property list with one more header, a long (``l``, as RabbitMQ
    writes x-delivery-count), its headers table made when it has none."""
    raw = name.encode("utf-8", "surrogateescape")[:255]
    field = bytes((len(raw),)) + raw + b"l" + struct.pack(">q", value)
    flags = int.from_bytes(encoded[:2], "big")
    at = 2
    for bit in (15, 14):  # content_type, content_encoding come before the headers
        if flags & (1 << bit):
            at += 1 + encoded[at]
    if flags & (1 << 13):
        table_len = _U32.unpack_from(encoded, at)[0]
        end = at + 4 + table_len
        return encoded[:at] + _U32.pack(table_len + len(field)) + encoded[at + 4:end] + field + encoded[end:]
    return (int.to_bytes(flags | 1 << 13, 2, "big") + encoded[2:at] + _U32.pack(len(field)) + field
            + encoded[at:])


def read_deaths(properties: Mapping[str, str]) -> list[dict[str, Any]]:
    """A message's x-death entries (most recent first): from its typed header table
    (`properties.typed_headers`), else the JSON text an earlier build wrote; each entry's
    time in seconds, its texts as str."""
    table = typed_headers(properties)
    deaths: Any = table.get(X_DEATH) if table else None
    if deaths is None and X_DEATH in properties:
        try:
            deaths = json.loads(properties[X_DEATH])
        except ValueError:
            deaths = None
    if not isinstance(deaths, list):
        return []
    return [{str(k): _plain(v) for k, v in d.items()} for d in deaths if isinstance(d, Mapping)]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return int(value.replace(tzinfo=value.tzinfo or datetime.timezone.utc).timestamp())
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def write_deaths(properties: dict[str, str], deaths: list[dict[str, Any]]) -> None:
    """Store x-death in ``properties``: in the typed header table AMQP consumers get
    (`PROPERTY_AMQP_HEADERS`: the message's other typed entries kept byte for byte, an
    array of tables with count a long and time a timestamp, as RabbitMQ writes it), and as
    JSON text for every other reader."""
    entry = b"\x07x-deathA" + _array(deaths)
    stored = properties.get(PROPERTY_AMQP_HEADERS)
    entries = _entries_without(base64.b64decode(stored), X_DEATH) if stored else b""
    table = entries + entry
    properties[PROPERTY_AMQP_HEADERS] = base64.b64encode(_U32.pack(len(table)) + table).decode("ascii")
    properties[X_DEATH] = json.dumps(deaths, separators=(",", ":"))


def _array(deaths: list[dict[str, Any]]) -> bytes:
    tables = b"".join(_death_table(d) for d in deaths)
    return _U32.pack(len(tables)) + tables


def _entries_without(raw: bytes, name: str) -> bytes:
    """A stored field table's entries (``raw``: length and entries) but the one ``name``,
    the others' octets as they are."""
    end = 4 + _U32.unpack_from(raw, 0)[0]
    at, kept = 4, []
    skip = name.encode("utf-8", "surrogateescape")
    while at < end:
        size = raw[at]
        key = raw[at + 1:at + 1 + size]
        used, _ = decode.embedded_value(raw[at + 1 + size:end])
        stop = at + 1 + size + used
        if key != skip:
            kept.append(raw[at:stop])
        at = stop
    return b"".join(kept)
