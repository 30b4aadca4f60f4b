"""The compacted logs of every compacted queue: loading, the schedule, reads, the retention pin.

How compacted data outlives the CommitLog: a compaction copies what stays of a queue's
records below a point (its ``end``) out of the CommitLog into the queue's own snapshot
(snapshot.py), and reads below ``end`` are served from that snapshot. The CommitLog's old
segments then expire on their usual schedule (fileReservedTime), whatever topics they hold:
the live values of a compacted topic are in its snapshot, and the space of everything else
is given back. The one thing retention must not delete is a compacted queue's dirty range
(past its snapshot's end, not yet copied): `retention_floor` is the lowest CommitLog
offset some compacted queue still needs, and the store deletes no segment beyond it. A
queue whose dirty range sits in a segment already due for deletion is compacted at the next
pass whatever its dirty ratio, so the pin lasts one pass, not forever.

Work is off the event loop's critical path: a pass compacts one queue at a time; the loop
only copies bounded chunks of records out of the store (at most CHUNK_BYTES each) and every
decode, map update and write runs in the compaction worker process (worker.py: a thread
would hold the GIL the loop needs), one chunk per step. Memory is bounded by the chunk and
the offset map (maxOffsetMapSize). A SIGKILL at any point leaves the
previous snapshot and a ``.tmp`` file that the next start removes: nothing half-done is
ever served (the new snapshot becomes visible only after its rename).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable
from typing import Final

from ..config import BrokerConfig
from ..metadata.topics import TopicConfigManager
from ..store.get_result import GetResult, GetStatus
from ..store.message_store import MessageStore
from . import worker
from .cleaner import records_of
from .policy import CompactionPolicy, is_compacted
from .snapshot import CompactedSnapshot, latest_snapshot, record_span

log = logging.getLogger(__name__)

CHUNK_BYTES: Final = 1 << 20  # copied out of the store per step
CHUNK_MESSAGES: Final = 4096
MAP_ENTRY_BYTES: Final = 128  # what one key of the offset map costs, roughly (a dict entry and its key)
QueueKey = tuple[str, int]


class CompactionService:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 stable_offset: Callable[[str, int], int], wall_clock: Callable[[], float] = time.time) -> None:
        """``stable_offset``: a queue's last stable offset (nothing at or past it is compacted:
        an open transaction's records may yet be aborted)."""
        self.config = config
        self.store = store
        self.topics = topics
        self.stable_offset = stable_offset
        self.wall_clock = wall_clock
        self.root = os.path.join(config.store_path_root_dir, "compaction")
        self.snapshots: dict[QueueKey, CompactedSnapshot] = {}
        self.max_keys = max(1, config.max_offset_map_size // MAP_ENTRY_BYTES)
        self._stopping = False

    # ---------------------------------------------------------------- lifecycle
    def load(self) -> None:
        """Open every queue's newest snapshot (blocking: before the store serves)."""
        if not os.path.isdir(self.root):
            return
        for topic in os.listdir(self.root):
            for queue in os.listdir(os.path.join(self.root, topic)):
                if queue.isdigit():
                    snap = latest_snapshot(self._dir(topic, int(queue)))
                    if snap is not None:
                        self.snapshots[(topic, int(queue))] = snap

    def stop(self) -> None:
        """A compaction under way gives up at its next step (its ``.tmp`` is removed)."""
        self._stopping = True

    def close(self) -> None:
        for snap in self.snapshots.values():
            snap.close()
        self.snapshots.clear()

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self.snapshots if k[0] == topic]:
            self.snapshots.pop(key).close()
        shutil.rmtree(os.path.join(self.root, topic), ignore_errors=True)

    def _dir(self, topic: str, queue_id: int) -> str:
        return os.path.join(self.root, topic, str(queue_id))

    # ---------------------------------------------------------------- reads
    def read(self, snap: CompactedSnapshot, topic: str, queue_id: int, offset: int, max_count: int,
             max_bytes: int | None) -> GetResult:
        """A read at ``offset`` < ``snap.end``: from the snapshot, starting at the first kept
        offset at or after it (the CommitLog's read at ``snap.end`` when nothing below is kept)."""
        max_offset = self.store.max_offset(topic, queue_id)
        if offset < snap.start:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, snap.start, snap.start, max_offset)
        segments, next_offset, count, total = snap.read(offset, max_count, max_bytes)
        if not segments:
            result = self.store.get_messages(topic, queue_id, snap.end, max_count, max_bytes=max_bytes)
            result.min_offset = snap.start
            return result
        return GetResult(GetStatus.FOUND, next_offset, snap.start, max_offset, segments, count, total)

    # ---------------------------------------------------------------- the retention pin
    def compacted_queues(self) -> list[QueueKey]:
        return [(name, q) for name, cfg in list(self.topics.table.items()) if is_compacted(cfg.attributes)
                for q in range(max(cfg.read_queue_nums, cfg.write_queue_nums))]

    def _dirty_start(self, key: QueueKey) -> tuple[int, int | None]:
        """(first dirty offset, its CommitLog offset or None when nothing is dirty)."""
        cq = self.store.consume_queues.get(key)
        if cq is None:
            return 0, None
        snap = self.snapshots.get(key)
        at = max(snap.end if snap is not None else 0, cq.min_offset)
        if at >= cq.max_offset:
            return at, None
        entry = cq.entry(at)
        return at, None if entry is None else entry[0]

    def retention_floor(self) -> int:
        """The lowest CommitLog offset a compacted queue has not copied into its snapshot:
        no segment ending past it may be deleted (none with enableCompaction off: compacted
        topics then expire as any other)."""
        floor = 1 << 62
        if not self.config.enable_compaction:
            return floor
        for key in self.compacted_queues():
            phys = self._dirty_start(key)[1]
            if phys is not None and phys < floor:
                floor = phys
        return floor

    def _expiring_end(self, now_s: float) -> int:
        """The end of the CommitLog segments already old enough to delete (fileReservedTime)."""
        reserved_s = self.config.file_reserved_time * 3600
        end = 0
        for mf in self.store.commitlog.queue.files[:-1]:
            try:
                if now_s - os.path.getmtime(mf.path) < reserved_s:
                    break
            except FileNotFoundError:
                break
            end = mf.end_offset
        return end

    # ---------------------------------------------------------------- the schedule
    async def run_once(self) -> int:
        """One pass: compact each compacted queue that is due; returns how many were. A
        slave compacts its own copy of the log the same way (a compaction writes only
        compacted logs, never the CommitLog), so its reads, its retention and a promotion
        find them ready."""
        if not self.config.enable_compaction:
            return 0
        now_s = self.wall_clock()
        expiring = self._expiring_end(now_s)
        done = 0
        for topic, queue_id in self.compacted_queues():
            if self._stopping:
                break
            cfg = self.topics.table.get(topic)
            if cfg is None:
                continue
            policy = CompactionPolicy.of(cfg.attributes)
            if await self.compact(topic, queue_id, policy, expiring=expiring):
                done += 1
        return done

    def _due(self, key: QueueKey, policy: CompactionPolicy, dirty_from: int, dirty_phys: int,
             stable: int, expiring: int, now_ms: int) -> bool:
        oldest = self.store.store_timestamp_at(key[0], key[1], dirty_from)
        if oldest is None or oldest > now_ms - policy.min_compaction_lag_ms:
            return False  # min.compaction.lag.ms: its oldest dirty record is too young
        if dirty_phys < expiring or now_ms - oldest >= policy.max_compaction_lag_ms:
            return True
        snap = self.snapshots.get(key)
        dirty = stable - dirty_from
        clean = snap.messages if snap is not None else 0
        return dirty / (clean + dirty) >= policy.min_cleanable_dirty_ratio

    async def compact(self, topic: str, queue_id: int, policy: CompactionPolicy, *,
                      expiring: int = 0, force: bool = False) -> bool:
        """Compact the queue's dirty range when due (``force``: whenever anything is
        cleanable); True when a new snapshot replaced the old."""
        key = (topic, queue_id)
        dirty_from, dirty_phys = self._dirty_start(key)
        if dirty_phys is None:
            return False
        stable = self.stable_offset(topic, queue_id)
        if stable <= dirty_from:
            return False
        now_ms = int(self.wall_clock() * 1000)
        if not force and not self._due(key, policy, dirty_from, dirty_phys, stable, expiring, now_ms):
            return False
        started = time.monotonic()
        job = worker.new_job_id()
        snap: CompactedSnapshot | None = None
        try:
            end, scanned = await self._scan(job, topic, queue_id, dirty_from, stable,
                                            now_ms - policy.min_compaction_lag_ms)
            if end <= dirty_from or self._stopping:
                return False
            snap = await self._rewrite(job, topic, queue_id, dirty_from, end, now_ms - policy.delete_retention_ms)
        except Exception:
            log.exception("compacting %s-%d failed; its compacted log stays as it was", topic, queue_id)
        finally:
            if snap is None:  # stopped, failed or nothing to compact: the worker drops the job
                with contextlib.suppress(Exception):
                    await worker.call(worker.abandon, job)
        if snap is None:
            return False
        old = self.snapshots.get(key)
        self.snapshots[key] = snap
        if old is not None:
            old.close()
            await asyncio.to_thread(_unlink, old.path)
        log.info("compacted %s-%d up to offset %d: %d messages scanned, %d kept (%d bytes) in %.3f s",
                 topic, queue_id, snap.end, scanned, snap.messages, snap.size, time.monotonic() - started)
        return True

    async def _chunks(self, topic: str, queue_id: int, start: int, end: int):
        """The CommitLog records of [start, end) of the queue, copied, one bounded list per step."""
        offset = start
        while offset < end and not self._stopping:
            result = self.store.get_messages(topic, queue_id, offset, CHUNK_MESSAGES, max_bytes=CHUNK_BYTES)
            records: list[bytes] = []
            for seg in result.segments:
                for record in records_of(seg.view, seg.first_offset, seg.count, seg.batch_base):
                    last = record_span(record)[1]
                    if last >= end:  # a batch reaching past the end waits for the next compaction
                        end = offset
                        break
                    records.append(bytes(record))
                    offset = last + 1
            if not records:
                return
            yield records

    async def _scan(self, job: int, topic: str, queue_id: int, start: int, end: int,
                    horizon_ms: int) -> tuple[int, int]:
        """Pass 1 in the worker: (end of the range it covers, messages scanned)."""
        await worker.call(worker.begin, job, self.max_keys)
        scanned_end, scanned = start, 0
        async for records in self._chunks(topic, queue_id, start, end):
            stopped, scanned_end, scanned = await worker.call(worker.scan_chunk, job, records, horizon_ms)
            if stopped:
                break
        return scanned_end, scanned

    async def _rewrite(self, job: int, topic: str, queue_id: int, dirty_from: int, end: int,
                       tombstone_before_ms: int) -> CompactedSnapshot | None:
        """Pass 2 in the worker: the old snapshot's records and the dirty ones that stay."""
        old = self.snapshots.get((topic, queue_id))
        await worker.call(worker.start_writing, job, self._dir(topic, queue_id),
                          old.start if old is not None else dirty_from, tombstone_before_ms)
        if old is not None:
            index = old.index
            for lo in range(0, old.records, CHUNK_MESSAGES):
                if self._stopping:
                    return None
                hi = min(lo + CHUNK_MESSAGES, old.records)
                await worker.call(worker.keep_from_snapshot, job, old.path,
                                  index.positions[lo:hi].tolist(), index.sizes[lo:hi].tolist())
        async for records in self._chunks(topic, queue_id, dirty_from, end):
            await worker.call(worker.keep_chunk, job, records)
        if self._stopping:
            return None
        return worker.opened(*await worker.call(worker.finish, job, end))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
