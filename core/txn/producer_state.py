"""Idempotent-producer state, derived from the stored record batches (Kafka's ProducerStateManager).

A Kafka idempotent (or transactional) producer numbers each partition's batches; a retried
batch that was already stored is acknowledged again with its original offset instead of
being stored twice, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch is fenced. The
truth is the CommitLog: every stored record batch carries its producer id, epoch, base
sequence and record count in its header, and its queue offset is its base offset. So the
table is fed by the store with every batch it stores (`batch_stored`: the put path, and the
same call for every batch a log scan finds), and `rebuild` derives it at start from the
snapshot (`config/producerState.json`, an optimisation that records the CommitLog offset
it covers) plus a scan of the stored batches from that offset to the log's end, or from
the log's start without one. A slave fed the same log through the same call gets the same
table. Per (producer id, topic, queue) the last five batches are kept, as Kafka does.

Producer ids for idempotent producers are taken in blocks whose end is saved before the
first id of the block is handed out, so an id is never handed out twice, even after a
crash; after a restart ids go on past the saved end and past every id in the log.

This module never touches sockets or a protocol, never writes the CommitLog, and never
blocks the event loop on the disk (the caller saves snapshots in a worker thread).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import struct
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from rocketport.common.batch.record_batch import ATTR_CONTROL

from ..metadata.json_file import JsonFile
from ..periodic import run_every
from .coordinator import FIRST_PRODUCER_ID

log = logging.getLogger(__name__)

WINDOW: Final = 5  # batches remembered per queue (Kafka's max.in.flight for idempotence)
NO_PRODUCER_ID: Final = -1
FIRST_IDEMPOTENT_ID: Final = 1000
NODE_ID_SHIFT: Final = 40  # brokerId b > 0 hands out idempotent ids from [b << 40, (b + 1) << 40)
ID_BLOCK: Final = 1000  # ids saved as taken per snapshot write (Kafka's producer id block)
_INT32_MAX: Final = 0x7FFFFFFF
# a record batch's attributes .. recordsCount (offset 21): attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
_FIELDS: Final = struct.Struct(">hiqqqhii")
_FIELDS_AT: Final = 21

Queue = tuple[str, int]
# (CommitLog offset, topic, queue id, base offset, record batch) of every stored batch
StoredBatches = Iterable[tuple[int, str, int, int, memoryview]]


class SequenceCheck(enum.Enum):
    ACCEPT = "accept"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out_of_order"
    FENCED = "fenced"  # an older epoch than the one already stored


@dataclass(slots=True)
class BatchEntry:
    first_seq: int
    last_seq: int
    base_offset: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer's state in one queue: its epoch, its last stored batches and the
    newest record timestamp of the last one (what expiry goes by, as Kafka's)."""

    epoch: int
    batches: list[BatchEntry] = field(default_factory=list)
    last_timestamp: int = -1


def _last_seq(first_seq: int, count: int) -> int:
    last = first_seq + count - 1
    return last - _INT32_MAX - 1 if last > _INT32_MAX else last  # sequences wrap to 0


class ProducerStateTable:
    """Every producer's sequence windows; fed synchronously by the store as it appends, so
    pipelined batches of one producer are judged in the order they are stored."""

    def __init__(self, config_dir: str, log_end: Callable[[], int], broker_id: int = 0) -> None:
        """``broker_id``: each node of a broker group hands out idempotent producer ids from
        a range of its own (brokerId 0 from FIRST_IDEMPOTENT_ID), as Kafka's brokers take
        disjoint blocks: a slave asked by a client, or a slave promoted by an election, never
        hands out an id a producer of another node holds (its batches would be judged
        against that producer's sequences: refused, or taken for duplicates and dropped)."""
        self.file = JsonFile(os.path.join(config_dir, "producerState.json"))
        self._log_end = log_end
        self._ids = (range(FIRST_IDEMPOTENT_ID, FIRST_PRODUCER_ID) if broker_id == 0
                     else range(broker_id << NODE_ID_SHIFT, (broker_id + 1) << NODE_ID_SHIFT))
        self.next_producer_id = self._ids.start
        self._block_end = self._ids.start  # ids below it may have been handed out
        self.entries: dict[tuple[int, str, int], ProducerEntry] = {}
        self.dirty = False
        self._saving = asyncio.Lock()

    # ------------------------------------------------------------------ derivation
    def batch_stored(self, topic: str, queue_id: int, base_offset: int, batch: memoryview | bytes) -> None:
        """A record batch was stored at ``base_offset`` of the queue (the put path calls
        this as it appends; `rebuild` for every batch of the log it scans)."""
        attributes, _, _, max_timestamp, pid, epoch, first_seq, count = _FIELDS.unpack_from(batch, _FIELDS_AT)
        if pid < 0 or first_seq < 0 or attributes & ATTR_CONTROL:
            return
        key = (pid, topic, queue_id)
        entry = self.entries.get(key)
        if entry is None or entry.epoch != epoch:
            entry = self.entries[key] = ProducerEntry(epoch)
        batches = entry.batches
        batches.append(BatchEntry(first_seq, _last_seq(first_seq, count), base_offset))
        if len(batches) > WINDOW:
            del batches[0]
        entry.last_timestamp = max(entry.last_timestamp, max_timestamp)
        self.dirty = True

    def rebuild(self, batches_from: Callable[[int], StoredBatches], log_start: int) -> int:
        """Load the snapshot, then apply every batch stored after what it covers (all of
        them without a usable snapshot), and save a snapshot of the result; the number of
        batches applied. Blocking: at start, before anything is served."""
        data = self.file.load() or {}
        self._block_end = max(self._block_end, int(data.get("nextProducerId", 0)))
        end = self._log_end()
        start, source = log_start, "the log"
        covers = data.get("offset")
        if covers is not None and int(covers) <= end:
            start, source = max(log_start, int(covers)), "the snapshot"
            for pid, topic, queue_id, epoch, batches, *last_timestamp in data.get("producers", ()):
                self.entries[(int(pid), topic, int(queue_id))] = ProducerEntry(
                    int(epoch), [BatchEntry(int(f), int(l), int(o)) for f, l, o in batches],
                    int(last_timestamp[0]) if last_timestamp else -1)
        elif covers is not None:  # the log lost what the snapshot saw (a power loss): the log wins
            log.warning("producer state snapshot covers %d but the CommitLog ends at %d: rebuilt "
                        "from the log", int(covers), end)
        applied = 0
        for _, topic, queue_id, base_offset, batch in batches_from(start):
            self.batch_stored(topic, queue_id, base_offset, batch)
            applied += 1
        seen = max((pid for pid, _, _ in self.entries if pid in self._ids), default=-1)
        self.next_producer_id = max(self._block_end, seen + 1, self._ids.start)
        self._block_end = self.next_producer_id  # the next id takes (and saves) a new block
        # a snapshot of the log as it now ends at once: a later start never scans from an
        # offset this log no longer has a record at (a snapshot past a power loss's cut)
        self.file.save(self.snapshot())
        log.info("producer state: %d producer queues from %s, %d batches applied from %d",
                 len(self.entries), source, applied, start)
        return applied

    def expire(self, now_ms: int, max_age_ms: int,
               in_transaction: Callable[[int, str, int], bool]) -> int:
        """Forget producers whose last batch is ``max_age_ms`` old (Kafka's
        producer.id.expiration.ms), except in a queue where the producer has a transaction
        open; the number forgotten. A forgotten producer's next batch is taken as a new
        producer's (any sequence), as Kafka takes it: the table stays bounded by the
        producers of the last day instead of every producer ever seen."""
        expired = [key for key, e in self.entries.items()
                   if now_ms - e.last_timestamp >= max_age_ms and not in_transaction(*key)]
        for key in expired:
            del self.entries[key]
        if expired:
            self.dirty = True
        return len(expired)

    def forget_topic(self, topic: str) -> None:
        """The topic was deleted: a new topic of that name starts with no producer state."""
        for key in [k for k in self.entries if k[1] == topic]:
            del self.entries[key]
        self.dirty = True

    def keep_topics(self, topics: Container[str]) -> None:
        """Forget every topic not in ``topics``: after a rebuild, the state of a topic
        deleted since the snapshot (its batches stay in the CommitLog until retention)."""
        for topic in {t for _, t, _ in self.entries if t not in topics}:
            self.forget_topic(topic)

    # ------------------------------------------------------------------ producer ids
    async def allocate_producer_id(self) -> int:
        """A new idempotent producer id; a new block is saved before its first id is used."""
        pid = self.next_producer_id
        self.next_producer_id += 1
        if pid >= self._block_end:
            self._block_end = pid + ID_BLOCK
            await self.save()
        return pid

    # ------------------------------------------------------------------ sequences
    def check(self, producer_id: int, epoch: int, topic: str, queue_id: int,
              first_seq: int, count: int) -> tuple[SequenceCheck, int]:
        """Judge a batch before it is stored: (verdict, original base offset of a duplicate
        else -1). Nothing is recorded here: the store reports the batch once it is appended
        (`batch_stored`), with no await in between."""
        entry = self.entries.get((producer_id, topic, queue_id))
        if entry is None:  # a new producer (or one whose state retention dropped) starts anywhere
            return SequenceCheck.ACCEPT, -1
        if epoch < entry.epoch:
            return SequenceCheck.FENCED, -1
        if epoch > entry.epoch:  # a bumped epoch starts its sequences again
            return (SequenceCheck.ACCEPT if first_seq == 0 else SequenceCheck.OUT_OF_ORDER), -1
        batches = entry.batches
        expected = batches[-1].last_seq + 1
        if first_seq == expected or (expected > _INT32_MAX and first_seq == 0):
            return SequenceCheck.ACCEPT, -1  # the next batch: no earlier one can be the same
        last_seq = _last_seq(first_seq, count)
        for b in batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return SequenceCheck.DUPLICATE, b.base_offset
        return SequenceCheck.OUT_OF_ORDER, -1

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> dict[str, Any]:
        """A plain copy of the table and the CommitLog offset it covers (taken on the event
        loop, between appends: every batch below that offset is in it); clears the dirty mark."""
        self.dirty = False
        return {
            "offset": self._log_end(),
            "nextProducerId": self._block_end,
            "producers": [[pid, topic, queue_id, e.epoch, [[b.first_seq, b.last_seq, b.base_offset]
                                                           for b in e.batches], e.last_timestamp]
                          for (pid, topic, queue_id), e in self.entries.items()],
        }

    async def save(self) -> None:
        """Write a snapshot (in a worker thread); saves never overlap, so a later one always
        lands last."""
        async with self._saving:
            await asyncio.to_thread(self.file.save, self.snapshot())

    async def run(self, stop: asyncio.Event, interval_s: float) -> None:
        """Save a snapshot every ``interval_s`` when the table changed, until ``stop``: it
        bounds how much of the log a restart scans."""
        await run_every(interval_s, self._save_changed, stop, name="saving the producer state snapshot",
                        survives=(OSError,))

    async def _save_changed(self) -> None:
        if self.dirty:
            try:
                await self.save()
            except OSError:
                self.dirty = True  # (`snapshot` cleared it): the next round tries again
                raise
