"""A consumer group whose messages the broker hands out one by one (STOMP, AMQP).

RocketMQ and Kafka consumers pull whole queues and keep their own place; STOMP and AMQP
clients subscribe and expect the broker to push each message to one of the competing
subscribers, honour their prefetch, take acks in any order, give back what a closed
subscriber held and send a refused message to the retry topic. A `DeliveryGroup` is that
behaviour once, on the core's own records: it reads its sources' queues through the
facade's read rule, remembers per queue which offsets still wait for an answer
(`QueueLedger`) and commits, as the group's consumer offset, the lowest of them, so a
restart redelivers exactly what was never acknowledged and every protocol sees the same
offsets and lag. It reads its own ``%RETRY%{group}`` topic too, as RocketMQ push
consumers do. Deliveries are made on the event loop by one pump task per group; a
subscriber's ``deliver`` callback must only write and return.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rocketport.common.message import PROPERTY_RETRY_TOPIC, MessageExt

from ..errors import BrokerError
from ..filter import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, MessageFilter, compile_filter
from ..retry import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from ..store.record import POS_STORE_TIMESTAMP
from ..store.stored_message import StoredMessage
from .ledger import QueueLedger

_I64 = struct.Struct(">q")

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..consumer.long_polling import PullWaiters
    from ..metadata.topics import TopicConfigManager
    from ..store.get_result import GetResult
    from ..store.reader import TagsFilter
    from ..store.writer import PutResult
    from ..txn.visibility import Isolation

log = logging.getLogger(__name__)


class GroupBroker(Protocol):
    """What a delivery group uses of the Broker: its queues' reads and offsets, the topic
    table, send-back for a refused delivery, and the held-pull wake-ups it waits on."""

    config: BrokerConfig
    topics: TopicConfigManager
    pull_waiters: PullWaiters

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int, *,
                     max_bytes: int | None = None, message_filter: TagsFilter | None = None,
                     isolation: Isolation = ...) -> GetResult: ...

    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int,
                      metadata: str | None = None) -> None: ...

    def readable_beyond(self, positions: list[tuple[str, int, int]]) -> bool: ...

    async def send_back_message(self, group: str, msg: MessageExt, *, delay_level: int = 0,
                                max_reconsume_times: int | None = None,
                                origin_msg_id: str | None = None) -> PutResult: ...

# Unacknowledged deliveries a subscriber with prefetch 0 may hold: it bounds the broker's
# memory for a client that never acks.
MAX_UNACKED = 10_000
_READ_BATCH = 256     # messages read from one queue at a time
_DISPATCH_SLICE = 512  # deliveries between yields, so transports can push back (pause)
_IDLE_WAIT_S = 1.0     # a pump with nothing to read rechecks new queues this often
_MISSING_WAIT_S = 0.25  # ... or this often while a source topic does not exist yet
PRIORITY_WINDOW = 4096  # messages a priority group reads ahead and orders by priority
# earlier readers a queue keeps for what it holds (set_sources keep_routed); past that the
# oldest goes and its offsets are read with the next
_ROUTED_MAX = 32

Start = Literal["first", "last"]
_QueueKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Source:
    """One topic the group reads, and which of its messages the group takes."""

    topic: str
    expression: str = "*"  # a RocketMQ tag expression, or SQL92 when ``sql``
    sql: bool = False
    match: Callable[[MessageExt], bool] | None = None  # checked after decoding


@dataclass(slots=True)
class Delivery:
    tag: int  # unique within its group, increasing
    message: MessageExt
    redelivered: bool
    subscriber: Subscriber | None  # None for a `DeliveryGroup.get`
    ledger: QueueLedger = field(repr=False)  # the group's: its queue's


class Subscriber:
    """One consumer of a group (made by `DeliveryGroup.subscribe`)."""

    __slots__ = ("_group", "deliver", "prefetch", "auto_ack", "many", "unacked", "paused", "active", "priority")

    def __init__(self, group: DeliveryGroup, deliver: Callable[[Any], None],
                 prefetch: int, auto_ack: bool, many: bool, priority: int = 0) -> None:
        self._group = group
        self.deliver = deliver
        self.prefetch = prefetch
        self.auto_ack = auto_ack
        self.many = many  # ``deliver`` takes a list of deliveries
        self.unacked = 0
        self.paused = False
        self.active = True
        self.priority = priority  # higher first while it has credit (AMQP's x-priority)

    @property
    def credit(self) -> int:
        if self.paused or not self.active:
            return 0
        if self.auto_ack:
            return _READ_BATCH
        return (self.prefetch or MAX_UNACKED) - self.unacked

    def pause(self) -> None:
        """Deliver nothing more until `resume` (the session's write buffer is full)."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._group._wake_up()

    def set_prefetch(self, prefetch: int) -> None:
        self.prefetch = prefetch
        self._group._wake_up()


class _TopicReader:
    """How the group reads one topic: one store-side filter when a single source names the
    topic, else every source's check after decoding (several AMQP bindings)."""

    __slots__ = ("topic", "store_filter", "accept")

    def __init__(self, topic: str, sources: list[Source]) -> None:
        self.topic = topic
        if len(sources) == 1:
            self.store_filter = _compile(sources[0])
            self.accept = sources[0].match
        else:
            checks = [(_compile(s), s.match) for s in sources]
            self.store_filter = None
            self.accept = lambda m: any(
                (f is None or f.match(m.tags, m.properties)) and (p is None or p(m))
                for f, p in checks)


def _compile(source: Source) -> MessageFilter | None:
    if not source.sql and source.expression.strip() in ("", "*"):
        return None
    kind = EXPRESSION_TYPE_SQL92 if source.sql else EXPRESSION_TYPE_TAG
    return compile_filter(kind, source.expression)


class DeliveryGroup:
    """See the module docstring. Made by `Broker.delivery_group`, one per group name."""

    def __init__(self, broker: GroupBroker, name: str, sources: list[Source], *,
                 start: Start = "first") -> None:
        if start not in ("first", "last"):
            raise ValueError(f"start must be 'first' or 'last', not {start!r}")
        self.name = name
        self._broker = broker
        self._start = start
        self._readers: dict[str, _TopicReader] = {}
        self._ledgers: dict[_QueueKey, QueueLedger] = {}
        # what is read and not handed out yet, and what is handed out and not answered,
        # each with the ledger of its queue
        self._ready: deque[tuple[MessageExt, bool, QueueLedger]] = deque()
        self._unacked: dict[int, Delivery] = {}  # by tag; each knows its queue's ledger
        self._subscribers: list[Subscriber] = []
        self._rr = 0
        self._read_rr = 0
        self._tags = itertools.count(1)
        self._dirty: set[QueueLedger] = set()  # answered since the last commit
        self._woken = False  # set by the group's own events (subscribe, ack, sources ...)
        self._waiter: asyncio.Future[bool] | None = None  # the idle pump's, while it waits
        self._closed = False
        # `handed_out`'s callers: (topic, the end of each of its queues then, future)
        self._watchers: list[tuple[str, dict[int, int], asyncio.Future[None]]] = []
        # per queue: (end offset, reader) for what was sent before the sources changed,
        # ends increasing (`set_sources` with keep_routed)
        self._routed: dict[_QueueKey, list[tuple[int, _TopicReader]]] = {}
        self._priority: Callable[[MessageExt], int] | None = None  # see `order_by_priority`
        self.single_active = False  # only the first subscriber is handed messages (AMQP's SAC)
        self._unsorted = False  # requeued messages went in front: order again
        self.set_sources(sources, start=start)
        self._pump_task = asyncio.get_running_loop().create_task(self._pump(), name=f"delivery:{name}")

    # ------------------------------------------------------------------ subscribers
    def subscribe(self, deliver: Callable[[Any], None], *, prefetch: int = 0,
                  auto_ack: bool = False, many: bool = False, priority: int = 0) -> Subscriber:
        """A new subscriber; ``deliver`` is called with each `Delivery`, or (``many``)
        with the list of a dispatch slice's deliveries to it, one call a slice (a pause
        it asks for then holds from the next slice). Subscribers of a higher
        ``priority`` are served first while they have credit, in turn among equals."""
        sub = Subscriber(self, deliver, max(0, prefetch), auto_ack, many, priority)
        self._subscribers.append(sub)
        self._wake_up()
        return sub

    async def unsubscribe(self, sub: Subscriber, *, keep_unacked: bool = False) -> None:
        """Remove ``sub``; what it held unacknowledged goes back, marked redelivered, or
        (``keep_unacked``: AMQP's basic.cancel) stays outstanding for its acks and nacks
        to settle, as deliveries of a `get` do."""
        if not keep_unacked:
            self._drop(sub)
            return
        sub.active = False
        if sub in self._subscribers:
            self._subscribers.remove(sub)
        for delivery in self._unacked.values():
            if delivery.subscriber is sub:
                delivery.subscriber = None
        sub.unacked = 0

    @property
    def consumer_count(self) -> int:
        return len(self._subscribers)

    @property
    def unacked_count(self) -> int:
        """Messages handed out and not answered yet (RabbitMQ's messages_unacknowledged)."""
        return len(self._unacked)

    @property
    def message_count(self) -> int:
        """Messages not yet handed out (an estimate: unread messages a filter will skip count)."""
        max_offset = self._broker.max_offset
        unread = sum(max(0, max_offset(ledger.topic, ledger.queue_id) - ledger.read_to)
                     for ledger in self._all_ledgers())
        return len(self._ready) + unread

    # ------------------------------------------------------------------ answers
    def ack(self, tags: Iterable[int]) -> int:
        """Acknowledge deliveries; returns how many of ``tags`` were outstanding."""
        count = 0
        pop = self._unacked.pop
        dirty = self._dirty
        last = None
        for tag in tags:
            delivery = pop(tag, None)
            if delivery is None:
                continue
            sub = delivery.subscriber
            if sub is not None:
                sub.unacked -= 1
            ledger = delivery.ledger
            ledger.finished(delivery.message.queue_offset)
            if ledger is not last:  # a cumulative ack's run is mostly one queue's
                dirty.add(ledger)
                last = ledger
            count += 1
        if count:
            self._commit()
            self._wake_up()
        return count

    async def nack(self, tags: Iterable[int], *, requeue: bool, delay_level: int = 0) -> int:
        """Refuse deliveries: back to the group marked redelivered (``requeue``), else to
        ``%RETRY%{group}`` after ``delay_level`` (0: RocketMQ's 3 + reconsume count) or to
        ``%DLQ%{group}`` once the group's retryMaxTimes is reached (negative: at once)."""
        tags = [tag for tag in tags if tag in self._unacked]
        if requeue:
            self._requeue(tags)
            return len(tags)
        for tag in tags:
            delivery = self._unacked[tag]
            await self._broker.send_back_message(self.name, delivery.message, delay_level=delay_level)
            if self._unacked.pop(tag, None) is not None:  # not acked or requeued meanwhile
                if delivery.subscriber is not None:
                    delivery.subscriber.unacked -= 1
                delivery.ledger.finished(delivery.message.queue_offset)
                self._dirty.add(delivery.ledger)
        self._commit()
        self._wake_up()
        return len(tags)

    async def get(self, *, auto_ack: bool = False) -> Delivery | None:
        """One message now without a subscription (AMQP basic.get), or None."""
        if self._priority is not None:
            self._read_ahead()
        if not self._ready:
            self._read(1)
            self._commit()
        if not self._ready:
            return None
        msg, redelivered, ledger = self._ready.popleft()
        delivery = Delivery(next(self._tags), msg, redelivered, None, ledger)
        if auto_ack:
            ledger.finished(msg.queue_offset)
            self._dirty.add(ledger)
            self._commit()
        else:
            self._unacked[delivery.tag] = delivery
        return delivery

    def drop_head(self, refuse: Callable[[MessageExt, int], bool],
                  limit: int) -> tuple[list[MessageExt], MessageExt | None]:
        """Take messages off the head of the group's queue (the next to be handed out)
        while ``refuse(message, behind)`` says so, ``behind`` being how many wait after
        it; at most ``limit``. Each is finished as an acknowledgement finishes it. Returns
        those taken and the message now at the head (None when none is waiting). A queue
        nobody consumes still loses what is past its time or beyond its length this way
        (AMQP's x-message-ttl, per-message expiration, x-max-length), from the head as
        RabbitMQ does; reading the head costs one read when none is read yet."""
        dropped: list[MessageExt] = []
        ready = self._ready
        count: int | None = None
        reads = 0
        while len(dropped) < limit:
            if not ready:
                reads += 1
                if reads > 64 or not self._read(min(_READ_BATCH, limit - len(dropped))) and not ready:
                    break  # nothing more to read (a filter may skip a whole read: go on, bounded)
                continue
            msg, _, ledger = ready[0]
            if count is None:
                count = self.message_count
            if not refuse(msg, count - 1):
                break
            ready.popleft()
            ledger.finished(msg.queue_offset)
            self._dirty.add(ledger)
            dropped.append(msg)
            count -= 1
        if dropped or reads:
            self._commit()
        return dropped, (ready[0][0] if ready else None)

    @staticmethod
    def stored_at(message: MessageExt) -> int:
        """When ``message`` was stored (ms; what a TTL counts from), read straight from a
        stored record's header without decoding the rest of it (a queue expiring many
        messages asks for nothing else of most)."""
        if type(message) is StoredMessage:
            return int(_I64.unpack_from(message.record, POS_STORE_TIMESTAMP)[0])
        return message.store_timestamp

    def order_by_priority(self, priority: Callable[[MessageExt], int] | None) -> None:
        """Hand out higher ``priority(message)`` first among waiting messages (AMQP's
        x-max-priority), in publish order within one priority. The store keeps one log
        per topic, so the group reads ahead up to `PRIORITY_WINDOW` messages and orders
        what it holds: the order is exact while the queue's backlog fits the window."""
        self._priority = priority
        if priority is not None:
            self._read_ahead()

    def waiting_bytes(self, window: int = PRIORITY_WINDOW) -> int:
        """Body bytes of the messages waiting to be handed out (AMQP's
        x-max-length-bytes). The group reads ahead up to ``window`` messages to count
        them; beyond that each unread message counts as the mean of those read."""
        for _ in range(window // _READ_BATCH + 1):
            if len(self._ready) >= window or not self._read(window):
                break
        if self._unsorted:
            self._sort_ready()
        ready = self._ready
        total = sum(len(item[0].body) for item in ready)
        unread = self.message_count - len(ready)
        if unread > 0 and ready:
            total += unread * total // len(ready)
        return total

    def _read_ahead(self) -> None:
        """A priority group: read up to the window and order what waits by priority."""
        for _ in range(PRIORITY_WINDOW // _READ_BATCH):
            if len(self._ready) >= PRIORITY_WINDOW or not self._read(PRIORITY_WINDOW):
                break
        if self._unsorted:
            self._sort_ready()

    def _sort_ready(self) -> None:
        priority = self._priority
        if priority is not None and len(self._ready) > 1:
            self._ready = deque(sorted(self._ready, key=lambda item: -priority(item[0])))  # stable
        self._unsorted = False

    def handed_out(self, topic: str) -> asyncio.Future[None] | None:
        """A future resolved once everything ``topic`` holds now has left the group's
        hands (read and handed out, or skipped by the filter) or no subscriber has credit
        to take more; None when that is so already, or the group does not read ``topic``.
        A STOMP connection that subscribes to what it sends answers the SEND's RECEIPT
        after this, so the MESSAGE comes first, as RabbitMQ's does."""
        cfg = self._broker.topics.get(topic) if topic in self._readers else None
        if cfg is None:
            return None
        max_offset = self._broker.max_offset
        ends = {queue_id: max_offset(topic, queue_id) for queue_id in range(cfg.read_queue_nums)}
        if self._is_handed_out(topic, ends):
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watchers.append((topic, ends, future))
        self._wake_up()
        return future

    def _is_handed_out(self, topic: str, ends: dict[int, int]) -> bool:
        if self._closed or self._credit() <= 0:
            return True
        if any(self._ledger(topic, queue_id).read_to < end for queue_id, end in ends.items()):
            return False
        return not any(ledger.topic == topic for _, _, ledger in self._ready)

    def _settle_watchers(self) -> None:
        kept = []
        for topic, ends, future in self._watchers:
            if future.done():
                continue  # its caller stopped waiting
            if self._is_handed_out(topic, ends):
                future.set_result(None)
            else:
                kept.append((topic, ends, future))
        self._watchers = kept

    # ------------------------------------------------------------------ administration
    def set_sources(self, sources: list[Source], *, start: Start = "last", keep_routed: bool = False) -> None:
        """Read these sources from now on. A topic the group has no offsets on starts at
        its end (``start="last"``: only what is sent from now) or at its beginning.
        ``keep_routed``: what is in the source queues now is still read with the sources
        it was sent under, whatever replaces them (an AMQP unbind or bind changes where
        later publishes go, not what a queue already holds)."""
        by_topic: dict[str, list[Source]] = {}
        for source in sources:
            by_topic.setdefault(source.topic, []).append(source)
        by_topic.setdefault(retry_topic(self.name), [Source(retry_topic(self.name))])
        if start == "last":
            self._start_at_end(t for t in by_topic if t not in self._readers
                               and not t.startswith(RETRY_GROUP_TOPIC_PREFIX))
        if keep_routed:
            self._keep_routed()
        self._readers = {topic: _TopicReader(topic, group) for topic, group in by_topic.items()}
        if keep_routed:
            kept = self._ready
        else:
            kept = deque(item for item in self._ready if item[2].topic in self._readers)
            for msg, _, ledger in self._ready:
                if ledger.topic not in self._readers:
                    ledger.finished(msg.queue_offset)
                    self._dirty.add(ledger)
        self._ready = kept
        for key in [k for k in self._ledgers if k[0] not in self._readers and k not in self._routed]:
            del self._ledgers[key]
        self._commit()
        self._wake_up()

    def _keep_routed(self) -> None:
        """Before the sources change: each queue with unread messages keeps its current
        reader for the offsets up to its end now (`_read` applies it there)."""
        max_offset = self._broker.max_offset
        for ledger in self._all_ledgers():
            key = (ledger.topic, ledger.queue_id)
            if ledger.topic not in self._readers:  # no longer a source: keeps what it had
                continue
            end = max_offset(*key)
            if ledger.read_to < end:
                earlier = self._routed.get(key, [])[-(_ROUTED_MAX - 1):]  # bounded under churn
                self._routed[key] = earlier + [(end, self._readers[ledger.topic])]

    async def purge(self) -> int:
        """Drop every message not yet handed out; returns how many (an estimate, as
        `message_count`). Unacknowledged deliveries stay outstanding."""
        dropped = len(self._ready)
        for msg, _, ledger in self._ready:
            ledger.finished(msg.queue_offset)
            self._dirty.add(ledger)
        self._ready.clear()
        max_offset = self._broker.max_offset
        for ledger in self._all_ledgers():
            end = max_offset(ledger.topic, ledger.queue_id)
            if end > ledger.read_to:
                dropped += end - ledger.read_to
                ledger.read_to = end
                self._dirty.add(ledger)
        self._commit()
        return dropped

    async def close(self) -> None:
        """Stop delivering and commit; what is unacknowledged is redelivered after a restart."""
        if self._closed:
            return
        self._closed = True
        for sub in self._subscribers:
            sub.active = False
        self._pump_task.cancel()
        try:
            await self._pump_task
        except asyncio.CancelledError:
            pass
        self._commit()
        self._settle_watchers()

    # ------------------------------------------------------------------ internals
    def _start_at_end(self, topics: Iterable[str]) -> None:
        """Commit the end of every queue of ``topics`` the group has no offset on."""
        broker = self._broker
        for topic in topics:
            cfg = broker.topics.get(topic)
            if cfg is None:
                continue  # created later: everything in it is new, read from its start
            for queue_id in range(cfg.read_queue_nums):
                if broker.query_offset(self.name, topic, queue_id) < 0:
                    broker.commit_offset(self.name, topic, queue_id, broker.max_offset(topic, queue_id))

    def _all_ledgers(self) -> list[QueueLedger]:
        """A ledger for every queue of every source topic that exists now, and of every
        queue still holding what was routed to the group under earlier sources."""
        out: list[QueueLedger] = []
        get_topic = self._broker.topics.get
        for topic in self._readers:
            cfg = get_topic(topic)
            if cfg is not None:
                out.extend(self._ledger(topic, q) for q in range(cfg.read_queue_nums))
        for topic, queue_id in self._routed:
            if topic not in self._readers:
                out.append(self._ledger(topic, queue_id))
        return out

    def _ledger(self, topic: str, queue_id: int) -> QueueLedger:
        ledger = self._ledgers.get((topic, queue_id))
        if ledger is None:
            committed = self._broker.query_offset(self.name, topic, queue_id)
            ledger = self._ledgers[(topic, queue_id)] = QueueLedger(
                topic, queue_id, committed if committed >= 0 else self._broker.min_offset(topic, queue_id))
        return ledger

    def _commit(self) -> None:
        if not self._dirty:
            return
        commit = self._broker.commit_offset
        for ledger in self._dirty:
            commit(self.name, ledger.topic, ledger.queue_id, ledger.committed)
        self._dirty.clear()

    def _requeue(self, tags: list[int]) -> None:
        back = []
        for tag in tags:
            delivery = self._unacked.pop(tag, None)
            if delivery is None:
                continue
            if delivery.subscriber is not None:
                delivery.subscriber.unacked -= 1
            back.append((delivery.message, True, delivery.ledger))
        self._ready.extendleft(reversed(back))
        if back:
            self._unsorted = self._priority is not None
            self._wake_up()

    def _drop(self, sub: Subscriber) -> None:
        sub.active = False
        if sub in self._subscribers:
            self._subscribers.remove(sub)
        self._requeue(sorted(tag for tag, d in self._unacked.items() if d.subscriber is sub))

    def _eligible(self) -> list[Subscriber]:
        """Who may be handed messages: every subscriber, or the first only (`single_active`)."""
        subs = self._subscribers
        return subs[:1] if self.single_active else subs

    def _credit(self) -> int:
        return sum(sub.credit for sub in self._eligible())

    def _read(self, wanted: int) -> bool:
        """Read up to ``wanted`` messages into the ready list, queue after queue; True when
        any queue's read position moved (so another read may find more)."""
        moved = False
        queues = self._all_ledgers()
        if not queues:
            return False
        broker = self._broker
        tag_header = broker.config.kafka_tag_header
        ready = self._ready
        start = self._read_rr % len(queues)
        max_offset = broker.max_offset
        for ledger in queues[start:] + queues[:start]:
            if len(ready) >= wanted:
                break
            topic = ledger.topic
            if max_offset(topic, ledger.queue_id) == ledger.read_to:
                continue  # caught up: nothing to read (a get costs 3-4 µs a queue)
            count = min(_READ_BATCH, max(1, wanted - len(ready)))
            routed = self._routed.get((topic, ledger.queue_id)) if self._routed else None
            if routed is not None:  # sent under earlier sources: read with those
                while routed and routed[0][0] <= ledger.read_to:
                    routed.pop(0)
                if not routed:
                    del self._routed[(topic, ledger.queue_id)]
                    if topic not in self._readers:
                        del self._ledgers[(topic, ledger.queue_id)]
                        continue
                else:
                    end, reader = routed[0]
                    count = min(count, end - ledger.read_to)  # unfiltered: one offset a message
            if routed:
                store_filter = None
            else:
                reader = self._readers[topic]
                store_filter = reader.store_filter
            try:
                result = broker.get_messages(topic, ledger.queue_id, ledger.read_to, count,
                                             message_filter=store_filter)
            except BrokerError:
                continue  # not readable now (perm, deleted): its place is kept
            msgs = result.stored_messages(tag_header, reader.store_filter)
            if routed and reader.store_filter is not None:  # read unfiltered: its filter here
                check = reader.store_filter
                msgs = [m for m in msgs if check.match(m.tags, m.properties)]
            if reader.accept is not None:
                msgs = [m for m in msgs if reader.accept(m)]
            if msgs:
                if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    for msg in msgs:  # delivered as the topic it was first sent to, as RocketMQ does
                        msg.topic = msg.properties.get(PROPERTY_RETRY_TOPIC, msg.topic)
                ledger.taken([m.queue_offset for m in msgs])
                ready.extend(zip(msgs, itertools.repeat(False), itertools.repeat(ledger)))
                if self._priority is not None:
                    self._unsorted = True
            next_offset = max(result.next_begin_offset, result.min_offset)  # retention may pass us
            if next_offset != ledger.read_to:
                ledger.read_to = next_offset
                self._dirty.add(ledger)
                moved = True
        self._read_rr = start + 1
        return moved

    def _dispatch(self) -> bool:
        """Hand ready messages out, one per subscriber with credit in turn, a slice at a
        time; a subscriber that takes lists (``many``) gets its share after the slice.
        Whether any went out."""
        if self._priority is not None and self._subscribers:
            self._read_ahead()
        ready, subs = self._ready, self._eligible()
        if not ready or not subs:
            return False
        if len(subs) == 1 and subs[0].many:
            return self._dispatch_run(subs[0])
        before = len(ready)
        credits = [sub.credit for sub in subs]
        ranks = [sub.priority for sub in subs]
        ranked = min(ranks) != max(ranks)
        runs: list[list[Delivery] | None] = [[] if sub.many else None for sub in subs]
        n = len(subs)
        i = self._rr % n
        unacked, tags, dirty = self._unacked, self._tags, self._dirty
        failed: tuple[Subscriber, list[Delivery]] | None = None
        for _ in range(min(len(ready), _DISPATCH_SLICE)):
            j = i if i < n else 0
            if ranked:  # the next in turn among the highest priority with credit
                j = _next_ranked(j, credits, ranks)
                if j < 0:
                    break
            elif credits[j] <= 0:  # the next subscriber in turn that has credit
                for step in range(1, n):
                    j = (i + step) % n
                    if credits[j] > 0:
                        break
                else:
                    break
            sub = subs[j]
            i = j + 1
            msg, redelivered, ledger = ready.popleft()
            delivery = Delivery(next(tags), msg, redelivered, sub, ledger)
            if not sub.auto_ack:  # before the callback, which may ack it at once
                unacked[delivery.tag] = delivery
                sub.unacked += 1
            run = runs[j]
            if run is not None:
                run.append(delivery)
                credits[j] -= 1
                continue
            try:
                sub.deliver(delivery)
            except Exception:
                log.exception("delivery to a subscriber of %s failed; the subscriber is dropped", self.name)
                failed = (sub, [delivery])
                break
            if sub.auto_ack:
                ledger.finished(msg.queue_offset)
                dirty.add(ledger)
            credits[j] = sub.credit if sub.paused else credits[j] - 1  # the callback may pause it
        self._rr = i % n
        for sub, run in list(zip(subs, runs)):  # a failed hand-over changes ``subs``
            if run:
                self._hand_over(sub, run)
        if failed is not None:
            self._give_back(*failed)
        return len(ready) < before

    def _dispatch_run(self, sub: Subscriber) -> bool:
        """`_dispatch` for a sole subscriber that takes lists (the common case): its
        slice made in one pass, without taking turns."""
        ready = self._ready
        count = min(len(ready), _DISPATCH_SLICE, sub.credit)
        if count <= 0:
            return False
        popleft, tags = ready.popleft, self._tags
        run = [Delivery(next(tags), msg, redelivered, sub, ledger)
               for msg, redelivered, ledger in (popleft() for _ in range(count))]
        if not sub.auto_ack:  # before the callback, which may ack at once
            self._unacked.update({delivery.tag: delivery for delivery in run})
            sub.unacked += count
        self._hand_over(sub, run)
        return True

    def _hand_over(self, sub: Subscriber, run: list[Delivery]) -> None:
        """A ``many`` subscriber's deliveries of one slice."""
        try:
            sub.deliver(run)
        except Exception:
            log.exception("delivery to a subscriber of %s failed; the subscriber is dropped", self.name)
            self._give_back(sub, run)
            return
        if sub.auto_ack:
            for delivery in run:
                delivery.ledger.finished(delivery.message.queue_offset)
                self._dirty.add(delivery.ledger)

    def _give_back(self, sub: Subscriber, deliveries: list[Delivery]) -> None:
        """Deliveries a failing callback got go back first in line; its subscriber is dropped."""
        for delivery in deliveries:
            if self._unacked.pop(delivery.tag, None) is not None:
                sub.unacked -= 1
        self._ready.extendleft([(d.message, d.redelivered, d.ledger) for d in reversed(deliveries)])
        self._drop(sub)

    def _wake_up(self) -> None:
        self._woken = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    async def _pump(self) -> None:
        while True:
            try:
                handed = self._dispatch()
                self._commit()
                if self._watchers:
                    self._settle_watchers()
                credit = self._credit()
                if credit <= 0:
                    await self._wait(None, None)
                elif handed or self._ready:  # sessions write what went out before the next
                    await asyncio.sleep(0)  # read (latency), and transports may push back
                elif self._read(credit):
                    if not self._ready:  # a long filtered scan must not hold the loop
                        await asyncio.sleep(0)
                    # else: hand out what was read at once (latency)
                else:
                    await self._wait_for_messages()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delivery group %s: pump failed; retrying in 1 s", self.name)
                await asyncio.sleep(1.0)

    async def _wait_for_messages(self) -> None:
        """Until a source queue grows, the group is woken (subscribe, ack, sources), or
        the idle wait passes (new topics and queues are found then)."""
        positions = [(ledger.topic, ledger.queue_id, ledger.read_to)
                     for ledger in self._ledgers.values() if ledger.topic in self._readers]
        if self._broker.readable_beyond(positions):  # a queue _read could not take from
            await asyncio.sleep(0)  # (not readable now): never loop without yielding
            return
        missing = any(self._broker.topics.get(t) is None for t in self._readers
                      if not t.startswith(RETRY_GROUP_TOPIC_PREFIX))
        await self._wait(positions, _MISSING_WAIT_S if missing else _IDLE_WAIT_S)

    async def _wait(self, positions: list[tuple[str, int, int]] | None, timeout_s: float | None) -> None:
        """One future the pump sleeps on, resolved by whichever comes first: `_wake_up`,
        the dispatch of a message to one of ``positions`` (held as a pull waiter), or
        the timeout. A dispatch resumes the pump in the next loop iteration."""
        if self._woken:  # woken since the last wait: go round again, after one yield
            self._woken = False
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        if positions:
            self._broker.pull_waiters.hold_any(positions, waiter)
        timer = None if timeout_s is None else self._broker.pull_waiters.timers.call_later(
            timeout_s, _resolve, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            self._woken = False
            if timer is not None:
                timer.cancel()
            if positions:
                self._broker.pull_waiters.release_any(positions, waiter)


def _next_ranked(start: int, credits: list[int], ranks: list[int]) -> int:
    """From ``start`` on, the first subscriber of the highest rank that has credit; -1: none."""
    top = max((rank for rank, credit in zip(ranks, credits) if credit > 0), default=None)
    if top is None:
        return -1
    n = len(credits)
    for step in range(n):
        j = (start + step) % n
        if credits[j] > 0 and ranks[j] == top:
            return j
    return -1


def _resolve(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)
