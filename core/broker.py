"""The Broker facade: the one asyncio API every protocol front-end goes through.

Front-ends translate their protocol to these calls and map the typed errors of
``core.errors`` to their own codes; they never reach into the store. Rules live here (topic
validation, auto-creation, queue selection, size limits), so a rule that holds for one
protocol holds for all.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from dataclasses import dataclass
from typing import Any

from .config import BrokerConfig
from .consumer.allocate import allocate_averagely, allocate_averagely_by_circle
from .consumer.delay_levels import parse_delay_levels
from .consumer.groups import ConsumerManager, ProducerManager
from .consumer.locks import MessageQueueKey, RebalanceLockManager
from .consumer.long_polling import PullWaiters
from .facade.produce import ProduceRole
from .errors import (
    ConsumeDisabled,
    GroupNotFound,
    InvalidMessage,
    MessageNotFound,
    QueueNotFound,
    TopicNotFound,
    TopicNotReadable,
    TransactionMismatch,
)
from .message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    Message,
    MessageExt,
)
from .message_id import decode_offset_msg_id
from .metadata.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from .metadata.offsets import ConsumerOffsetManager
from .metadata.topics import PERM_READ, PERM_RW, TopicConfig, TopicConfigManager
from .retry import RETRY_GROUP_TOPIC_PREFIX
from .schedule import (
    SCHEDULE_TOPIC,
    DelayLevels,
    DelayOffsets,
    ScheduleMessageService,
    schedule_due_ms,
)
from .store.get_result import GetResult, GetStatus
from .store.message_store import MessageStore, PutResult, TagsFilter
from .store.store_lock import StoreLock
from .tags import tags_code
from .transaction import (
    TransactionChecker,
    TransactionCheckService,
    committed_message,
    is_half,
)

log = logging.getLogger(__name__)

# Statuses after which a held pull waits for the queue to grow; the others (offset too
# small, offset far beyond the end) are answered at once so the client can correct itself.
_WAITABLE = frozenset({GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_FOUND_NULL,
                       GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE,
                       GetStatus.NO_MATCHED_LOGIC_QUEUE})

# consumeFromWhere as RocketMQ clients name it -> what a first start does
_CONSUME_FROM = {
    "LAST": "LAST", "CONSUME_FROM_LAST_OFFSET": "LAST", "CONSUME_FROM_MAX_OFFSET": "LAST",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST": "LAST",
    "FIRST": "FIRST", "CONSUME_FROM_FIRST_OFFSET": "FIRST", "CONSUME_FROM_MIN_OFFSET": "FIRST",
    "TIMESTAMP": "TIMESTAMP", "CONSUME_FROM_TIMESTAMP": "TIMESTAMP",
}


def _is_answer(result: GetResult) -> bool:
    """Whether a pull's read is its answer: messages, or a status no wait can change."""
    return bool(result.message_count) or result.status not in _WAITABLE


_ALLOCATORS = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_averagely_by_circle}


def _tags_code_of(topic: str, properties: dict[str, str]) -> int:
    """ConsumeQueue tagsCode: the due time for scheduled messages, else the tag hash."""
    if topic == SCHEDULE_TOPIC:
        return schedule_due_ms(properties)
    return tags_code(properties.get(PROPERTY_TAGS)) if properties else 0


@dataclass(slots=True)
class BrokerStats:
    topics: int
    queues: int
    put_messages: int
    put_bytes: int
    get_messages: int
    get_bytes: int
    commit_log_min_offset: int
    commit_log_max_offset: int
    dispatched_offset: int
    index_built_offset: int
    disk_usage_ratio: float


class Broker(ProduceRole):
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        config_dir = os.path.join(config.store_path_root_dir, "config")
        self._lock = StoreLock(config.store_path_root_dir)
        self.store = MessageStore(config, tags_code_of=_tags_code_of)
        self.topics = TopicConfigManager(config_dir)
        self.groups = SubscriptionGroupManager(config_dir)
        self.offsets = ConsumerOffsetManager(config_dir)
        self._queue_rr: dict[str, itertools.count] = {}
        self.pull_waiters = PullWaiters()
        self._tasks: asyncio.TaskGroup | None = None
        self._stop = asyncio.Event()
        self.running = False
        # ---- messaging semantics (schedule, transactions, clients)
        self.delay_levels = DelayLevels(parse_delay_levels(config.message_delay_level))
        self.delay_offsets = DelayOffsets(config_dir)
        self.schedule = ScheduleMessageService(
            self.store, self.delay_levels, self.delay_offsets, self.put_restored,
            self.pull_waiters.wait, config.flush_delay_offset_interval)
        self.transactions = TransactionCheckService(
            self.store, self.offsets, put=self._put_system, timeout_ms=config.transaction_time_out,
            check_max=config.transaction_check_max, interval_ms=config.transaction_check_interval)
        self.consumer_manager = ConsumerManager(config.channel_expired_timeout)
        self.producer_manager = ProducerManager(config.channel_expired_timeout)
        self.lock_manager = RebalanceLockManager(config.rebalance_lock_max_live_time)

    @property
    def store_host(self) -> bytes:
        """This broker's store host (IPv4 + port, 8 bytes), the head of every offsetMsgId."""
        return self.store.store_host

    # ================================================================ lifecycle
    async def start(self) -> None:
        """Lock the store, then open (and recover) it before anything can be served.

        StoreLocked when another live process holds the store. A failure before the store
        opened leaves the directory as it was (no abort marker, no checkpoint written).
        """
        self._lock.acquire()  # before reading anything: another broker may be writing it
        try:
            self.topics.load()
            self.groups.load()
            self.offsets.load()
            self.delay_offsets.load()
            await asyncio.to_thread(self.store.open)
        except BaseException:
            self.store.close()
            self._lock.release()
            raise
        self.store.dispatch_listeners.append(self.pull_waiters.notify)
        await self.store.start()
        self.transactions.load()
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        self._tasks.create_task(self._persist_offsets_loop(), name="persist-offsets")
        await self.schedule.run(self._tasks)
        self._tasks.create_task(self.transactions.run(), name="transaction-check")
        self._tasks.create_task(self._scan_clients_loop(), name="scan-clients")
        self.running = True

    async def stop(self) -> None:
        """Stop in reverse order: background tasks, then the store's clean checkpoint."""
        if not self.running:
            return
        self.running = False
        self._stop.set()
        self.schedule.stop()
        self.transactions.stop()
        self.pull_waiters.close()  # held pulls return now instead of at their timeout
        await self._tasks.__aexit__(None, None, None)
        await self.schedule.persist()
        await asyncio.to_thread(self.offsets.persist)
        await self.store.stop()
        self._lock.release()

    async def __aenter__(self) -> "Broker":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def _persist_offsets_loop(self) -> None:
        interval = self.config.flush_consumer_offset_interval / 1000
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), interval)
            except asyncio.TimeoutError:
                pass
            if self.offsets.dirty:
                snapshot = self.offsets.snapshot()
                try:
                    await asyncio.to_thread(self.offsets.file.save, snapshot)
                except OSError:
                    log.exception("persisting consumer offsets failed")
                    self.offsets.dirty = True

    # ================================================================ topics
    def create_topic(self, topic: str, *, read_queue_nums: int | None = None,
                     write_queue_nums: int | None = None, perm: int = PERM_RW,
                     order: bool = False) -> TopicConfig:
        """Create or update a topic (RocketMQ's UPDATE_AND_CREATE_TOPIC)."""
        n = self.config.default_topic_queue_nums
        cfg = TopicConfig(topic, read_queue_nums or write_queue_nums or n,
                          write_queue_nums or read_queue_nums or n, perm, order=order)
        if cfg.read_queue_nums < 1 or cfg.write_queue_nums < 1 or cfg.queue_nums > 1024:
            raise InvalidMessage("queue numbers must be between 1 and 1024")
        cfg = self.topics.put(cfg)
        self.store.prepare_queues(topic, cfg.queue_nums)
        return cfg

    async def create_topic_ready(self, topic: str, **settings: Any) -> TopicConfig:
        """create_topic for admin requests, answered once the new queues' files exist
        (create_topic has them made in the background, up to 5 s): the topic's first
        messages then find them rather than pay a fresh file's first write on the loop."""
        cfg = self.create_topic(topic, **settings)
        await self.store.queues_prepared()
        return cfg

    def delete_topic(self, topic: str) -> None:
        if self.topics.remove(topic) is None:
            raise TopicNotFound(topic)
        self.store.delete_topic(topic)
        self.offsets.remove_topic(topic)
        self.pull_waiters.notify_all(topic)  # held pulls on it answer now, not at their timeout

    def get_topic(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def topic_names(self) -> list[str]:
        return sorted(self.topics.table)

    # ================================================================ put
    async def _put_system(self, msg: Message) -> PutResult:
        """A put into a system topic (op records, half copies): no routing, no topic config
        (system topics live in the store only, as clients never route to them)."""
        return await self.store.put_message(msg)

    # ================================================================ get
    def check_readable(self, topic: str, queue_id: int) -> TopicConfig:
        """The read rule every front-end's reads go through: the topic exists, its perm has
        PERM_READ and ``queue_id`` is one of its read queues. TopicNotFound,
        TopicNotReadable or QueueNotFound otherwise."""
        cfg = self.topics.table.get(topic)
        if cfg is None:
            raise TopicNotFound(topic)
        if not cfg.perm & PERM_READ:
            raise TopicNotReadable(topic)
        if not 0 <= queue_id < cfg.read_queue_nums:
            raise QueueNotFound(topic, queue_id)
        return cfg

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int, *,
                     max_bytes: int | None = None,
                     message_filter: TagsFilter | None = None) -> GetResult:
        """A read of one queue, under `check_readable`'s rule."""
        self.check_readable(topic, queue_id)
        return self.store.get_messages(topic, queue_id, offset, max_count, max_bytes=max_bytes,
                                       message_filter=message_filter)

    async def wait_for_message(self, topic: str, queue_id: int, offset: int,
                               timeout_s: float) -> bool:
        """Long polling: True once the queue holds a message at ``offset`` or beyond,
        False when ``timeout_s`` passes first. Woken by the dispatcher; no polling."""
        return await self.wait_for_messages([(topic, queue_id, offset)], timeout_s)

    async def wait_for_messages(self, positions: list[tuple[str, int, int]], timeout_s: float) -> bool:
        """`wait_for_message` on several (topic, queue id, offset): True once any holds
        a message at or beyond its offset (a Kafka fetch waits on all its partitions)."""
        max_offset = self.store.max_offset
        for topic, queue_id, offset in positions:
            if max_offset(topic, queue_id) > offset:
                return True
        return await self.pull_waiters.wait_any(positions, timeout_s)

    async def pull(self, group: str, topic: str, queue_id: int, offset: int, max_count: int, *,
                   message_filter: TagsFilter | None = None, hold_s: float = 0.0,
                   max_bytes: int | None = None) -> GetResult:
        """A consumer group's filtered get with long polling.

        Filtering happens here, never in a client: the tagsCode prefilter runs on the
        ConsumeQueue and the exact tag / SQL92 check on each candidate, so the segments
        hold only matches (inner-batch records are filtered per record by their reader,
        see ``core.batch_filter``). When nothing matches, the pull holds until a message
        is dispatched to the queue or ``hold_s`` passes, re-checking after every wake;
        filtered-out messages advance ``next_begin_offset`` so they are never re-read.
        Refused with ConsumeDisabled when the group's consumeEnable is off, or when it
        consumes in BROADCASTING mode and its consumeBroadcastEnable is off.
        """
        self.check_readable(topic, queue_id)
        self._check_consumer(group)
        store = self.store
        loop = asyncio.get_running_loop()
        deadline = loop.time() + hold_s
        while True:
            result = store.get_messages(topic, queue_id, offset, max_count, max_bytes=max_bytes,
                                        message_filter=message_filter)
            if _is_answer(result):
                return result
            scanned_to = max(offset, result.next_begin_offset)
            if scanned_to < result.max_offset:
                if scanned_to == offset:
                    return result  # nothing readable here (deleted under us): let the client move
                offset = scanned_to  # the scan limit stopped us: go on after letting others run
                await asyncio.sleep(0)
                continue
            offset = scanned_to
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self.pull_waiters.wait(topic, queue_id, offset, remaining):
                return result

    def pull_now(self, group: str, topic: str, queue_id: int, offset: int, max_count: int, *,
                 message_filter: TagsFilter | None = None,
                 max_bytes: int | None = None) -> GetResult | None:
        """`pull`'s first read, synchronously (a front-end answers it without a coroutine):
        its result when that is the answer whatever the hold, None when `pull` would
        wait or scan on. Same checks and refusals as `pull`."""
        self.check_readable(topic, queue_id)
        self._check_consumer(group)
        result = self.store.get_messages(topic, queue_id, offset, max_count, max_bytes=max_bytes,
                                         message_filter=message_filter)
        return result if _is_answer(result) else None

    def _check_consumer(self, group: str) -> None:
        cfg = self.get_group(group)
        if cfg is None:
            raise GroupNotFound(group)
        if not cfg.consume_enable:
            raise ConsumeDisabled(group)
        if not cfg.consume_broadcast_enable:  # RocketMQ refuses broadcasting consumers then
            info = self.consumer_manager.group_info(group)
            if info is not None and info.message_model == "BROADCASTING":
                raise ConsumeDisabled(group)

    # ================================================================ offsets
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit(group, topic, queue_id, offset)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.offsets.query(group, topic, queue_id)

    def group_offsets(self, group: str) -> dict[str, dict[int, int]]:
        """Every committed offset of ``group``: {topic: {queue id: offset}}."""
        return {t: self.offsets.offsets_of(group, t) for t in self.offsets.topics_of(group)}

    def clone_offsets(self, src_group: str, dest_group: str, topic: str | None = None) -> list[str]:
        """Copy ``src_group``'s committed offsets to ``dest_group`` (RocketMQ's
        CLONE_GROUP_OFFSET), for one topic or every existing topic it committed on;
        returns the topics copied."""
        topics = [topic] if topic else sorted(self.offsets.topics_of(src_group))
        copied = []
        for name in topics:
            if self.topics.get(name) is None:
                continue
            for queue_id, offset in self.offsets.offsets_of(src_group, name).items():
                self.offsets.commit(dest_group, name, queue_id, offset)
            copied.append(name)
        return copied

    def groups_consuming(self, topic: str) -> list[str]:
        """Groups online on ``topic`` or with offsets committed on it (RocketMQ's
        QUERY_TOPIC_CONSUME_BY_WHO)."""
        return sorted({*self.consumer_manager.groups_subscribing(topic), *self.offsets.groups_of(topic)})

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.store.min_offset(topic, queue_id)

    def delete_records(self, topic: str, queue_id: int, offset: int) -> int:
        """Raise a queue's min offset to ``offset`` (Kafka DeleteRecords); returns the new min.

        Only the logical start moves: the CommitLog keeps the bytes until retention removes
        their segment, as RocketMQ's store never deletes from the middle of its log.
        """
        if self.topics.get(topic) is None:
            raise TopicNotFound(topic)
        return self.store.truncate_queue_min(topic, queue_id, offset)

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.max_offset(topic, queue_id)

    def last_store_timestamp(self, topic: str, queue_id: int) -> int:
        """Store time of the queue's newest message; 0 for an empty queue."""
        newest = self.store.max_offset(topic, queue_id) - 1
        stamp = self.store.store_timestamp_at(topic, queue_id, newest) if newest >= 0 else None
        return stamp or 0

    def offset_by_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self.store.offset_by_timestamp(topic, queue_id, timestamp_ms)

    def offset_by_record_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> tuple[int, int]:
        """Kafka's lookup by time: (first offset at or after it, its timestamp), or
        (max offset, -1); see MessageStore.offset_by_record_timestamp."""
        return self.store.offset_by_record_timestamp(topic, queue_id, timestamp_ms)

    # ================================================================ groups
    def get_group(self, group: str) -> SubscriptionGroupConfig | None:
        cfg = self.groups.get(group)
        if cfg is None and self.config.auto_create_subscription_group:
            cfg = self.groups.put(SubscriptionGroupConfig(group))
        return cfg

    def update_group(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        return self.groups.put(config)

    def delete_group(self, group: str) -> None:
        self.groups.remove(group)
        self.offsets.remove_group(group)

    # ================================================================ lookups
    def query_by_key(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                     end_ms: int | None = None) -> list[MessageExt]:
        return self.store.query_by_key(topic, key, max_num, begin_ms, end_ms)

    def message_by_offset(self, commit_log_offset: int) -> MessageExt:
        msg = self.store.message_at(commit_log_offset)
        if msg is None:
            raise MessageNotFound(f"no message at commit-log offset {commit_log_offset}")
        return msg

    def view_message(self, msg_id: str) -> MessageExt:
        """By offsetMsgId (hex host + commit-log offset) as clients send it."""
        return self.message_by_offset(decode_offset_msg_id(msg_id).commit_log_offset)

    # ================================================================ stats
    def stats(self) -> BrokerStats:
        s = self.store
        return BrokerStats(
            topics=len(self.topics.table), queues=len(s.consume_queues),
            put_messages=s.put_count, put_bytes=s.put_bytes,
            get_messages=s.get_count, get_bytes=s.get_bytes,
            commit_log_min_offset=s.commitlog.min_offset,
            commit_log_max_offset=s.commitlog.max_offset,
            dispatched_offset=s.dispatched_offset, index_built_offset=s.index.built_offset,
            disk_usage_ratio=s.disk_usage_ratio())

    # ================================================================ transactions
    def add_transaction_checker(self, checker: TransactionChecker) -> None:
        """One more who answers check-backs (each front-end with producers adds its own):
        ``checker(producer_group, half) -> bool`` must ask a producer of the group without
        blocking and return whether one was asked; checkers are tried in order."""
        self.transactions.checkers.append(checker)

    def remove_transaction_checker(self, checker: TransactionChecker) -> None:
        if checker in self.transactions.checkers:
            self.transactions.checkers.remove(checker)

    async def end_transaction(self, producer_group: str, commit_log_offset: int,
                              commit: bool | None, *, from_check: bool = False) -> PutResult | None:
        """END_TRANSACTION for the half message at ``commit_log_offset``: True commits
        (the real message is put and returned), False rolls back, None (unknown) leaves it
        to the check-back. ``from_check`` only tells the log who answered."""
        half = self.store.message_at(commit_log_offset)
        if half is None or not is_half(half):
            raise MessageNotFound(f"no half message at commit-log offset {commit_log_offset}")
        owner = half.properties.get(PROPERTY_PRODUCER_GROUP)
        if owner and producer_group and owner != producer_group:
            raise TransactionMismatch(
                f"half message {commit_log_offset} belongs to producer group {owner!r}, "
                f"not {producer_group!r}")
        if commit is None:
            log.debug("transaction %d unknown (from check: %s)", commit_log_offset, from_check)
            return None
        result = await self.put_message(committed_message(half)) if commit else None
        await self.transactions.resolve(half)
        return result

    # ================================================================ clients, locks, consume-from
    async def _scan_clients_loop(self) -> None:
        """Drop silent consumers and producers and purge lapsed queue locks."""
        interval = self.config.client_scan_interval / 1000
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), interval)
            except asyncio.TimeoutError:
                pass
            try:
                self.consumer_manager.scan_expired()
                self.producer_manager.scan_expired()
                self.lock_manager.purge_expired()
            except Exception:  # a listener's bug must not take the broker's tasks down
                log.exception("client scan failed")

    def lock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str) -> set[MessageQueueKey]:
        """LOCK_BATCH_MQ: the queues now held by ``client_id`` (renewed or newly granted)."""
        return self.lock_manager.try_lock_batch(group, mqs, client_id)

    def unlock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str) -> None:
        self.lock_manager.unlock_batch(group, mqs, client_id)

    def start_offset(self, group: str, topic: str, queue_id: int, consume_from_where: str,
                     timestamp_ms: int | None = None) -> int:
        """Where a group starts on a queue: its committed offset if it has one, else per
        consumeFromWhere (RocketMQ names or LAST / FIRST / TIMESTAMP).

        LAST starts at 0 while the queue still holds its first message (as the real broker
        answers QUERY_CONSUMER_OFFSET), else at the max offset; retry topics always start
        at their beginning. FIRST starts at the min offset; TIMESTAMP at the first message
        stored at or after ``timestamp_ms`` (required).
        """
        committed = self.offsets.query(group, topic, queue_id)
        if committed >= 0:
            return committed
        where = _CONSUME_FROM.get(str(consume_from_where).upper())
        if where is None:
            raise InvalidMessage(f"unknown consumeFromWhere {consume_from_where!r}")
        min_off = self.store.min_offset(topic, queue_id)
        if where == "FIRST" or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return min_off
        if where == "LAST":
            return 0 if min_off == 0 else self.store.max_offset(topic, queue_id)
        if timestamp_ms is None:
            raise InvalidMessage("CONSUME_FROM_TIMESTAMP needs a timestamp")
        return self.store.offset_by_timestamp(topic, queue_id, timestamp_ms)

    def reset_offsets_by_timestamp(self, group: str, topic: str, timestamp_ms: int) -> dict[int, int]:
        """mqadmin resetOffsetByTime: commit, for every queue of ``topic``, the first offset
        stored at or after ``timestamp_ms``; returns the new offsets."""
        cfg = self.topics.get(topic)
        if cfg is None:
            raise TopicNotFound(topic)
        result = {}
        for queue_id in range(cfg.read_queue_nums):
            offset = self.store.offset_by_timestamp(topic, queue_id, timestamp_ms)
            self.offsets.commit(group, topic, queue_id, offset)
            result[queue_id] = offset
        return result

    def allocate_queues(self, group: str, topic: str, client_id: str,
                        strategy: str = "AVG") -> list[int]:
        """The queue ids of ``topic`` that ``client_id`` takes in ``group`` (clustering),
        computed exactly as RocketMQ clients do, for front-ends that rebalance server-side."""
        cfg = self.topics.get(topic)
        if cfg is None:
            raise TopicNotFound(topic)
        allocate = _ALLOCATORS.get(strategy)
        if allocate is None:
            raise InvalidMessage(f"unknown allocation strategy {strategy!r}")
        clients = self.consumer_manager.client_ids(group)
        if client_id not in clients:
            return []
        return allocate(list(range(cfg.read_queue_nums)), clients, client_id)

    # ================================================================ message ids
    def message_by_unique_key(self, topic: str, uniq_key: str) -> MessageExt:
        """By the client's unique id (UNIQ_KEY), through the index."""
        for msg in self.query_by_key(topic, uniq_key, max_num=8):
            if msg.uniq_key == uniq_key:
                return msg
        raise MessageNotFound(f"no message {uniq_key!r} in topic {topic!r}")
