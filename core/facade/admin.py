"""Admin and metadata: what a front-end calls for management requests and lookups.

Topics: `create_topic`, `create_topic_ready` (for admin requests: answered once the queues'
files exist), `delete_topic`, `get_topic`, `set_topic_attributes`, `topic_names`. Subscription groups: `get_group`
(auto-created when the configuration allows), `update_group`, `delete_group`,
`groups_consuming`. Kafka's DeleteRecords: `delete_records`. Stored messages by key or id:
`query_by_key`, `view_message` (offsetMsgId), `message_by_offset`, `message_by_unique_key`.
Figures: `stats`, `traffic_stats` (statsAll's windows), `last_store_timestamp`,
`store_host` (the head of every offsetMsgId). Front-end state for `rocketport admin`
(AMQP's exchanges and queues...): `views` (core/facade/views.py), so the remoting front-end
can show what another front-end holds without knowing it.

A front-end never changes the topic, group or offset tables (``broker.topics``...) around
these calls: deleting a topic or group here also drops its queues, offsets and held pulls.
Lookups read the index and the CommitLog, so no front-end calls them per message on a hot
path. These methods never put a message.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Final

from rocketport.common.message import MessageExt
from rocketport.common.message_id import decode_offset_msg_id

from ..compaction.service import CompactionService
from ..config import BrokerConfig
from ..consumer._clock import Clock
from ..consumer.clients import ConsumerManager
from ..consumer.long_polling import PullWaiters
from ..errors import InvalidMessage, MessageNotFound, TopicNotFound
from ..live_config import live_config_path, read_live_config
from ..metadata.broker_stats import DailyStats
from ..metadata.offsets import ConsumerOffsetManager
from ..metadata.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from ..metadata.topics import PERM_RW, TopicConfig, TopicConfigManager
from ..metadata.traffic_stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    TOPIC_PUT_NUMS,
    StatsData,
    TrafficStats,
)
from ..store.checkpoint import write_atomically
from ..store.message_store import MessageStore
from ..txn.coordinator import TxnCoordinator
from ..txn.producer_state import ProducerStateTable
from .views import FrontEndViews

# topics the broker keeps for itself: never "unused", whether or not a config names them
_SYSTEM_TOPIC_PREFIXES: Final = ("SCHEDULE_TOPIC_", "RMQ_SYS_", "%RETRY%", "%DLQ%")


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
    # RocketMQ's BrokerStats: since midnight (local time), yesterday, the last second's rates
    put_today: int
    get_today: int
    put_yesterday: int
    get_yesterday: int
    put_tps: float
    get_tps: float


@dataclass(slots=True, frozen=True)
class StoreFigures:
    """The store's positions (CommitLog byte offsets) and files, read for /metrics."""

    log_end: int
    flushed: int
    dispatched: int
    index_built: int
    commit_log_segments: int
    segment_size: int
    disk_usage_ratio: float


class AdminRole:
    """The admin and metadata calls of `core.broker.Broker` (see the module docstring).
    State is the Broker's, set up in its constructor."""

    config: BrokerConfig
    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    pull_waiters: PullWaiters
    consumer_manager: ConsumerManager
    txn: TxnCoordinator
    producer_states: ProducerStateTable
    compaction: CompactionService
    daily_stats: DailyStats
    traffic: TrafficStats
    clock: Clock
    views: FrontEndViews

    @property
    def store_host(self) -> bytes:
        """This broker's store host (IPv4 + port, 8 bytes), the head of every offsetMsgId."""
        return self.store.store_host

    def set_store_port(self, port: int) -> None:
        """The remoting port messages record as their store host: the remoting front-end
        gives the port it bound, before the store opens (a configured listenPort of 0 would
        otherwise send clients' send-backs to port 0)."""
        self.store.set_store_port(port)

    # ---------------------------------------------------------------- topics
    def create_topic(self, topic: str, *, read_queue_nums: int | None = None,
                     write_queue_nums: int | None = None, perm: int = PERM_RW,
                     order: bool = False, attributes: dict[str, str] | None = None) -> TopicConfig:
        """Create or update a topic (RocketMQ's UPDATE_AND_CREATE_TOPIC); ``attributes``
        None keeps an existing topic's attributes."""
        n = self.config.default_topic_queue_nums
        if attributes is None:
            old = self.topics.get(topic)
            attributes = dict(old.attributes) if old is not None else {}
        cfg = TopicConfig(topic, read_queue_nums or write_queue_nums or n,
                          write_queue_nums or read_queue_nums or n, perm, order=order,
                          attributes=attributes)
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

    def topic_changes_together(self) -> contextlib.AbstractContextManager[None]:
        """Topic creations inside are made durable together at its end (one append and
        fsync for a CreateTopics of many); not to be held across an await."""
        return self.topics.deferred()

    async def queues_ready(self) -> None:
        """Wait for the files of the queues created so far (see create_topic_ready)."""
        await self.store.queues_prepared()

    def delete_topic(self, topic: str) -> None:
        if self.topics.remove(topic) is None:
            raise TopicNotFound(topic)
        self.store.delete_topic(topic)
        self.offsets.remove_topic(topic)
        self.txn.forget_topic(topic)  # its transactions' read-rule state (core/txn)
        self.producer_states.forget_topic(topic)
        self.compaction.forget_topic(topic)
        self.pull_waiters.notify_all(topic)  # held pulls on it answer now, not at their timeout

    def set_topic_attributes(self, topic: str, attributes: dict[str, str]) -> TopicConfig:
        """Replace a topic's attributes (its per-topic settings), persisted at once."""
        cfg = self.topics.get(topic)
        if cfg is None:
            raise TopicNotFound(topic)
        cfg.attributes = dict(attributes)
        return self.topics.put(cfg)

    def get_topic(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def topic_names(self) -> list[str]:
        return sorted(self.topics.table)

    # ---------------------------------------------------------------- groups
    def find_group(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config if it exists; never creates one (see `get_group`)."""
        return self.groups.get(group)

    def groups_table(self) -> dict[str, SubscriptionGroupConfig]:
        """Every subscription group's config, by name (a copy)."""
        return dict(self.groups.table)

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

    def groups_consuming(self, topic: str) -> list[str]:
        """Groups online on ``topic`` or with offsets committed on it (RocketMQ's
        QUERY_TOPIC_CONSUME_BY_WHO)."""
        return sorted({*self.consumer_manager.groups_subscribing(topic), *self.offsets.groups_of(topic)})

    # ---------------------------------------------------------------- queues
    def delete_records(self, topic: str, queue_id: int, offset: int) -> int:
        """Raise a queue's min offset to ``offset`` (Kafka DeleteRecords); returns the new min.

        Only the logical start moves: the CommitLog keeps the bytes until retention removes
        their segment, as RocketMQ's store never deletes from the middle of its log.
        """
        if self.topics.get(topic) is None:
            raise TopicNotFound(topic)
        return self.store.truncate_queue_min(topic, queue_id, offset)

    def last_store_timestamp(self, topic: str, queue_id: int) -> int:
        """Store time of the queue's newest message; 0 for an empty queue."""
        newest = self.store.max_offset(topic, queue_id) - 1
        stamp = self.store.store_timestamp_at(topic, queue_id, newest) if newest >= 0 else None
        return stamp or 0

    # ---------------------------------------------------------------- lookups
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

    def message_by_unique_key(self, topic: str, uniq_key: str) -> MessageExt:
        """By the client's unique id (UNIQ_KEY), through the index."""
        for msg in self.query_by_key(topic, uniq_key, max_num=8):
            if msg.uniq_key == uniq_key:
                return msg
        raise MessageNotFound(f"no message {uniq_key!r} in topic {topic!r}")

    # ---------------------------------------------------------------- stats
    def stats(self) -> BrokerStats:
        s, d = self.store, self.daily_stats
        return BrokerStats(
            topics=len(self.topics.table), queues=len(s.consume_queues),
            put_messages=s.put_count, put_bytes=s.put_bytes,
            get_messages=s.get_count, get_bytes=s.get_bytes,
            commit_log_min_offset=s.commitlog.min_offset,
            commit_log_max_offset=s.commitlog.max_offset,
            dispatched_offset=s.dispatched_offset, index_built_offset=s.index.built_offset,
            disk_usage_ratio=s.disk_usage_ratio(), put_today=d.put_today, get_today=d.get_today,
            put_yesterday=d.put_yesterday, get_yesterday=d.get_yesterday, put_tps=d.put_tps,
            get_tps=d.get_tps)

    def traffic_totals(self) -> dict[tuple[str, str], int]:
        """The running totals TrafficStats samples: messages put per topic (its queues'
        max offsets), messages consumed per topic@group (its commits' forward moves), and
        the store's put and get counts under the cluster's name (RocketMQ's broker keys)."""
        totals: dict[tuple[str, str], int] = {}
        for (topic, _), cq in self.store.consume_queues.items():
            key = (TOPIC_PUT_NUMS, topic)
            totals[key] = totals.get(key, 0) + cq.max_offset
        consumed = self.offsets.consumed
        for topic_group in self.offsets.table:
            totals[(GROUP_GET_NUMS, topic_group)] = consumed.get(topic_group, 0)
        cluster = self.config.broker_cluster_name
        totals[(BROKER_PUT_NUMS, cluster)] = self.store.put_count
        totals[(BROKER_GET_NUMS, cluster)] = self.store.get_count
        return totals

    def traffic_stats(self, name: str, key: str) -> StatsData | None:
        """VIEW_BROKER_STATS_DATA: one stats item's minute, hour and day windows (key: a
        topic, topic@group, or the cluster name); None when the broker has no such item."""
        total: int | None = None
        if name == TOPIC_PUT_NUMS:
            cfg = self.topics.table.get(key)
            if cfg is not None:
                queues = (self.store.consume_queues.get((key, q))
                          for q in range(max(cfg.read_queue_nums, cfg.write_queue_nums)))
                total = sum(cq.max_offset for cq in queues if cq is not None)
        elif name == GROUP_GET_NUMS:
            if key in self.offsets.table:
                total = self.offsets.consumed.get(key, 0)
        elif key == self.config.broker_cluster_name and name in (BROKER_PUT_NUMS, BROKER_GET_NUMS):
            total = self.store.put_count if name == BROKER_PUT_NUMS else self.store.get_count
        if total is None:
            return None
        return self.traffic.stats(name, key, total, self.clock() / 1000)

    # ---------------------------------------------------------------- figures for /metrics
    def store_figures(self) -> StoreFigures:
        """Where the CommitLog's writing, flushing, dispatch and index stand, and its files."""
        s = self.store
        log_end = s.commitlog.max_offset
        flush = s.flush_service
        return StoreFigures(log_end, flush.flushed_offset if flush is not None else log_end,
                            s.dispatched_offset, s.index.built_offset, len(s.commitlog.queue.files),
                            s.commitlog.file_size, s.disk_usage_ratio())

    def queue_offsets(self) -> list[tuple[str, int, int, int]]:
        """(topic, queue id, min offset, max offset) of every ConsumeQueue: one pass over
        the queues the store holds, for a scrape (never per message)."""
        return [(topic, queue_id, *cq.bounds()) for (topic, queue_id), cq in list(self.store.consume_queues.items())]

    def committed_offsets(self) -> dict[str, dict[int, int]]:
        """Every committed offset, by ``topic@group``, then queue id (the table itself:
        read it, never change it)."""
        return self.offsets.table

    def consumed_totals(self) -> dict[str, int]:
        """Messages consumed per ``topic@group`` since the broker started: how far its
        commits moved forward (ConsumerOffsetManager.consumed)."""
        return self.offsets.consumed

    def store_timestamp_at(self, topic: str, queue_id: int, offset: int) -> int | None:
        """When the message at ``offset`` of the queue was stored (ms), None when there
        is none (a consumer's lag latency: the first message past its commit)."""
        return self.store.store_timestamp_at(topic, queue_id, offset)

    # ---------------------------------------------------------------- operations (mqadmin)
    def update_config(self, changes: dict[str, str]) -> dict[str, str]:
        """updateBrokerConfig: the live keys changed at once and persisted, so they also
        hold after a restart (rocketport.config_file reads them back between the file and
        --set). Keys read only at start-up are refused, naming each (InvalidConfig)."""
        applied = self.config.update_live(changes)
        path = live_config_path(self.config.store_path_root_dir)
        kept = read_live_config(path)
        kept.update(applied)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, "".join(f"{k}={v}\n" for k, v in sorted(kept.items())).encode())
        return applied

    def delete_expired_commit_log(self) -> int:
        """deleteExpiredCommitLog: CommitLog segments past fileReservedTime go now rather
        than at the deleteWhen hour; how many went."""
        return self.store.delete_expired_files(force=True)

    def unused_topics(self) -> list[str]:
        """Topics whose ConsumeQueues are on disk without a topic config (a config file
        restored from before they were created, say); the system's own topics aside."""
        known = self.topics.table
        return sorted({t for t, _ in self.store.consume_queues
                       if t not in known and not t.startswith(_SYSTEM_TOPIC_PREFIXES)})

    def clean_unused_topics(self) -> list[str]:
        """cleanUnusedTopic: the ConsumeQueues of `unused_topics` deleted; their names."""
        gone = self.unused_topics()
        for topic in gone:
            self.store.delete_topic(topic)
        return gone

    def clean_expired_consume_queues(self) -> int:
        """cleanExpiredCQ: ConsumeQueue files whose every entry points before the CommitLog's
        first record, and the queues of unused topics that hold nothing readable any more;
        how many files and queues went."""
        cl_min = self.store.commitlog.min_offset
        n = sum(cq.delete_expired(cl_min) for cq in list(self.store.consume_queues.values()))
        for topic in self.unused_topics():
            queues = [cq for (t, _), cq in self.store.consume_queues.items() if t == topic]
            if all(cq.max_physical_end <= cl_min for cq in queues):
                self.store.delete_topic(topic)
                n += len(queues)
        return n
