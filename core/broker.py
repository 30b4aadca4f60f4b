"""The Broker facade: the one asyncio API every protocol front-end goes through.

Front-ends translate their protocol to these calls and map the typed errors of
``core.errors`` to their own codes; they never reach into the store. Rules live in the
facade (topic validation, auto-creation, queue selection, size limits), so a rule that holds
for one protocol holds for all.

The calls are written by role, one module each under ``core/facade``: produce (puts, the
send lane, send-back), consume (reads, pulls, long polling, offsets, queue locks), delivery
(groups the broker pushes to one message at a time: STOMP, AMQP), admin
(topics, groups, lookups, stats) and transactions (END_TRANSACTION, check-back checkers).
`Broker` composes them as plain base classes: one object, every call a method of it, its
state set up here. This module keeps construction and the lifecycle: the store lock, start
(open and recover the store, then the background tasks) and stop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
import itertools
import logging
import os

from rocketport.common.message import PROPERTY_TAGS
from rocketport.common.tags import tags_code

from .auth.plain_acl import PlainAcl
from .compaction.service import CompactionService
from .config import BrokerConfig
from .consumer._clock import LOOP_TIMERS, Clock, Timers, monotonic_ms
from .consumer.clients import ConsumerManager, ProducerManager
from .consumer.delay_levels import parse_delay_levels
from .consumer.locks import RebalanceLockManager
from .consumer.long_polling import PullWaiters
from .dedup import DedupWindow, recall_stored
from .facade.admin import BrokerStats
from .facade.consume import ConsumeRole
from .facade.delivery import DeliveryRole
from .facade.transactions import TransactionRole
from .facade.views import FrontEndViews
from .ha.election import Election
from .ha.epoch_file import EpochFile
from .ha.metadata_log import METADATA_LOG_TOPIC, MetadataLog
from .ha.offset_log import OFFSET_LOG_TOPIC, OffsetLog
from .ha.service import HAService
from .half_messages import TransactionCheckService
from .metadata.amqp_entities import AmqpEntityManager
from .metadata.broker_stats import DailyStats
from .metadata.offsets import ConsumerOffsetManager
from .metadata.subscription_groups import SubscriptionGroupManager
from .metadata.topics import TopicConfigManager
from .metadata.traffic_stats import SAMPLE_S as TRAFFIC_SAMPLE_S
from .metadata.traffic_stats import TrafficStats
from .periodic import run_every
from .schedule import (
    SCHEDULE_TOPIC,
    DelayLevels,
    DelayOffsets,
    ScheduleMessageService,
    now_ms,
    schedule_due_ms,
)
from .store.message_store import MessageStore
from .store.store_lock import StoreLock
from .txn.coordinator import TxnCoordinator
from .txn.producer_state import ProducerStateTable

__all__ = ["Broker", "BrokerStats"]

log = logging.getLogger(__name__)

PRODUCER_STATE_SNAPSHOT_S = 1.0  # bounds the log a restart scans for producer state
PRODUCER_EXPIRATION_CHECK_S = 600.0  # Kafka's producer.id.expiration.check.interval.ms
STATS_SAMPLE_S = 1.0  # how often today's counters and the TPS are brought up to date
STATS_SAVE_S = 10.0  # how often they reach config/brokerStats.json


def _tags_code_of(topic: str, properties: dict[str, str]) -> int:
    """ConsumeQueue tagsCode: the due time for scheduled messages, else the tag hash."""
    if topic == SCHEDULE_TOPIC:
        return schedule_due_ms(properties)
    return tags_code(properties.get(PROPERTY_TAGS)) if properties else 0


class Broker(TransactionRole, ConsumeRole, DeliveryRole):
    """One per store. Its calls are the role classes' (``core/facade``); their shared state
    is set up here. The roles build on each other as their calls do: produce and consume on
    admin's topics and groups, transactions on produce."""

    def __init__(self, config: BrokerConfig, *, clock: Clock = monotonic_ms,
                 wall_clock: Clock = now_ms, timers: Timers = LOOP_TIMERS) -> None:
        """``clock`` (milliseconds) times client and lock expiry; ``wall_clock`` (wall
        milliseconds) the delay levels' due times; ``timers`` every wait with a timeout
        (held pulls, delivery groups' idle waits, the delay levels). Tests pass fakes."""
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        config_dir = os.path.join(config.store_path_root_dir, "config")
        self._lock = StoreLock(config.store_path_root_dir)
        # controllerMode etcd: every node starts as a slave; the election (core/ha/election.py)
        # makes one the group's master in the configured role
        self.elected_role = config.broker_role
        if config.controller_mode == "etcd":
            config.broker_role = "SLAVE"
        self.store = MessageStore(config, tags_code_of=_tags_code_of,
                                  ruled_topics=frozenset({SCHEDULE_TOPIC}))
        self.topics = TopicConfigManager(config_dir)
        self.groups = SubscriptionGroupManager(config_dir)
        self.offsets = ConsumerOffsetManager(config_dir)
        # exchanges, queues and bindings (the AMQP front-end's rules): kept here, so a slave
        # without that front-end still keeps what its master's log says
        self.amqp_entities = AmqpEntityManager(config_dir)
        # consumer offsets carried in the replicated log (a master writes, a slave applies)
        self.offset_log = OffsetLog(self.store, self.offsets)
        self.store.record_listeners[OFFSET_LOG_TOPIC] = self.offset_log.apply
        self.ha = HAService(config, self.store, self.offset_log)  # the master's port or the slave's client
        self.election = Election(config, self.store, self.ha, EpochFile(config.store_path_root_dir),
                                 promote=self._promote, demote=self._demote, followed=self._role_changed) \
            if config.controller_mode == "etcd" else None
        self.role_listeners: list[Callable[[], None]] = []  # told when an election changes the role
        self._queue_rr: dict[str, itertools.count] = {}
        self.dedup = DedupWindow(recall=functools.partial(recall_stored, self.store))
        self.pull_waiters = PullWaiters(timers)
        self._tasks: asyncio.TaskGroup | None = None
        self._delivery_groups = {}
        self.views = FrontEndViews()
        self._stop = asyncio.Event()
        self.running = False
        # ---- messaging semantics (schedule, transactions, clients)
        self.delay_levels = DelayLevels(parse_delay_levels(config.message_delay_level))
        self.delay_offsets = DelayOffsets(config_dir)
        self.offset_log.delay_offsets = self.delay_offsets  # delay-level progress rides its records
        self.daily_stats = DailyStats(config_dir)
        self.traffic = TrafficStats()
        self.schedule = ScheduleMessageService(
            self.store, self.delay_levels, self.delay_offsets, self.put_restored,
            self.pull_waiters.wait, config.flush_delay_offset_interval, clock=wall_clock, timers=timers)
        self.transactions = TransactionCheckService(
            self.store, self.offsets, put=self._put_system, timeout_ms=config.transaction_time_out,
            check_max=config.transaction_check_max, interval_ms=config.transaction_check_interval)
        self.txn = TxnCoordinator(
            config_dir, put_markers=self._put_markers, max_offset=self.store.max_offset,
            min_offset=self.store.min_offset, commit_offset=self.offsets.commit,
            offsets_durable=self.offsets.durable,
            notify=self.pull_waiters.notify, sync=config.sync_flush,
            max_timeout_ms=config.transaction_max_timeout_ms)
        self.txn_queues = self.txn.queues
        # topic, group, AMQP entity and Kafka transaction changes likewise (core/ha/metadata_log.py)
        self.metadata_log = MetadataLog(self.store, {"topics": self.topics, "groups": self.groups,
                                                     "amqp": self.amqp_entities, "txn": self.txn},
                                        lambda: self.ha.master is not None)
        self.store.record_listeners[METADATA_LOG_TOPIC] = self.metadata_log.apply
        self.producer_states = ProducerStateTable(config_dir, lambda: self.store.commitlog.max_offset,
                                                  config.broker_id)
        self.store.batch_listeners.append(self.producer_states.batch_stored)
        self.consumer_manager = ConsumerManager(config.channel_expired_timeout, clock)
        self.producer_manager = ProducerManager(config.channel_expired_timeout, clock)
        self.lock_manager = RebalanceLockManager(config.rebalance_lock_max_live_time, clock)
        # compacted topics' own compacted logs (core/compaction), read below their ends
        self.compaction = CompactionService(config, self.store, self.topics, self.last_stable_offset)
        self.compacted_logs = self.compaction.snapshots
        self.store.retention_floor = self.compaction.retention_floor

    @functools.cached_property
    def acl(self) -> PlainAcl:
        """The one account and permission file (plainAclFile) every front-end checks:
        remoting signatures, Kafka SASL, AMQP and STOMP logins, HTTP basic auth. Loaded on
        first use (a bad file fails the front-end that needs it at start), re-read on change."""
        return PlainAcl(self.config.plain_acl_file)

    # ================================================================ lifecycle
    @property
    def recovered_from_crash(self) -> bool:
        """True when the last start found no clean-shutdown mark and ran crash recovery."""
        return self.store.recovered_from_crash

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
            self.amqp_entities.load()
            self.delay_offsets.load()
            self.daily_stats.load()
            await asyncio.to_thread(self.store.open)
            await asyncio.to_thread(self.compaction.load)
            await asyncio.to_thread(self.producer_states.rebuild, self.store.stored_batches,
                                    self.store.commitlog.min_offset)
            # a topic deleted after the last snapshot: its batches are still in the log
            self.producer_states.keep_topics(self.topics.table)
            self.dedup.floor = self.store.commitlog.max_offset  # keys below: in the log only
        except BaseException:
            self.compaction.close()
            self.store.close()
            self._lock.release()
            raise
        self.store.dispatch_listeners.append(self.pull_waiters.notify)
        await self.store.start()
        self.transactions.load()
        self.txn.load()
        writes = not self.config.is_slave  # a slave writes only its master's bytes (core/ha)
        if writes:
            await self.txn.recover()  # before anything is served: killed EndTxns completed
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        self._tasks.create_task(run_every(
            self.config.flush_consumer_offset_interval / 1000, self.offsets.save, self._stop,
            name="persisting consumer offsets", survives=(OSError,)), name="persist-offsets")
        self._tasks.create_task(self.schedule.persister(self._stop), name="persist-delay-offsets")
        self._tasks.create_task(run_every(
            STATS_SAMPLE_S, lambda: self.daily_stats.sample(self.store.put_count, self.store.get_count),
            self._stop, name="sampling the message counts"), name="sample-stats")
        self.traffic.sample(self.clock() / 1000, self.traffic_totals())  # the baseline
        self._tasks.create_task(run_every(
            TRAFFIC_SAMPLE_S, lambda: self.traffic.sample(self.clock() / 1000, self.traffic_totals()),
            self._stop, name="sampling the topic and group rates"), name="sample-traffic")
        self._tasks.create_task(run_every(
            STATS_SAVE_S, lambda: asyncio.to_thread(self.daily_stats.save), self._stop,
            name="saving the daily counts", survives=(OSError,)), name="save-stats")
        if writes:
            await self._start_master_services()
        await self.ha.start()
        if self.election is not None:
            self._tasks.create_task(self.election.run(self._stop), name="election")
        self._tasks.create_task(run_every(
            PRODUCER_EXPIRATION_CHECK_S, self._expire_producers, self._stop,
            name="expiring idle producers"), name="expire-producers")
        self._tasks.create_task(self.producer_states.run(self._stop, PRODUCER_STATE_SNAPSHOT_S),
                                name="producer-state-snapshots")
        self._tasks.create_task(run_every(self.config.client_scan_interval / 1000, self._scan_clients,
                                          self._stop, name="client scan"), name="scan-clients")
        self._tasks.create_task(run_every(  # on a slave too: compaction writes no CommitLog
            self.config.compaction_schedule_internal / 1000, self.compaction.run_once, self._stop,
            name="compacting topics"), name="compaction")
        self.running = True

    async def _start_master_services(self) -> None:
        """The services that put on their own (delays due, check-backs, timeouts): a master's."""
        assert self._tasks is not None
        await self.schedule.run(self._tasks)
        self._tasks.create_task(self.transactions.run(), name="transaction-check")
        self._tasks.create_task(self.txn.run(), name="transaction-timeouts")

    def _stop_master_services(self) -> None:
        self.schedule.stop()
        self.transactions.stop()
        self.txn.stop()

    @property
    def route_broker_id(self) -> int:
        """The brokerId routes list this broker under: its own, or 0 (RocketMQ's master id)
        while it is its group's elected master."""
        return 0 if self.election is not None and self.election.is_master else self.config.broker_id

    @property
    def master_broker_id(self) -> int | None:
        """The group's master by its own brokerId, the id a node keeps for life (Kafka's node
        id, so a client keeps its connection to a promoted slave): this broker while it is
        master, the elected master it follows, 0 in a classic group; None while an election
        has no master."""
        if not self.config.is_slave:
            return self.config.broker_id
        if self.election is None:
            return 0
        leader = self.election.leader
        return leader.broker_id if leader is not None else None

    def in_sync_ids(self) -> list[int]:
        """The group's members in sync by their own brokerIds (Kafka's ISR): an elected
        master's in-sync set, else the HA link's view with the master under its own id."""
        election = self.election
        if election is not None and election.is_master:
            return sorted(election.sync_state_set)
        master = self.master_broker_id
        ids = {i for i in self.ha.in_sync_ids() if i}
        return sorted(ids if master is None else ids | {master})

    async def _promote(self) -> None:
        """Elected: the replicated state is taken up as a master's, then the master's
        services start and the routes are told."""
        await self.ha.set_role(self.elected_role)
        self.transactions.load()
        await self.txn.recover()
        await self._start_master_services()
        self._role_changed()

    async def _demote(self) -> None:
        """Fenced or replaced: writes are already refused (the store's write deadline)."""
        self._stop_master_services()
        await self.ha.set_role("SLAVE")
        self._role_changed()

    def _role_changed(self) -> None:
        for listener in self.role_listeners:
            listener()

    def _expire_producers(self) -> None:
        def in_transaction(pid: int, topic: str, queue_id: int) -> bool:
            queue = self.txn_queues.get((topic, queue_id))
            return queue is not None and pid in queue.open

        n = self.producer_states.expire(self.wall_clock(), self.config.producer_id_expiration_ms,
                                        in_transaction)
        if n:
            log.info("forgot %d idle producer queue states (producerIdExpirationMs)", n)

    async def hand_over(self) -> None:
        """First thing on a stop, before any port closes: an elected master refuses writes and
        revokes its lease, so a slave takes over at once (and a closed port never belongs to
        a node that may still write: the election's proof of death counts on that)."""
        if self.election is not None and self.running:
            await self.election.close()

    async def stop(self) -> None:
        """Stop in reverse order: background tasks, then the store's clean checkpoint."""
        if not self.running:
            return
        self.running = False
        self._stop.set()
        if self.election is not None:  # writes stop, then the lease goes: a slave takes over now
            await self.election.close()
        await self.ha.stop()  # waiting SYNC_MASTER puts are answered now
        self._stop_master_services()
        self.compaction.stop()
        await self._close_delivery_groups()
        self.pull_waiters.close()  # held pulls return now instead of at their timeout
        if self._tasks is not None:
            await self._tasks.__aexit__(None, None, None)
        if self.election is not None:
            await self.election.client.close()
        self.txn.close()
        await self.producer_states.save()  # covers the whole log: the next start scans nothing
        await self.schedule.persist()
        await asyncio.to_thread(self.offsets.persist)
        self.daily_stats.sample(self.store.put_count, self.store.get_count)
        await asyncio.to_thread(self.daily_stats.save)
        await self.store.stop()
        self.compaction.close()
        self._lock.release()

    async def __aenter__(self) -> "Broker":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def _scan_clients(self) -> None:
        """Drop silent consumers and producers and purge lapsed queue locks."""
        self.consumer_manager.scan_expired()
        self.producer_manager.scan_expired()
        self.lock_manager.purge_expired()
