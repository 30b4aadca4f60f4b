"""Produce: what a front-end calls to store what its producers send.

One message: `put_message` (a delay or a prepared transaction is wrapped here). A batch for
one queue: `put_messages` (decoded messages), `put_batch` (a remoting MessageBatch body, stored
as sent), `put_record_batch` (a Kafka record batch, stored whole as one inner batch),
`put_inner_batch_send` (a remoting batch send flagged INNER_BATCH_FLAG whose body is a record
batch: checked here, deduplicated by its DEDUP_KEY, stored whole the same way). Plain
sends, the lane most producers take: `put_plain`, without a coroutine, for a list of
`PlainSend` records (`core.facade.types`), each one send or a run of bodies that share their
properties (a remoting read's sends, a STOMP client's run of frames, an AMQP publisher's
run), stored in one append; under SYNC_FLUSH the caller answers after the one fsync it is
handed (`PlainPut.durable`), and what the lane cannot take is stored as `put_messages` would
(`PlainPut.later`). A front-end that must know whether the lane takes a send before it
builds one asks `accept_now` first (the remoting send lane declines the rest to its
handlers). Under SYNC_MASTER every put here is answered once a slave acknowledged it
(core/ha): ``durable`` covers the slave's acknowledgement beside the fsync, and the
coroutines raise FlushSlaveTimeout or SlaveNotAvailable (the message stored, the error
carrying its result) for each front-end to answer as its protocol does. A
consumer's give-up on a message: `send_back` (to the group's retry topic, or its dead-letter
topic). `topic_for_write` when a front-end must know the topic before it sends
(auto-created when the configuration allows). `put_restored` is the schedule service's (due
delayed messages), not a front-end's.

The write rules live here, once for every protocol: auto-creation, PERM_WRITE, the queue
(round robin when none is given), and the wrapping of delayed and prepared messages. A
front-end never writes to the store around these calls and never puts into a system topic
(schedule, half, op) itself. These methods never read for a consumer and never touch
offsets; `accept_now` and `put_plain` are the send hot path and stay flat: no coroutine,
no call or attribute chain added per message.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from rocketport.common.batch import CompressionError, CorruptBatch, parse_header
from rocketport.common.batch.checks import checked_header, checked_payload, stored_tags
from rocketport.common.batch.message_batch import decode_batch
from rocketport.common.batch.messages import unique_ids_only
from rocketport.common.message import (
    INNER_BATCH_FLAG,
    PROPERTY_DEDUP_KEY,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TAGS_NEEDLES,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
    MessageExt,
    decode_properties,
    property_bytes,
    transaction_type,
)
from rocketport.common.message_id import offset_msg_id
from rocketport.common.tags import tags_code_of_value

from ..config import BrokerConfig
from ..consumer._clock import Clock
from ..dedup import DEDUP_NEEDLE, DedupWindow, dedup_key, shared_dedup_key
from ..errors import (
    BrokerError,
    GroupNotFound,
    InvalidMessage,
    NotMaster,
    QueueNotFound,
    ReplicaNotInSync,
    StoreUnavailable,
    TopicNotFound,
)
from ..ha.service import HAService
from ..half_messages import is_prepared, wrap_half
from ..metadata.topics import PERM_WRITE, TopicConfig, TopicConfigManager, validate_topic
from ..retry import DEFAULT_MAX_RECONSUME_TIMES, DLQ_QUEUE_NUMS, build_send_back
from ..schedule import SCHEDULE_TOPIC, DelayLevels, needs_schedule, wrap_for_schedule
from ..store.message_store import MessageStore
from .admin import AdminRole
from .types import PlainPut, PlainSend, PutResult

# the facade's log lines keep the logger name they have always had, whichever role writes them
log = logging.getLogger("rocketport.core.broker")

# Encoded properties naming any of these make put_message rewrite the message (delay,
# transaction) or check it (a dedup key, core/dedup.py), so accept_now leaves such messages
# to it; a false match only costs speed.
_DELAY, _DELIVER_MS, _DELAY_SEC, _PREPARED = (name.encode() + b"\x01" for name in (
    PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TRANSACTION_PREPARED))


def _may_wrap(properties: bytes) -> bool:
    """Whether encoded properties may name a delay, a transaction or a dedup key: five
    `find`s, several times faster than one regex alternation over a batch's bytes, and
    than `in` (which acquires a buffer) on a single message's."""
    return _may_delay(properties) or properties.find(DEDUP_NEEDLE) >= 0


def _may_delay(properties: bytes) -> bool:
    """Whether encoded properties may name a delay or a transaction."""
    find = properties.find
    return find(_DELAY) >= 0 or find(_DELIVER_MS) >= 0 or find(_DELAY_SEC) >= 0 or find(_PREPARED) >= 0


class _DedupUnit:
    """`put_batch`'s test of a batch body's entries (`MessageStore.put_message_batch`'s
    ``declines``): stored as they are when none may name a delay, a transaction or a dedup
    key, or when every entry names the same DEDUP_KEY and the window claims it at once.
    Otherwise declined, saying why: ``key`` set, the unit is a repeat (``repeat``) or must
    wait for `DedupWindow.put_unit`; ``key`` None, the body is decoded. Asked again when
    the batch moves to a new segment: the first answer stands."""

    __slots__ = ("window", "topic", "key", "count", "repeat", "claimed", "answer")

    def __init__(self, window: DedupWindow, topic: str) -> None:
        self.window, self.topic = window, topic
        self.key: tuple[str, str] | None = None
        self.count = 0
        self.repeat: PutResult | None = None
        self.claimed = False
        self.answer: bool | None = None

    def declines(self, properties: list[bytes]) -> bool:
        if self.answer is None:
            self.answer = self._decide(properties)
        return self.answer

    def _decide(self, properties: list[bytes]) -> bool:
        joined = b"\x02".join(properties)
        if _may_delay(joined):  # each search once: a chunk's properties are ~60 KB
            return True
        if joined.find(DEDUP_NEEDLE) < 0:
            return False
        key = shared_dedup_key(properties)
        if key is None:
            return True
        self.key, self.count = (self.topic, key), len(properties)
        claim = self.window.claim_now(self.key, self.count)
        if claim is True:
            self.claimed = True
            return False
        self.repeat = None if claim is False else claim
        return True

    def settle(self, result: PutResult | None) -> None:
        """The claimed key's outcome: the put's result, or None when it raised."""
        if self.claimed:
            assert self.key is not None  # claimed: the key was named
            self.claimed = False
            self.window.settle(self.key, result)


def _check_batchable(msg: Message) -> None:
    """As in RocketMQ, a batch may carry neither a delay nor a transaction."""
    _check_sys_flag(msg.sys_flag)
    if (msg.properties and needs_schedule(msg.properties)) or is_prepared(msg):
        raise InvalidMessage("delayed or transactional messages cannot be batched")


def _check_sys_flag(sys_flag: int) -> None:
    """A client never sets the inner-batch flag: only the store's record-batch path does, and
    a plain record claiming it would make its INNER_NUM property size the ConsumeQueue."""
    if sys_flag & INNER_BATCH_FLAG:
        raise InvalidMessage("sysFlag 128 (inner batch) is reserved for stored record batches")


class ProduceRole(AdminRole):
    """The produce calls of `core.broker.Broker` (see the module docstring). State is the
    Broker's, set up in its constructor; calls `create_topic`, `get_group` and
    `message_by_offset` of the admin role."""

    config: BrokerConfig
    store: MessageStore
    topics: TopicConfigManager
    delay_levels: DelayLevels
    wall_clock: Clock  # due times of delayed messages
    dedup: DedupWindow
    ha: HAService
    _queue_rr: dict[str, itertools.count]

    async def put_message(self, msg: Message) -> PutResult:
        """Store one message. A prepared transactional message becomes a half message; a
        message with DELAY / TIMER_DELIVER_MS / TIMER_DELAY_SEC is parked in the schedule
        topic. Either way the result names the real queue and the stored (half or
        scheduled) record, whose commit-log offset END_TRANSACTION refers to. A message
        whose DEDUP_KEY is stored already is not stored again (core/dedup.py)."""
        if dedup_key(msg) is not None:
            result = await self.dedup.put([msg], self._put_routed)
        else:
            result = await self._put_routed([msg])
        if self.config.sync_master:
            await self.ha.wait(result.commit_log_offset + result.wrote_bytes, result)
        return result

    @property
    def waits_durable(self) -> bool:
        """Whether a put is answered only after a wait: the covering fsync (SYNC_FLUSH) or a
        slave's acknowledgement (SYNC_MASTER). A front-end that answers puts itself asks
        for `durable` then."""
        return self.store.sync_flush or self.config.sync_master

    @property
    def plain_lane_open(self) -> bool:
        """Whether `accept_now` may take sends from a caller that answers after `durable`:
        always but under dispatchAfterFlush (records visible only once synced). Fixed
        whatever the role, so a front-end decides its lane once and an elected master's
        lane is a classic one's."""
        return not self.store.defers_dispatch

    async def _replicated(self, result: PutResult) -> PutResult:
        """SYNC_MASTER: ``result`` once a slave acknowledged it (see core/ha/transfer.py)."""
        if self.config.sync_master:
            await self.ha.wait(result.commit_log_offset + result.wrote_bytes, result)
        return result

    async def _put_routed(self, msgs: list[Message]) -> PutResult:
        msg = msgs[0]
        _check_sys_flag(msg.sys_flag)
        real_queue = self._route(msg)
        result = await self.store.put_message(msg)
        result.queue_id = real_queue
        return result

    async def put_messages(self, msgs: list[Message]) -> PutResult:
        """One topic, one queue, stored as contiguous records in one append. As in
        RocketMQ, a batch may carry neither a delay nor a transaction. Messages whose
        DEDUP_KEY is stored already are left out (core/dedup.py)."""
        if not msgs:
            raise InvalidMessage("empty batch")
        if any(dedup_key(m) is not None for m in msgs):
            return await self._replicated(await self.dedup.put(msgs, self._put_batchable))
        return await self._replicated(await self._put_batchable(msgs))

    async def _put_batchable(self, msgs: list[Message]) -> PutResult:
        for m in msgs:
            _check_batchable(m)
        queue_id = self._writable(msgs[0].topic, msgs[0].queue_id)
        for m in msgs:
            m.queue_id = queue_id
        return await self.store.put_messages(msgs)

    async def put_batch(self, topic: str, queue_id: int, batch: bytes, sys_flag: int,
                        born_timestamp: int, born_host: tuple[str, int],
                        reconsume_times: int) -> PutResult:
        """A client's MessageBatch body (`core.batch.message_batch`) for one topic and queue,
        as a remoting batch send carries it. Stored entry by entry with the properties as
        sent, also when every entry names one DEDUP_KEY (a unit: core/dedup.py); decoded first when its properties may name a delay or
        transaction (then refused, as `put_messages` refuses them) or other dedup keys, or
        it goes to the schedule topic (whose tags codes are due times)."""
        _check_sys_flag(sys_flag)
        if topic != SCHEDULE_TOPIC and transaction_type(sys_flag) != TRANSACTION_PREPARED_TYPE:
            queue = self._writable(topic, queue_id)

            def put(declines: Callable[[list[bytes]], bool] | None = None) -> Awaitable[PutResult | None]:
                return self.store.put_message_batch(
                    topic, queue, batch, sys_flag=sys_flag, born_timestamp=born_timestamp,
                    born_host=born_host, reconsume_times=reconsume_times, declines=declines)
            unit = _DedupUnit(self.dedup, topic)
            try:
                result = await put(unit.declines)
            except BaseException:
                unit.settle(None)
                raise
            unit.settle(result)
            if result is None and unit.key is not None:  # a repeat, or a claim to wait for
                result = unit.repeat or await self.dedup.put_unit(unit.key, unit.count, put)
            if result is not None:
                return await self._replicated(result)
        return await self.put_messages([
            Message(topic, bytes(m.body), m.properties, m.flag, queue_id, sys_flag, born_timestamp,
                    born_host, reconsume_times) for m in decode_batch(batch)])

    async def put_record_batch(self, topic: str, queue_id: int, batch: bytes | memoryview,
                               count: int, *, replicated: bool = True, **kwargs) -> PutResult:
        """A record batch (v2 layout) stored whole as an inner batch of ``count`` messages;
        ``replicated`` False answers a SYNC_MASTER's put without the slave (Kafka acks=1)."""
        queue_id = self._writable(topic, queue_id)
        result = await self.store.put_inner_batch(topic, queue_id, batch, count, **kwargs)
        return await self._replicated(result) if replicated else result

    async def put_inner_batch_send(self, topic: str, queue_id: int, batch: bytes | memoryview,
                                   properties: dict[str, str], born_timestamp: int,
                                   born_host: tuple[str, int]) -> PutResult:
        """A remoting batch send whose sysFlag carries INNER_BATCH_FLAG (as RocketMQ 5 marks a
        batch to store as one inner batch): its body is one record batch (v2, no producer id,
        not transactional), stored whole as one CommitLog record of ``count`` messages, each
        with its own offset, read per message by every front-end (core.batch.messages). The
        only property the send may carry is DEDUP_KEY, naming the batch as one unit
        (core/dedup.py): the Spark writer's chunks. Checked here as the Kafka front-end checks
        a produced batch: magic, CRC32C, count; each record's tags code from its TAGS (or tag)
        header, so a tag subscription's prefilter sees it."""
        unknown = set(properties) - {PROPERTY_DEDUP_KEY}
        if unknown:
            raise InvalidMessage(f"an inner batch send carries no properties but DEDUP_KEY: {sorted(unknown)}")
        count, tags_codes, shared, ids = self._checked_record_batch(batch)
        queue = self._writable(topic, queue_id)
        key = properties.get(PROPERTY_DEDUP_KEY)
        kept = {**properties, **shared}

        def put() -> Awaitable[PutResult]:
            return self.store.put_inner_batch(topic, queue, batch, count, tags_codes=tags_codes,
                                              properties=kept or None, born_timestamp=born_timestamp,
                                              born_host=born_host, unique_ids=ids)
        if key is None:
            result = await put()
        else:
            stored = await self.dedup.put_unit((topic, key), count, put)
            assert stored is not None  # `put` answers a PutResult or raises
            result = stored
        return await self._replicated(result)

    def _checked_record_batch(self, batch: bytes | memoryview
                              ) -> tuple[int, int | list[int], dict[str, str], list[bytes] | None]:
        """(records, tags codes, the batch's shared TAGS as a property, the records' ids when
        they are their only keys) of a record batch a client sent to be stored whole;
        InvalidMessage for one the store must not keep. Records whose one header is their
        id (the Spark writer's chunks of values: messages.unique_ids_only) have no tag."""
        view = memoryview(batch)
        try:
            size = parse_header(view).size
            if size != len(view):  # before the CRC, which a cut batch fails too
                raise CorruptBatch(f"batch length {size} is not the send's {len(view)}")
            header = checked_header(view)
            if header.is_control or header.is_transactional or header.producer_id >= 0:
                raise CorruptBatch("control, transactional and idempotent batches are Kafka's only")
            count = header.records_count
            payload = checked_payload(view, header)
            # records whose one header is their id have no tag (unless the tag header is that name)
            ids = (unique_ids_only(payload, count)
                   if self.config.kafka_tag_header != PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX else None)
            if ids is not None:
                return count, 0, {}, ids
            tags_codes, shared = stored_tags(payload, count, self.config.kafka_tag_header)
        except (CorruptBatch, CompressionError) as exc:
            raise InvalidMessage(f"inner batch: {exc}") from None
        return count, tags_codes, shared or {}, None

    def accept_now(self, topic: str, queue_id: int, properties: bytes,
                   sys_flag: int, *, answers_after_durable: bool = False) -> tuple[int, int] | None:
        """Whether `put_plain` may store this message as it is: (queue id, tags code), or
        None when it needs `put_message` (a topic to auto-create or not writable, a
        transaction or delay to wrap, or SYNC_FLUSH, which must wait, unless the caller
        ``answers_after_durable``: it answers only once `durable` resolves, and nothing
        under dispatchAfterFlush). The properties are given encoded, as a remoting send
        carries them, and stored as sent. The rules that raise (the queue) are the calls
        `put_message` makes."""
        cfg = self.topics.get(topic)
        store = self.store
        if (cfg is None or not cfg.perm & PERM_WRITE
                or ((store.sync_flush or self.config.sync_master)
                    and (not answers_after_durable or store.defers_dispatch))
                or sys_flag & INNER_BATCH_FLAG  # refused by put_message, which says why
                or sys_flag & TRANSACTION_ROLLBACK_TYPE == TRANSACTION_PREPARED_TYPE
                or topic == SCHEDULE_TOPIC
                or (properties and _may_wrap(properties))):
            return None
        return (self._select_queue(cfg, queue_id),
                tags_code_of_value(property_bytes(properties, TAGS_NEEDLES)) if properties else 0)

    def put_plain(self, sends: list[PlainSend], *, durable: bool = False) -> PlainPut:
        """The plain-send lane every front-end uses: store ``sends`` in order, those the
        lane can take synchronously and in one append (`PlainPut.stored`), the rest as
        `put_messages` would (`PlainPut.later`). A send not accepted yet (``tags_code``
        None) is accepted here for a caller that answers after ``durable``; the first one
        refused and every send after it go to ``later``, so that order holds. ``durable``:
        the caller answers only once they are on disk, and gets the future to wait for
        under SYNC_FLUSH (one fsync for them all). Errors are per send; a store refusing
        every put (StoreUnavailable) refuses each."""
        taken = len(sends)
        for i, send in enumerate(sends):
            if send.tags_code is None:
                accepted = self.accept_now(send.topic, send.queue_id, send.properties, send.sys_flag,
                                           answers_after_durable=True)
                if accepted is None:
                    taken = i
                    break
                send.queue_id, send.tags_code = accepted
        now = sends if taken == len(sends) else sends[:taken]
        try:
            stored = self.store.append_sends(now) if now else []
        except BrokerError as exc:
            stored = [exc] * taken
        except OSError as exc:  # a limit or fault of the store's files it did not type (EMFILE,
            log.warning("%d sends refused as retriable: %s", taken, exc)  # EIO): every front-end
            refused = StoreUnavailable(str(exc))  # answers it as its retriable resource error
            stored = [refused] * taken
        return PlainPut(stored, self.durable() if durable and now else None,
                        self._put_later(sends[taken:]) if taken < len(sends) else None)

    def durable(self) -> asyncio.Future[Any] | None:
        """A future resolved once everything stored so far is on disk (SYNC_FLUSH) and
        acknowledged by a slave (SYNC_MASTER: else it fails with FlushSlaveTimeout or
        SlaveNotAvailable); None under ASYNC_FLUSH and ASYNC_MASTER. (A STOMP DISCONNECT
        receipt waits for it.)"""
        flushed = self.store.durable()
        if not self.config.sync_master:
            return flushed
        replicated = self.ha.wait(self.store.commitlog.max_offset)
        return replicated if flushed is None else _both(flushed, replicated)

    async def _put_later(self, sends: list[PlainSend]) -> list[PutResult]:
        """Sends the lane refused, as `put_messages` stores them: one put per run of sends
        to one topic and queue, in turn (each message with a properties dict of its own:
        the core may rewrite it); the first refusal raises, and nothing after it is put."""
        results: list[PutResult] = []
        unreplicated: ReplicaNotInSync | None = None
        for _, group in itertools.groupby(sends, key=lambda s: (s.topic, s.queue_id)):
            run = list(group)
            msgs = []
            for s in run:
                props = decode_properties(s.properties)
                msgs += [Message(s.topic, bytes(body), dict(props), s.flag, s.queue_id, s.sys_flag,
                                 s.born_timestamp, s.born_host, s.reconsume_times) for body in s.bodies]
            try:
                results += [await self.put_messages(msgs)] * len(run)
            except ReplicaNotInSync as exc:  # stored: the runs after it are stored too
                unreplicated = unreplicated or exc
                results += [exc.result] * len(run)  # type: ignore[list-item]
        if unreplicated is not None:
            raise unreplicated
        return results

    async def send_back(self, group: str, commit_log_offset: int, *, delay_level: int = 0,
                        max_reconsume_times: int | None = None,
                        origin_msg_id: str | None = None) -> PutResult:
        """RocketMQ's CONSUMER_SEND_MSG_BACK for the message at ``commit_log_offset``
        (see `send_back_message`)."""
        msg = self.message_by_offset(commit_log_offset)
        if msg.sys_flag & INNER_BATCH_FLAG:
            raise InvalidMessage("a record batch is sent back per record by its front-end")
        return await self.send_back_message(group, msg, delay_level=delay_level,
                                            max_reconsume_times=max_reconsume_times,
                                            origin_msg_id=origin_msg_id)

    async def send_back_message(self, group: str, msg: MessageExt, *, delay_level: int = 0,
                                max_reconsume_times: int | None = None,
                                origin_msg_id: str | None = None) -> PutResult:
        """``msg`` (a stored message as read, records of batches included) goes to
        ``%RETRY%{group}`` after delay level ``3 + reconsumeTimes`` (or ``delay_level``),
        or to ``%DLQ%{group}`` once reconsumed ``max_reconsume_times`` times (default: the
        group's retryMaxTimes) or when ``delay_level`` is negative."""
        cfg = self.get_group(group)
        if cfg is None:
            raise GroupNotFound(group)
        max_times = max_reconsume_times if max_reconsume_times is not None else cfg.retry_max_times
        back = build_send_back(
            msg, group, delay_level=delay_level,
            max_reconsume_times=max_times if max_times >= 0 else DEFAULT_MAX_RECONSUME_TIMES,
            origin_msg_id=origin_msg_id,
            offset_msg_id=offset_msg_id(self.store.store_host, msg.commit_log_offset))
        topic = back.message.topic
        if self.topics.get(topic) is None:
            if back.dead_letter:  # written only, as RocketMQ 4: nobody consumes it by accident
                self.create_topic(topic, read_queue_nums=DLQ_QUEUE_NUMS,
                                  write_queue_nums=DLQ_QUEUE_NUMS, perm=PERM_WRITE)
            else:
                queues = max(1, cfg.retry_queue_nums)
                self.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        return await self.put_message(back.message)

    def topic_for_write(self, topic: str) -> TopicConfig:
        cfg = self.topics.get(topic)
        if cfg is not None:
            return cfg
        validate_topic(topic)
        if self.store.slave:  # a slave's topics are its master's (core/ha)
            raise NotMaster(self.config.broker_name)
        if not self.config.auto_create_topic_enable:
            raise TopicNotFound(topic)
        log.info("auto-creating topic %s", topic)
        return self.create_topic(topic)

    async def put_restored(self, msgs: list[Message]) -> list[PutResult | BrokerError]:
        """Put messages the schedule service restored as `put_message` would, in order
        within each queue; one outcome per message (a BrokerError is that message's alone).

        The messages of one queue are stored with one append (delivery of a due level is
        mostly puts, and a batch pays the per-put costs once), and the queues are put
        together, so under SYNC_FLUSH one group commit covers the round. A batch the store
        refuses (one message too large...) is put again message by message. Raises
        StoreUnavailable, which fails the whole round (it is delivered again).
        """
        outcomes: list[PutResult | BrokerError] = []
        batches: dict[tuple[str, int], list[list[Message]]] = {}  # per queue, in order
        room: dict[tuple[str, int], int] = {}  # body bytes the queue's last batch may take
        byte_cap = self.config.max_message_size // 2  # property bytes are not counted
        for msg in msgs:
            try:
                self._route(msg)
            except StoreUnavailable:
                raise
            except BrokerError as exc:
                outcomes.append(exc)
                continue
            key = (msg.topic, msg.queue_id)
            size = len(msg.body)
            if room.get(key, -1) < size:
                batches.setdefault(key, []).append([])
                room[key] = byte_cap
            batches[key][-1].append(msg)
            room[key] -= size
        results = await asyncio.gather(*(self._put_batches(b) for b in batches.values()),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
            outcomes += result
        return outcomes

    # ---------------------------------------------------------------- routing and batching
    def _select_queue(self, cfg: TopicConfig, queue_id: int) -> int:
        if queue_id < 0:
            rr = self._queue_rr.get(cfg.topic_name)
            if rr is None:
                rr = self._queue_rr[cfg.topic_name] = itertools.count()
            return next(rr) % cfg.write_queue_nums
        if queue_id >= cfg.write_queue_nums:
            raise QueueNotFound(cfg.topic_name, queue_id)
        return queue_id

    def _writable(self, topic: str, queue_id: int) -> int:
        cfg = self.topic_for_write(topic)
        if not cfg.perm & PERM_WRITE:
            raise InvalidMessage(f"topic {topic!r} is not writable")
        return self._select_queue(cfg, queue_id)

    def _route(self, msg: Message) -> int:
        """Choose the queue of ``msg`` and wrap it, in place, as a half message when it is
        prepared or as a scheduled one when it must wait; returns the real queue."""
        msg.queue_id = real_queue = self._writable(msg.topic, msg.queue_id)
        props = msg.properties
        if props or msg.sys_flag:
            if is_prepared(msg):
                wrap_half(msg)  # RocketMQ ignores a delay on the prepare; the commit honours it
            elif props and needs_schedule(props):
                wrap_for_schedule(msg, self.delay_levels, self.wall_clock())
        return real_queue

    async def _put_batches(self, batches: list[list[Message]]) -> list[PutResult | BrokerError]:
        """One queue's batches, in turn (so its order holds)."""
        outcomes: list[PutResult | BrokerError] = []
        for batch in batches:
            outcomes += await self._put_batch(batch)
        return outcomes

    async def _put_batch(self, msgs: list[Message]) -> list[PutResult | BrokerError]:
        """Routed messages of one queue: one append, or one put each if that is refused."""
        if len(msgs) > 1:
            try:
                return [await self.store.put_messages(msgs)] * len(msgs)
            except StoreUnavailable:
                raise
            except BrokerError:  # refused before anything was written
                pass
        outcomes: list[PutResult | BrokerError] = []
        for msg in msgs:
            try:
                outcomes.append(await self.store.put_message(msg))
            except StoreUnavailable:
                raise
            except BrokerError as exc:
                outcomes.append(exc)
        return outcomes


def _both(first: asyncio.Future, second: asyncio.Future) -> asyncio.Future[int]:
    """A future done when both are: the first's error if either fails (the fsync's first)."""
    both: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def settle(_: asyncio.Future) -> None:
        if both.done() or not (first.done() and second.done()):
            return
        for fut in (first, second):
            if not fut.cancelled() and fut.exception() is not None:
                both.set_exception(fut.exception())  # type: ignore[arg-type]
                return
        both.set_result(first.result() if not first.cancelled() else 0)

    first.add_done_callback(settle)
    second.add_done_callback(settle)
    return both
