"""Recovery: the ConsumeQueues loaded and the CommitLog re-checked when the store opens.

`StoreRecovery` is one of the classes `MessageStore` (core/store/message_store.py) is made
of; `MessageStore.open` calls `_load_consume_queues`, then `_recover` with the checkpoint.
Recovery re-dispatches from the checkpoint's dispatched offset (or from the log's start
when there is none or a ConsumeQueue is damaged), CRC-checks the tail from the
checkpoint's verify-from offset, truncates a torn tail, and rebuilds the ConsumeQueue
entries of every record it re-dispatches exactly as a live put made them
(`_dispatch_from_record`), an inner batch's per-record tags codes included. The rules are
in docs/store-format.md ("Recovery"). `stored_batches` walks the recovered log the
same way for the state derived from its batches (core/txn/producer_state.py).

It runs once, before the event loop serves anyone: it never runs while puts or gets do,
never writes a record (only truncates what is torn) and never changes the on-disk format.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator

from rocketport.common.batch.record_batch import parse_header
from rocketport.common.batch.record_tags import batch_tags
from rocketport.common.message import INNER_BATCH_FLAG, PROPERTY_INNER_NUM, PROPERTY_TAGS

from .checkpoint import Checkpoint
from .consume_queue import CQ_ENTRY, ConsumeQueue
from .dispatch import StoreDispatch, _Dispatch
from .record import RecordInfo, decode_record

log = logging.getLogger(__name__)

# a re-dispatch of a large backlog says where it is every PROGRESS_INTERVAL_S, looking at
# the clock once every PROGRESS_EVERY records (a power of two)
PROGRESS_INTERVAL_S = 5.0
PROGRESS_EVERY = 4096


class StoreRecovery(StoreDispatch):
    """Load and recover (the store's state: see MessageStore.__init__)."""

    def _load_consume_queues(self, cp: Checkpoint | None = None) -> None:
        """Every queue's ConsumeQueue, its end found by reading, none mapped (see
        ConsumeQueue.load); ``cp``'s max offsets say where each end should be."""
        try:
            topics = [e for e in os.scandir(self.cq_root) if e.is_dir()]
        except FileNotFoundError:
            return
        expected = cp.queues if cp is not None else {}
        size = self.config.mapped_file_size_consume_queue
        for entry in topics:
            topic = entry.name
            for qid in os.listdir(entry.path):
                if qid.lstrip("-").isdigit():
                    key = (topic, int(qid))
                    cq = ConsumeQueue(self.cq_root, topic, key[1], size, self._preparer, written=self._written)
                    cq.load(expected.get(key))
                    self.consume_queues[key] = cq

    def _recover(self, cp: Checkpoint | None) -> None:
        """Re-dispatch from the checkpoint, CRC-check the tail, truncate what is torn."""
        cl = self.commitlog
        start = cl.min_offset
        reason = "no checkpoint"
        if cp is not None:
            damaged = [k for k, max_off in cp.queues.items()
                       if k not in self.consume_queues or self.consume_queues[k].max_offset < max_off]
            damaged += [k for k, cq in self.consume_queues.items() if not self._cq_tail_ok(cq)]
            if damaged:
                reason = f"rebuilding damaged consume queues {sorted(set(damaged))[:5]}"
                for k in set(damaged):
                    if k in self.consume_queues:
                        self.consume_queues.pop(k).destroy()
            elif cl.min_offset <= cp.dispatched_offset <= cl.max_offset:
                start = cp.dispatched_offset
                reason = "checkpoint"
        verify_from = start if cp is None else max(cl.min_offset, min(start, cp.verify_from))
        check_crc = self.config.check_crc_on_recover
        dispatched = scanned = 0
        mask = PROGRESS_EVERY - 1
        progress = _Progress(verify_from, cl.max_offset)
        scan = cl.scan(verify_from, check_crc)
        for phys, info in scan:  # before ``start`` only verified; re-dispatch is idempotent
            if phys >= start:
                self._dispatch(self._dispatch_from_record(phys, info), notify=False)
                dispatched += 1
            scanned += 1
            if not scanned & mask:
                progress.at(phys, dispatched)
        valid_end = scan.end
        if scan.error:
            log.warning("commit log: truncating the tail at %d: %s", valid_end, scan.error)
        cl.truncate(valid_end)
        for cq in self.consume_queues.values():
            if cq.max_physical_end > valid_end:
                cq.truncate_to_physical(valid_end)
            cq.correct_min_offset(cl.min_offset)
        self._next_queue_offset = {k: cq.max_offset for k, cq in self.consume_queues.items()}
        self.dispatched_offset = valid_end
        self._verify_from = verify_from
        self._last_checkpoint_dispatched = valid_end
        for mf in cl.queue.files:
            mf.flushed_position = mf.wrote_position
        self.index.recover(cp.index_offset if cp else cl.min_offset, valid_end)
        self.recovery_report = {"reason": reason, "start": start, "verify_from": verify_from,
                                "end": valid_end, "redispatched": dispatched,
                                "truncated": scan.error}
        log.info("store recovered from %s: CommitLog %d..%d checked, %d records re-dispatched "
                 "from %d%s", reason, verify_from, valid_end, dispatched, start,
                 f"; torn tail cut: {scan.error}" if scan.error else "")

    def stored_batches(self, start: int) -> Iterator[tuple[int, str, int, int, memoryview]]:
        """Every inner batch stored from CommitLog offset ``start`` (a record boundary) to the
        log's end, after `open`: (CommitLog offset, topic, queue id, base offset, record
        batch). What state derived from the log is rebuilt from (core/txn/producer_state.py)."""
        cl = self.commitlog
        for phys, info in cl.scan(max(start, cl.min_offset), False):
            if info.sys_flag & INNER_BATCH_FLAG:
                body = cl.written(phys + info.body_offset, info.body_length)
                yield phys, info.topic, info.queue_id, info.queue_offset, body

    def _cq_tail_ok(self, cq: ConsumeQueue) -> bool:
        """The last entry must point at a record of this queue with this queue offset."""
        entry = cq.last_entry()
        if entry is None:
            return True
        phys, size, _ = entry
        if phys < self.commitlog.min_offset:
            return True  # its record was deleted by retention: nothing left to check
        rec = self.commitlog.record_at(phys)
        if rec is None:
            return phys >= self.commitlog.max_offset  # beyond the log: truncated later
        try:
            msg = decode_record(rec)
        except ValueError:
            return False
        if msg.topic != cq.topic or msg.queue_id != cq.queue_id or len(rec) != abs(size):
            return False
        count = _inner_num(msg.properties) if size < 0 else 1
        return msg.queue_offset <= cq.max_offset - 1 < msg.queue_offset + count

    def _dispatch_from_record(self, phys: int, info: RecordInfo) -> _Dispatch:
        """The ConsumeQueue entries live dispatch made for a scanned record. An inner batch
        gets one tags code per record, from each record's tag header (core.batch.record_tags,
        as the Kafka front-end computes them on produce), each through the store's tags-code
        rule; its records are decoded only when the header's name occurs in them, and not
        at all when a TAGS property says every record has that one tag."""
        topic, props, size = info.topic, info.properties, info.total_size
        if not info.sys_flag & INNER_BATCH_FLAG:
            entries = CQ_ENTRY.pack(phys, size, self._code_of(topic, props))
            return _Dispatch(topic, info.queue_id, info.queue_offset, entries, phys + size)
        count = _inner_num(props)
        view = self.commitlog.written(phys, size)
        body = view[info.body_offset:info.body_offset + info.body_length]
        try:  # INNER_NUM must be what the stored batch says: never trust it to size the queue
            stated = parse_header(body).records_count
        except ValueError:
            stated = -1
        if count == -1 and stated >= 1:  # torn properties, whole body: the batch's count
            log.warning("inner batch at %d: INNER_NUM unreadable; indexed by the batch's %d records",
                        phys, stated)
            count = stated
        if stated != count or count < 1:
            log.warning("inner batch at %d: INNER_NUM %d but the batch holds %d records; "
                        "indexed as one entry", phys, count, stated)
            count = 1
        tags = None
        if PROPERTY_TAGS not in props:
            try:
                tags = batch_tags(body, self.config.kafka_tag_header)
            except ValueError as exc:  # CorruptBatch: it was checked when stored, so rare
                log.warning("inner batch at %d: no per-record tags (%s)", phys, exc)
            if tags is not None and len(tags) != count:
                log.warning("inner batch at %d: %d records, INNER_NUM %d", phys, len(tags), count)
                tags = None
        if tags is None:
            entries = CQ_ENTRY.pack(phys, -size, self._code_of(topic, props)) * count
        else:  # a record's code as the rule gives it for a message with that TAGS
            entry = {tag: CQ_ENTRY.pack(phys, -size, self._code_of(
                topic, {**props, PROPERTY_TAGS: tag} if tag else props)) for tag in set(tags)}
            entries = b"".join(map(entry.__getitem__, tags))
        return _Dispatch(topic, info.queue_id, info.queue_offset, entries, phys + size)


def _inner_num(props: dict[str, str]) -> int:
    """A record's INNER_NUM, or -1 when it is not a number: properties are outside the
    body CRC, so a torn tail can leave a record whose body checks and whose properties do
    not (seen: "3\\x00"); dispatch then indexes the record by the batch's own count (as
    the reader reads it), and the tail check takes its queue for damaged (rebuilt)."""
    try:
        return int(props.get(PROPERTY_INNER_NUM, "1"))
    except ValueError:
        return -1


class _Progress:
    """One log line every PROGRESS_INTERVAL_S while recovery walks the CommitLog: where it
    is, the records re-dispatched so far, its rate, and where the log's files end (the
    data ends before: where is what the walk finds out)."""

    def __init__(self, start: int, files_end: int) -> None:
        self.start, self.files_end = start, files_end
        self.began = self.last = time.monotonic()

    def at(self, offset: int, dispatched: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL_S:
            return
        self.last = now
        log.info("store recovery: CommitLog offset %d, %d records re-dispatched, %.1f MB/s "
                 "(its files end at %d)", offset, dispatched,
                 (offset - self.start) / max(now - self.began, 1e-9) / 1e6, self.files_end)
