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

from .config import BrokerConfig
from .consumer.long_polling import PullWaiters
from .errors import InvalidMessage, MessageNotFound, QueueNotFound, TopicNotFound
from .message import Message, MessageExt
from .metadata.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from .metadata.offsets import ConsumerOffsetManager
from .metadata.topics import PERM_RW, PERM_WRITE, TopicConfig, TopicConfigManager, validate_topic
from .store.get_result import GetResult
from .store.message_store import MessageStore, PutResult, TagsFilter

log = logging.getLogger(__name__)


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


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        config_dir = os.path.join(config.store_path_root_dir, "config")
        self.store = MessageStore(config)
        self.topics = TopicConfigManager(config_dir)
        self.groups = SubscriptionGroupManager(config_dir)
        self.offsets = ConsumerOffsetManager(config_dir)
        self._queue_rr: dict[str, itertools.count] = {}
        self.pull_waiters = PullWaiters()
        self._tasks: asyncio.TaskGroup | None = None
        self._stop = asyncio.Event()
        self.running = False

    # ================================================================ lifecycle
    async def start(self) -> None:
        """Open the store (recovering it) before anything can be served."""
        os.makedirs(self.config.store_path_root_dir, exist_ok=True)
        self.topics.load()
        self.groups.load()
        self.offsets.load()
        await asyncio.to_thread(self.store.open)
        self.store.dispatch_listeners.append(self.pull_waiters.notify)
        await self.store.start()
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        self._tasks.create_task(self._persist_offsets_loop(), name="persist-offsets")
        self.running = True

    async def stop(self) -> None:
        """Stop in reverse order: background tasks, then the store's clean checkpoint."""
        if not self.running:
            return
        self.running = False
        self._stop.set()
        self.pull_waiters.close()  # held pulls return now instead of at their timeout
        await self._tasks.__aexit__(None, None, None)
        await asyncio.to_thread(self.offsets.persist)
        await self.store.stop()

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
        return self.topics.put(cfg)

    def delete_topic(self, topic: str) -> None:
        if self.topics.remove(topic) is None:
            raise TopicNotFound(topic)
        self.store.delete_topic(topic)
        self.offsets.remove_topic(topic)

    def get_topic(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def topic_names(self) -> list[str]:
        return sorted(self.topics.table)

    def topic_for_write(self, topic: str) -> TopicConfig:
        cfg = self.topics.get(topic)
        if cfg is not None:
            return cfg
        validate_topic(topic)
        if not self.config.auto_create_topic_enable:
            raise TopicNotFound(topic)
        log.info("auto-creating topic %s", topic)
        return self.create_topic(topic)

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

    # ================================================================ put
    async def put_message(self, msg: Message) -> PutResult:
        msg.queue_id = self._writable(msg.topic, msg.queue_id)
        return await self.store.put_message(msg)

    async def put_messages(self, msgs: list[Message]) -> PutResult:
        """One topic, one queue, stored as contiguous records in one append."""
        if not msgs:
            raise InvalidMessage("empty batch")
        queue_id = self._writable(msgs[0].topic, msgs[0].queue_id)
        for m in msgs:
            m.queue_id = queue_id
        return await self.store.put_messages(msgs)

    async def put_record_batch(self, topic: str, queue_id: int, batch: bytes | memoryview,
                               count: int, **kwargs) -> PutResult:
        """A record batch (v2 layout) stored whole as an inner batch of ``count`` messages."""
        queue_id = self._writable(topic, queue_id)
        return await self.store.put_inner_batch(topic, queue_id, batch, count, **kwargs)

    # ================================================================ get
    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int, *,
                     max_bytes: int | None = None,
                     message_filter: TagsFilter | None = None) -> GetResult:
        return self.store.get_messages(topic, queue_id, offset, max_count, max_bytes=max_bytes,
                                       message_filter=message_filter)

    async def wait_for_message(self, topic: str, queue_id: int, offset: int,
                               timeout_s: float) -> bool:
        """Long polling: True once the queue holds a message at ``offset`` or beyond,
        False when ``timeout_s`` passes first. Woken by the dispatcher; no polling."""
        if self.store.max_offset(topic, queue_id) > offset:
            return True
        return await self.pull_waiters.wait(topic, queue_id, offset, timeout_s)

    # ================================================================ offsets
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit(group, topic, queue_id, offset)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.offsets.query(group, topic, queue_id)

    def group_offsets(self, group: str) -> dict[str, dict[int, int]]:
        """Every committed offset of ``group``: {topic: {queue id: offset}}."""
        return {t: self.offsets.offsets_of(group, t) for t in self.offsets.topics_of(group)}

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

    def offset_by_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self.store.offset_by_timestamp(topic, queue_id, timestamp_ms)

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
        try:
            raw = bytes.fromhex(msg_id)
        except ValueError:
            raise MessageNotFound(f"{msg_id!r} is not an offset message id") from None
        if len(raw) != 16:
            raise MessageNotFound(f"{msg_id!r} is not an offset message id")
        return self.message_by_offset(int.from_bytes(raw[8:], "big"))

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
