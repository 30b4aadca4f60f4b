"""Consume: what a front-end calls to read for its consumers and keep their positions.

Reads: `check_readable` (the read rule alone: the topic exists, its perm has PERM_READ, the
queue is one of its read queues), `get_messages` (a read of one queue under that rule),
`pull` (a consumer group's filtered read, held until a message comes or the hold passes) and
`pull_now` (its first read without a coroutine, when that is the answer), and
`wait_for_messages` (long polling, woken by dispatch). Positions: `commit_offset`,
`query_offset`, `group_offsets`, `clone_offsets`, `reset_offsets_by_timestamp`,
`min_offset` / `max_offset`, `offset_by_timestamp` (RocketMQ's: the first message stored at
or after a time, by store timestamp) and `offset_by_record_timestamp` (Kafka's: by the
record's own timestamp inside its batch, with that timestamp). Rebalancing: `lock_batch` /
`unlock_batch` (orderly consumers' queue locks; clients allocate queues themselves).

The read rules live here, once for every protocol: the read rule, the group's consumeEnable
and broadcast checks, the tags-code prefilter and exact filter, and the transactions' read
rule (a queue written by in-place transactions is read below its last stable offset, without
markers and aborted batches; core/txn/visibility.py). A front-end never reads the
store around these calls and never holds a pull by polling (it waits here). These methods
never write a message and never create a topic; `get_messages` and `pull_now` are the read
hot path and stay flat: no coroutine, no call or attribute chain added per read.
"""

from __future__ import annotations

import asyncio
import logging

from ..compaction.service import CompactionService
from ..compaction.snapshot import CompactedSnapshot
from ..consumer.clients import ConsumerManager
from ..consumer.locks import MessageQueueKey, RebalanceLockManager
from ..consumer.long_polling import PullWaiters
from ..errors import (
    BrokerError,
    ConsumeDisabled,
    GroupNotFound,
    QueueNotFound,
    ReplicaNotInSync,
    TopicNotFound,
    TopicNotReadable,
)
from ..ha.election import Election
from ..ha.offset_log import OffsetLog
from ..ha.service import HAService
from ..metadata.offsets import ConsumerOffsetManager
from ..metadata.topics import PERM_READ, TopicConfig, TopicConfigManager
from ..store.get_result import GetResult, GetStatus
from ..store.message_store import MessageStore, TagsFilter
from ..txn.visibility import Isolation, QueueTxnState
from .admin import AdminRole

log = logging.getLogger("rocketport.core.broker")

# Statuses after which a held pull waits for the queue to grow; the others (offset too
# small, offset far beyond the end) are answered at once so the client can correct itself.
_WAITABLE = frozenset({GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_FOUND_NULL,
                       GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE,
                       GetStatus.NO_MATCHED_LOGIC_QUEUE})


def _is_answer(result: GetResult) -> bool:
    """Whether a pull's read is its answer: messages, or a status no wait can change."""
    return bool(result.message_count) or result.status not in _WAITABLE




class ConsumeRole(AdminRole):
    """The consume calls of `core.broker.Broker` (see the module docstring). State is the
    Broker's, set up in its constructor; calls `get_group` of the admin role."""

    store: MessageStore
    topics: TopicConfigManager
    offsets: ConsumerOffsetManager
    ha: HAService
    pull_waiters: PullWaiters
    consumer_manager: ConsumerManager
    lock_manager: RebalanceLockManager
    txn_queues: dict[tuple[str, int], QueueTxnState]  # the transactions' read rule, by queue
    compacted_logs: dict[tuple[str, int], CompactedSnapshot]  # compaction's snapshots, by queue
    compaction: CompactionService
    election: Election | None  # controllerMode etcd's election (Kafka's leader epoch)

    # ---------------------------------------------------------------- reads
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
                     max_bytes: int | None = None, message_filter: TagsFilter | None = None,
                     isolation: Isolation = Isolation.VISIBLE) -> GetResult:
        """A read of one queue, under `check_readable`'s rule and the transactions' read
        rule (``isolation``: every reader sees VISIBLE; a Kafka fetch asks for its raw
        read_uncommitted or read_committed view, see core/txn/visibility.py)."""
        self.check_readable(topic, queue_id)
        if self.compacted_logs:
            compacted = self._compacted_read(topic, queue_id, offset, max_count, max_bytes, message_filter)
            if compacted is not None:
                return compacted
        if isolation is not Isolation.KAFKA_UNCOMMITTED:
            txn = self.txn_queues.get((topic, queue_id))
            if txn is not None:
                return self._stable_read(txn, topic, queue_id, offset, max_count, max_bytes,
                                         message_filter, isolation is Isolation.VISIBLE)
        return self.store.get_messages(topic, queue_id, offset, max_count, max_bytes=max_bytes,
                                       message_filter=message_filter)

    async def pull(self, group: str, topic: str, queue_id: int, offset: int, max_count: int, *,
                   message_filter: TagsFilter | None = None, hold_s: float = 0.0,
                   max_bytes: int | None = None) -> GetResult:
        """A consumer group's filtered get with long polling.

        Filtering happens here, never in a client: the tagsCode prefilter runs on the
        ConsumeQueue and the exact tag / SQL92 check on each candidate, so the segments
        hold only matches (inner-batch records are filtered per record by their reader,
        see ``core.store.inner_batch``). When nothing matches, the pull holds until a message
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
            txn = self.txn_queues.get((topic, queue_id))
            compacted = self.compacted_logs and self._compacted_read(topic, queue_id, offset, max_count,
                                                                     max_bytes, message_filter)
            if compacted:
                result = compacted
            elif txn is None:
                result = store.get_messages(topic, queue_id, offset, max_count, max_bytes=max_bytes,
                                            message_filter=message_filter)
            else:
                result = self._stable_read(txn, topic, queue_id, offset, max_count, max_bytes,
                                           message_filter, True)
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
        txn = self.txn_queues.get((topic, queue_id))
        compacted = self.compacted_logs and self._compacted_read(topic, queue_id, offset, max_count,
                                                                 max_bytes, message_filter)
        if compacted:
            result = compacted
        elif txn is None:
            result = self.store.get_messages(topic, queue_id, offset, max_count, max_bytes=max_bytes,
                                             message_filter=message_filter)
        else:
            result = self._stable_read(txn, topic, queue_id, offset, max_count, max_bytes,
                                       message_filter, True)
        return result if _is_answer(result) else None

    def _compacted_read(self, topic: str, queue_id: int, offset: int, max_count: int, max_bytes: int | None,
                        message_filter: TagsFilter | None) -> GetResult | None:
        """Below a compacted queue's compacted log's end: its read (core/compaction). None
        elsewhere, and for a filter that may skip messages (that read takes the CommitLog's
        records while retention keeps them)."""
        snap = self.compacted_logs.get((topic, queue_id))
        if snap is None or offset >= snap.end or (message_filter is not None and (
                message_filter.prefilter_codes is not None or message_filter.needs_exact_check)):
            return None
        return self.compaction.read(snap, topic, queue_id, offset, max_count, max_bytes)

    async def wait_for_messages(self, positions: list[tuple[str, int, int]], timeout_s: float) -> bool:
        """Long polling on (topic, queue id, offset) positions: True once any holds a
        message at or beyond its offset (a Kafka fetch waits on all its partitions), False
        when ``timeout_s`` passes first; woken by the dispatcher, no polling. A
        queue that transactions wrote to ends at its last stable offset here: a reader
        there waits for the transaction's end, not for records it may not read yet."""
        if self.readable_beyond(positions):
            return True
        return await self.pull_waiters.wait_any(positions, timeout_s)

    def readable_beyond(self, positions: list[tuple[str, int, int]]) -> bool:
        """Whether any (topic, queue id, offset) has a message a reader may take at or
        beyond its offset now (the check `wait_for_messages` makes before it holds)."""
        max_offset = self.store.max_offset
        txn_queues = self.txn_queues
        for topic, queue_id, offset in positions:
            end = max_offset(topic, queue_id)
            if end > offset:
                txn = txn_queues.get((topic, queue_id))
                if txn is None or txn.lso(end) > offset:
                    return True
        return False

    # ---------------------------------------------------------------- positions
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int,
                      metadata: str | None = None) -> None:
        """Commit ``offset``; ``metadata`` (Kafka's commit metadata) is kept with it."""
        self.offsets.commit(group, topic, queue_id, offset, metadata)

    async def offsets_durable(self) -> None:
        """Return once every offset committed before this call is on disk (one save for
        every caller meanwhile), for a protocol whose commit is answered only then (Kafka's
        OffsetCommit); OSError when the offsets file cannot be written. Under SYNC_MASTER
        also once a slave has them (core/ha/offset_log.py); with no slave in sync they are
        the master's alone, and the caller is answered all the same."""
        await self.offsets.durable()
        if self.config.sync_master and self.ha.master is not None and self.ha.master.slaves:
            assert self.ha.offset_log is not None
            try:
                await self.ha.wait(await self.ha.offset_log.flush())
            except ReplicaNotInSync as exc:
                log.debug("committed offsets not replicated: %s", exc)

    def persist_offsets(self) -> None:
        """Write the offsets file now, blocking (an fsync): for a change answered at once
        whose start offsets must outlive a crash beside a file written the same way (an
        AMQP durable queue's declare or binding, saved with its entity file). A master
        with slaves also writes them into the replicated log now, not at the offsets'
        next interval: the record's append runs before the loop reads the client's next
        request, so it precedes anything routed to the queue after it, and a slave
        promoted meanwhile starts the queue where this master did (not at the end)."""
        self.offsets.persist()
        master, offset_log = self.ha.master, self.ha.offset_log
        if master is not None and master.slaves and offset_log is not None:
            asyncio.get_running_loop().create_task(self._offsets_record(offset_log),
                                                   name="offsets into the replicated log")

    @staticmethod
    async def _offsets_record(offset_log: OffsetLog) -> None:
        try:
            await offset_log.flush()
        except BrokerError as exc:  # fenced or full: the interval's record or SlaveSynchronize
            log.warning("consumer offsets not written to the replicated log: %s", exc)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.offsets.query(group, topic, queue_id)

    def query_offset_metadata(self, group: str, topic: str, queue_id: int) -> str:
        """The metadata committed with the group's offset ("" when none)."""
        return self.offsets.query_metadata(group, topic, queue_id)

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

    def reset_offsets_by_timestamp(self, group: str, topic: str, timestamp_ms: int,
                                   force: bool = True) -> dict[int, int]:
        """mqadmin resetOffsetByTime: commit, for every queue of ``topic``, the first offset
        stored at or after ``timestamp_ms``; returns the new offsets. Without ``force`` a
        queue moves only back (RocketMQ's isForce=false: a committed offset already before
        that point stays)."""
        cfg = self.topics.get(topic)
        if cfg is None:
            raise TopicNotFound(topic)
        result = {}
        for queue_id in range(cfg.read_queue_nums):
            offset = self.store.offset_by_timestamp(topic, queue_id, timestamp_ms)
            committed = self.offsets.query(group, topic, queue_id)
            if not force and 0 <= committed < offset:
                offset = committed
            self.offsets.commit(group, topic, queue_id, offset)
            result[queue_id] = offset
        return result

    def min_offset(self, topic: str, queue_id: int) -> int:
        if self.compacted_logs:
            snap = self.compacted_logs.get((topic, queue_id))
            if snap is not None:
                return snap.start
        return self.store.min_offset(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.max_offset(topic, queue_id)

    def leader_epoch(self) -> int:
        """The group's election epoch (core/ha/election.py), Kafka's leader epoch: higher
        after each failover; 0 without an election."""
        election = self.election
        return election.leader.epoch if election is not None and election.leader is not None else 0

    def epoch_end_offset(self, topic: str, queue_id: int, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch for one queue (KIP-101/320): (the largest epoch at
        most ``epoch`` this log followed, the queue offset where the epoch after it began, or
        the queue's end for the current epoch); (-1, -1) for an epoch past the current one.
        The history is this store's epoch file, epoch 0 being the log before any election."""
        if not 0 <= epoch <= self.leader_epoch():
            return -1, -1
        starts = [(e.epoch, e.start_offset) for e in self.election.epoch_file.entries] \
            if self.election is not None else []
        found = max([0] + [e for e, _ in starts if e <= epoch])
        after = [start for e, start in starts if e > epoch]
        if not after:
            return found, self.store.max_offset(topic, queue_id)
        cq = self.store.consume_queues.get((topic, queue_id))
        return found, cq.offset_at_physical(min(after)) if cq is not None else 0

    def offset_by_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self.store.offset_by_timestamp(topic, queue_id, timestamp_ms)

    def offset_by_record_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> tuple[int, int]:
        """Kafka's lookup by time: (first offset at or after it, its timestamp), or
        (max offset, -1); see MessageStore.offset_by_record_timestamp."""
        return self.store.offset_by_record_timestamp(topic, queue_id, timestamp_ms)

    # ---------------------------------------------------------------- rebalancing
    def lock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str) -> set[MessageQueueKey]:
        """LOCK_BATCH_MQ: the queues now held by ``client_id`` (renewed or newly granted)."""
        return self.lock_manager.try_lock_batch(group, mqs, client_id)

    def unlock_batch(self, group: str, mqs: list[MessageQueueKey], client_id: str) -> None:
        self.lock_manager.unlock_batch(group, mqs, client_id)

    def _stable_read(self, txn: QueueTxnState, topic: str, queue_id: int, offset: int, max_count: int,
                     max_bytes: int | None, message_filter: TagsFilter | None,
                     visible_only: bool) -> GetResult:
        """A read of a queue that transactions wrote to: nothing at or past the last stable
        offset; ``visible_only`` (every reader but a Kafka fetch) also reports the LSO as the
        queue's end, so a held pull waits for the transaction's end as for a new message,
        and drops markers and aborted batches."""
        store = self.store
        max_offset = store.max_offset(topic, queue_id)
        lso = txn.lso(max_offset)
        if lso <= offset <= max_offset and offset >= store.min_offset(topic, queue_id):
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, store.min_offset(topic, queue_id),
                             lso if visible_only else max_offset)
        result = store.get_messages(topic, queue_id, offset, min(max_count, max(lso - offset, 1)),
                                    max_bytes=max_bytes, message_filter=message_filter)
        if visible_only:
            result.max_offset = min(result.max_offset, lso)
            txn.drop_invisible(result)
        return result

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
