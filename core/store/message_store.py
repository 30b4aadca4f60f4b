"""DefaultMessageStore: the CommitLog, its ConsumeQueues and index, behind one API.

Puts append to the CommitLog on the event loop (memcpy into the mapping), assign queue
offsets, and dispatch ConsumeQueue entries; a message becomes visible when dispatched —
at once under ASYNC_FLUSH, after the covering fdatasync under SYNC_FLUSH, so a consumer is
never served a message that a crash could take back. Reads return memoryview slices.
Recovery, flushing, checkpoints, index building and retention run as owned tasks.
This module knows nothing of protocols, groups or filters beyond the tags-code prefilter.

`MessageStore` is composed, as RocketMQ's DefaultMessageStore composes named services, of
one class per role, each in its own module, and inherits them (as `Broker` inherits its
facade roles): every call is a plain method of the store, so the hot paths (put_batch,
put_message, append_sends, put_inner_batch, get_messages) gain no delegation.

    core/store/recovery.py   StoreRecovery   load the ConsumeQueues, recover from the checkpoint
    core/store/writer.py     StoreWriter     the put paths; the record header's one layout
    core/store/reader.py     StoreReader     get_messages and the lookups
    core/store/dispatch.py   StoreDispatch   ConsumeQueue entries dispatched, pulls woken

This module keeps what they share: construction (the state every role reads and writes),
the lifecycle (open, start, stop, close and the owned background tasks), the admin calls
(prepare_queues, delete_topic, truncate_queue_min), the ConsumeQueue flush with the
checkpoint, and retention. A new store call goes in the module of its role; this one never
grows a put or a read path.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import shutil
import time
from collections import deque
from typing import Callable

from ..config import BrokerConfig
from ..periodic import run_every
from .checkpoint import Checkpoint, CheckpointFile
from .commitlog import CommitLog, now_ms
from .consume_queue import ConsumeQueue
from .dispatch import StoreDispatch, _Dispatch
from .flush import FlushService
from .index_service import IndexService
from .libc_map import sync_file_system
from .reader import StoreReader, TagsFilter  # noqa: F401  (TagsFilter: imported from here)
from .recovery import StoreRecovery
from .replica import ReplicaLag, StoreReplica
from .segment_preparer import SegmentPreparer
# PutResult and the encoded shapes are imported from here by the facade, the schedule and
# transaction services and tests
from .writer import EncodedMessage, PlainSend, PutResult, StoreWriter, _host_bytes  # noqa: F401

SYNCFS_ABOVE = 256  # dirty ConsumeQueue files a flush syncs one by one; more: syncfs

log = logging.getLogger(__name__)


class MessageStore(StoreRecovery, StoreWriter, StoreReader, StoreReplica):
    """The store: its state, lifecycle, admin, checkpoint and retention; puts, gets and
    recovery are the inherited role classes' (see the module docstring)."""

    def __init__(self, config: BrokerConfig,
                 tags_code_of: Callable[[str, dict[str, str]], int] | None = None,
                 ruled_topics: frozenset[str] = frozenset()) -> None:
        """``tags_code_of`` gives a record's ConsumeQueue tags code (None: the TAGS hash);
        ``ruled_topics`` are the topics where its rule is not the TAGS hash (the schedule
        topic's due times), which no fast path may code from the TAGS bytes alone."""
        self.config = config
        self.root = config.store_path_root_dir
        self.cq_root = config.consume_queue_dir
        self.set_store_port(config.listen_port)
        self._preparer = SegmentPreparer()
        self.commitlog = CommitLog(config.commit_log_dir, config.mapped_file_size_commit_log,
                                   warm=config.warm_maped_file_enable, preparer=self._preparer)
        self.checkpoint_file = CheckpointFile(self.root)
        self.index = IndexService(config.index_dir, config.max_hash_slot_num,
                                  config.max_index_num, enabled=config.message_index_enable)
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        # the queues written since the last ConsumeQueue flush took them (each put adds its
        # queue): a flush looks at these, not at every queue (100,000 of them, every second)
        self._written: set[ConsumeQueue] = set()
        self._next_queue_offset: dict[tuple[str, int], int] = {}
        self._pending: deque[_Dispatch] = deque()
        self._sync = config.sync_flush  # a put is answered after the fsync that covers it
        self.max_body = config.largest_message_size
        self._defer = config.sync_flush and config.dispatch_after_flush  # and dispatched then
        self.dispatched_offset = 0
        self._verify_from = 0
        self._last_checkpoint_dispatched = 0
        self._checkpointed: tuple[int, ...] | None = None  # what the last checkpoint covered
        self._tags_code_of = tags_code_of  # None: the TAGS hash (delay topics override)
        self.ruled_topics = ruled_topics
        self.dispatch_listeners: list[Callable[[str, int, int], None]] = []
        # (topic, queue id, base offset, record batch) of every inner batch, as it is appended
        self.batch_listeners: list[Callable[[str, int, int, bytes | memoryview], None]] = []
        # topic -> what a slave does with each replicated record of that topic (the body):
        # state the master carries in the log (core/ha/offset_log.py)
        self.record_listeners: dict[str, Callable[[memoryview], None]] = {}
        self.replica_lag = ReplicaLag()  # a slave's master-store-to-dispatch times (replica.py)
        # the lowest CommitLog offset that must outlive retention (core/compaction: the
        # compacted queues' records not yet copied into their compacted logs)
        self.retention_floor: Callable[[], int] | None = None
        self.flush_service: FlushService | None = None
        self._deleted_topics: set[str] = set()  # no late preparation may recreate their files
        self._running = False
        self._writable = False
        self.slave = config.is_slave
        self.write_deadline = math.inf  # an elected master's fence (core/ha/election.py)
        self.leader_epoch = -1  # the election's, on stored Kafka batches (core/ha/election.py)
        self.recovered_from_crash = False
        self.recovery_report: dict = {}
        self.put_count = self.put_bytes = self.get_count = self.get_bytes = 0

    # ================================================================ lifecycle
    def set_store_port(self, port: int) -> None:
        """The port every record names as its store host (and offsetMsgIds carry): the
        remoting port clients reach this broker on, where RocketMQ clients send refused
        messages back. Set before the store opens; a configured 0 becomes the bound port."""
        self.store_host = _host_bytes(self.config.broker_ip1) + port.to_bytes(4, "big")
        self._store_ip, self._store_port = self.store_host[:4], port

    def open(self) -> None:
        """Load and recover (blocking; called before the loop serves anyone)."""
        os.makedirs(self.root, exist_ok=True)
        self.commitlog.queue.load()
        cp = self.checkpoint_file.load()
        self._load_consume_queues(cp)
        self.index.load()
        self.recovered_from_crash = self.checkpoint_file.crashed_last_time()
        self._recover(cp)
        self.checkpoint_file.mark_running()

    async def start(self) -> None:
        """Start the owned background services; returns once they run."""
        self._running = True
        self._writable = not self.slave
        self._stop_event = asyncio.Event()
        self.flush_service = FlushService(
            self.commitlog, sync=self._sync, interval_ms=self.config.flush_interval_commit_log,
            on_flushed=self._on_flushed)
        self._services = asyncio.TaskGroup()
        await self._services.__aenter__()
        self._services.create_task(self.flush_service.run(), name="flush-commitlog")
        stop = self._stop_event
        self._services.create_task(run_every(self.config.flush_interval_consume_queue / 1000,
                                             self.flush_queues_and_checkpoint, stop,
                                             name="flushing consume queues"), name="flush-consumequeue")
        self._services.create_task(run_every(self.config.clean_resource_interval / 1000,
                                             self._clean_expired, stop, name="cleaning expired files"),
                                   name="clean-files")
        self._services.create_task(self.index.run(self), name="index-builder")

    async def stop(self) -> None:
        """Stop services, flush everything, write the clean-shutdown checkpoint."""
        if not self._running:
            return
        self._running = self._writable = False
        self.index.stop()
        assert self.flush_service is not None  # set by start, as _running is
        self.flush_service.stop()
        self._stop_event.set()
        await self._services.__aexit__(None, None, None)
        await self.flush_queues_and_checkpoint()
        self.checkpoint_file.mark_clean_shutdown()
        self.close()

    def close(self) -> None:
        self._preparer.close()
        self.commitlog.close()
        for cq in self.consume_queues.values():
            cq.close()
        self.index.close()

    def set_slave(self, slave: bool) -> None:
        """Switch the role at run time (failover): a slave refuses every put (NotMaster)
        and takes its master's bytes through `write_replicated`; a master puts."""
        self.slave = slave
        self._writable = self._running and not slave

    # ================================================================ admin
    def prepare_queues(self, topic: str, queue_nums: int) -> None:
        """Have the first ConsumeQueue file of each of ``topic``'s new queues made in the
        background (see segment_preparer): a new topic's first messages then do not each
        pay a fresh file's first write on the event loop."""
        if not self._running:
            return
        self._deleted_topics.discard(topic)
        for queue_id in range(queue_nums):
            if (topic, queue_id) not in self.consume_queues:
                # not registered (a queue in the checkpoint must have files): only its layout
                # is used, and deleting the topic is what cancels the preparation
                ConsumeQueue(self.cq_root, topic, queue_id, self.config.mapped_file_size_consume_queue,
                             self._preparer).prepare_next(
                    lambda: self._running and topic not in self._deleted_topics)

    async def queues_prepared(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout``) for the files prepare_queues has asked for so far."""
        await asyncio.wait({asyncio.wrap_future(self._preparer.barrier())}, timeout=timeout)

    def delete_topic(self, topic: str) -> None:
        self._deleted_topics.add(topic)
        for key in [k for k in self.consume_queues if k[0] == topic]:
            self.consume_queues.pop(key).destroy()
            self._next_queue_offset.pop(key, None)
        shutil.rmtree(os.path.join(self.cq_root, topic), ignore_errors=True)

    def truncate_queue_min(self, topic: str, queue_id: int, offset: int) -> int:
        """Raise a queue's min offset (Kafka DeleteRecords); returns the new min."""
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return 0
        cq.min_logic_offset = max(cq.min_logic_offset, min(offset, cq.max_offset))
        return cq.min_offset

    # ================================================================ flush / checkpoint
    async def flush_queues_and_checkpoint(self) -> None:
        flushed = self.flush_service.flushed_offset if self.flush_service else self.commitlog.max_offset
        dispatched = min(self.dispatched_offset, flushed)
        index_offset = min(self.index.built_offset, flushed)
        written = [cq for cq in self._written if not cq.gone]
        self._written.clear()
        dirty = [mf for cq in written for mf in cq.queue.files if mf.flushed_position < mf.wrote_position]
        index_files = self.index.dirty_files()
        # nothing moved since the last checkpoint (a store being read, or idle): the same
        # checkpoint again would cost its encoding, a queue table of every queue, a second
        state = (flushed, dispatched, index_offset, self.commitlog.max_offset, len(self.consume_queues))
        if not dirty and not index_files and state == self._checkpointed:
            return
        positions = [mf.wrote_position for mf in dirty]
        queues = {k: cq.max_offset for k, cq in self.consume_queues.items()}
        if dispatched - self._verify_from > self.config.recover_check_window:
            self._verify_from = self._last_checkpoint_dispatched
        cp = Checkpoint(flushed, dispatched, index_offset, self._verify_from, now_ms(), queues)

        def work() -> None:
            if len(dirty) > SYNCFS_ABOVE:  # one syncfs, not a journal commit per file
                sync_file_system(self.cq_root)
            else:
                for mf in dirty:
                    mf.sync()
            for f in index_files:
                f.sync()
            self.checkpoint_file.save(cp)

        try:
            await asyncio.to_thread(work)
        except BaseException:
            self._written.update(written)  # the next flush tries them again
            raise
        for mf, pos in zip(dirty, positions):
            mf.flushed_position = max(mf.flushed_position, pos)
        self._last_checkpoint_dispatched = dispatched
        self._checkpointed = state

    # ================================================================ retention
    async def _clean_expired(self) -> None:
        self.delete_expired_files(force=False)

    def disk_usage_ratio(self) -> float:
        usage = shutil.disk_usage(self.root)
        return usage.used / usage.total if usage.total else 0.0

    def delete_expired_files(self, *, force: bool, now: float | None = None) -> int:
        """RocketMQ's CleanCommitLogService: delete CommitLog segments older than
        fileReservedTime at deleteWhen hours (or at once when the disk is above
        diskMaxUsedSpaceRatio), then the ConsumeQueue and index files they orphan."""
        now = time.time() if now is None else now
        hours = {int(h) for h in self.config.delete_when.split(";")}
        disk_full = self.disk_usage_ratio() * 100 > self.config.disk_max_used_space_ratio
        if not (force or disk_full or time.localtime(now).tm_hour in hours):
            return 0
        reserved_s = self.config.file_reserved_time * 3600
        files = self.commitlog.queue.files
        floor = self.retention_floor() if self.retention_floor is not None else 1 << 62
        n = 0
        for mf in files[:-1]:
            if n >= 10 or mf.end_offset > floor:
                break
            age = now - os.path.getmtime(mf.path)
            if age >= reserved_s or (disk_full and n == 0):
                n += 1
            else:
                break
        if n:
            gone = self.commitlog.queue.delete_first(n)
            log.info("deleted %d expired commit log segments up to %d", n, gone[-1].end_offset)
            cl_min = self.commitlog.min_offset
            for cq in self.consume_queues.values():
                cq.delete_expired(cl_min)
            self.index.delete_before(cl_min)
        return n
