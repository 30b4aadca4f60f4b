"""Replica: a slave's CommitLog written from its master's bytes, and dispatched as recovery does.

`StoreReplica` is one of the classes `MessageStore` (core/store/message_store.py) is made of.
A slave (brokerRole=SLAVE, core/ha/slave.py) never runs the put paths: it hands the bytes
its master streamed to `write_replicated`, which copies them into the log at the offset
they were read from (byte-identical, a frame may cut a record), and once it has reported
the new end, `dispatch_replicated` dispatches every record now whole through
`_dispatch_from_record`, the one rule recovery uses, so the
slave's ConsumeQueues, key index (built from ``dispatched_offset``) and ``batch_listeners``
state are what the master's recovery would make from the same log. `truncate_replica`
cuts a log back to where its master's ends (a slave once ahead, told to truncate).

This module never assigns queue offsets or writes records of its own: it only copies.
"""

from __future__ import annotations

import logging
import re
import struct
from typing import Callable
from zlib import crc32

import numpy as np

from rocketport.common.message import INNER_BATCH_FLAG
from rocketport.common.tags import tags_code_of_value

from ..errors import DiskFull, StoreUnavailable
from .commitlog import now_ms
from .consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE
from .dispatch import StoreDispatch, _Dispatch
from .index_file import KEY_HASH_MASK
from .mapped_file import MappedFile
from .replica_block import BLOCK_BYTES, plain_block
from .record import (
    BLANK_MAGIC_CODE,
    FIXED_SIZE,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    PROPS_LEN,
    SIZE_MAGIC,
    BadRecord,
    RecordInfo,
    parse_record_info,
)

log = logging.getLogger(__name__)

# A record's fields a plain record's dispatch needs, from its queue id (offset 12) to its body
# length (84): queue id, (flag), queue offset, physical offset, sys flag, (born time and host),
# store timestamp, (store host, reconsume times, prepared offset), body length.
_PLAIN_FIELDS = struct.Struct(">i4xqqi16xq20xi")
# The properties a plain record's dispatch reads, in one pass over its encoded properties:
# TAGS (its tags code) and the index's keys (as core/store/index_service.py reads them; a
# name repeated: the last wins, as property_bytes answers). Searched in the properties with
# a separator put before them: a pattern starting with a literal is scanned for it in C,
# twice as fast as one starting with (?:^|\x02) here.
_DISPATCHED_PROPS = re.compile(rb"\x02(TAGS|KEYS|UNIQ_KEY|DEDUP_KEY)\x01([^\x02]*)")
_TAGS, _KEYS, _UNIQ_KEY = b"TAGS", b"KEYS", b"UNIQ_KEY"
# A pure cache of the fast path (cleared past _CACHED entries): a TAGS value (undecoded, None
# for none) -> its tags code.
_TAGS_CODES: dict[bytes | None, int] = {}
_CACHED = 4096


# a chunk this large is copied into the log with pwrite (no page fault each 4 KiB: see
# MappedFile.write_through); a smaller one is a memcpy into the mapping (no system call)
WRITE_THROUGH_MIN = 64 << 10

LAG_BUCKETS = 1001  # ms 0..999, and 1000 for a second or more


class ReplicaLag:
    """How long each record took from the master's store to this slave's dispatch, in ms
    buckets: the slave's wall clock at dispatch minus the store timestamp the master wrote
    into the record (meaningful with the two clocks in step: one machine, or NTP's few ms).
    Counted for the plain records dispatch reads the fields of (the others are rare)."""

    def __init__(self) -> None:
        self.counts = [0] * LAG_BUCKETS

    def text(self) -> str:
        """``ms:count`` of every non-empty bucket, comma-separated (runtime info)."""
        return ",".join(f"{ms}:{n}" for ms, n in enumerate(self.counts) if n)


def pwrite_replicated(mf: MappedFile, parts: list[memoryview]) -> None:
    """Write ``parts`` one after the other at ``mf``'s write position with one pwritev(2):
    system calls only (the GIL is released), so a worker thread writes a large read while
    the event loop dispatches the one before. `StoreReplica.wrote_replicated` then moves
    the log's end, on the loop."""
    mf.pwrite_parts(mf.wrote_position, parts)


class ReplicaMismatch(StoreUnavailable):
    """The master's bytes do not fit this log: a gap, a different segment size, or bytes
    that do not parse as records. Replication stops; nothing after the mismatch is kept."""


class StoreReplica(StoreDispatch):
    """The slave's side of the store (the store's state: see MessageStore.__init__)."""

    # recovery's rule, StoreRecovery's method (the store is made of both): declared here
    _dispatch_from_record: Callable[[int, RecordInfo], _Dispatch]
    replica_lag: ReplicaLag  # made in MessageStore.__init__

    def write_replicated(self, offset: int, data: bytes | memoryview) -> None:
        """Write ``data`` (the master's log from ``offset``) at the log's end, without
        dispatching it: the slave acknowledges the bytes once they are in its log, as
        RocketMQ's HAClient does, and dispatches them after the acknowledgement is on its
        way (`dispatch_replicated`), so a SYNC_MASTER's send does not wait for the
        slave's dispatch. ReplicaMismatch when ``offset`` is not this log's end (an empty
        log takes any segment start, as RocketMQ's slave does)."""
        cl = self.commitlog
        queue = cl.queue
        if offset != cl.max_offset:
            if queue.files or offset % cl.file_size:
                raise ReplicaMismatch(f"the master sent bytes from {offset}, this log ends at {cl.max_offset}")
        view = memoryview(data)
        while view:
            mf = queue.last_for_write(offset)
            n = min(mf.file_size - mf.wrote_position, len(view))
            mf.ensure_backed(mf.wrote_position + n)
            if n >= WRITE_THROUGH_MIN:
                mf.write_through(view[:n])
            else:
                mf.write(view[:n])
            cl.work_ahead(mf)
            view = view[n:]

    def segment_for_replicated(self, offset: int, size: int) -> MappedFile | None:
        """The segment the ``size`` bytes at ``offset`` (this log's end) go to, backed for
        them, when they fit in it; None when they would cross its end (`write_replicated`
        then). Nothing moves until `wrote_replicated`: the bytes are written meanwhile by
        `pwrite_replicated`, from any thread, while this one dispatches what was written
        before them (the log's end, which dispatch stops at, has not moved)."""
        cl = self.commitlog
        if offset != cl.max_offset:
            raise ReplicaMismatch(f"the master sent bytes from {offset}, this log ends at {cl.max_offset}")
        mf = cl.queue.last_for_write(offset)
        end = mf.wrote_position + size
        if end > mf.file_size:
            return None
        mf.ensure_backed(end)
        return mf

    def wrote_replicated(self, mf: MappedFile, size: int) -> None:
        """`pwrite_replicated`'s ``size`` bytes are in ``mf``: the log's end moves past them."""
        mf.wrote_position += size
        self.commitlog.work_ahead(mf)

    def dispatch_replicated(self) -> None:
        """Dispatch every whole record from ``dispatched_offset`` to the log's end; a record
        cut by the last frame waits for the next one. A queue's consecutive records go to
        its ConsumeQueue as one run (one put, one wake-up), as a put's would.

        While the key index has caught up with dispatch, the records dispatched here are
        indexed here too, from the properties already read for their tags code, and the
        chunk's keys written in one bulk put (IndexService.put_entries), instead of the
        index builder walking and parsing every record again (~8 us a record: every native
        message has a UNIQ_KEY); a Kafka record batch leaves that to the builder, which then
        walks from it.

        Where a read leaves BLOCK_BYTES or more from a record, the plain records from there
        are dispatched in one go (`replica_block.plain_block`: ~0.9 us a 1 KiB record
        instead of ~2.8, the same entries and keys), and record by record from the first
        one it leaves."""
        cl = self.commitlog
        end = cl.max_offset
        phys = max(self.dispatched_offset, cl.min_offset)
        index = self.index
        inline = index.enabled and index.built_offset == phys and index.idle_at_record
        keyed: list[tuple[int, int, int]] = []  # (key hash, phys, store timestamp) of this call

        def put_keys(record: int = -1) -> bool:
            """Write ``keyed`` (and index the record at view position ``record``); False on a
            full disk: the builder indexes again from ``built_offset`` and pauses as it does."""
            try:
                index.put_entries(keyed)
                if record >= 0:
                    index.index_record(view, record, base + record)
            except DiskFull:
                return False
            finally:
                keyed.clear()
            return True
        prefixes: dict[bytes, int] = {}  # a topic's bytes -> the CRC of its key prefix (topic#)
        find_props = _DISPATCHED_PROPS.findall
        listeners = self.batch_listeners
        runs: dict[tuple[str, int], list] = {}  # queue -> [first queue offset, entries, end]
        unpack = SIZE_MAGIC.unpack_from
        dispatch_from_record = self._dispatch_from_record
        record_listeners = self.record_listeners
        ruled = self.ruled_topics  # their tags code is not the TAGS hash: recovery's full rule
        fields, props_len_of, pack_entry = _PLAIN_FIELDS.unpack_from, PROPS_LEN.unpack_from, CQ_ENTRY.pack
        add_key = keyed.append
        lags, now = self.replica_lag.counts, now_ms()
        put_bytes = 0
        codes = _TAGS_CODES
        if len(codes) > _CACHED:
            codes.clear()
        # a topic's bytes -> its name when its records may take the fast path, else None
        plain: dict[bytes, str | None] = {}

        def topic_of_bytes(topic_bytes: bytes) -> str | None:
            topic = plain.get(topic_bytes, "")
            if topic == "":
                topic = topic_bytes.decode("utf-8", "replace")
                if topic in record_listeners or topic in ruled:
                    topic = None
                plain[topic_bytes] = topic
            return topic
        block_at = 0  # a segment position before which no block is tried (one failed)
        run: list | None = None  # the run of the last record's queue, and that queue
        run_topic, run_queue = "", -1
        try:
            while phys < end:
                mf = cl.queue.find(phys)
                if mf is None:
                    break
                view, base, written, size = mf.view, mf.file_from_offset, mf.wrote_position, mf.file_size
                pos = phys - base
                while True:
                    if pos >= size:  # a record filled the segment exactly
                        break
                    if written - pos >= BLOCK_BYTES and pos >= block_at:  # a large read's plain records at once
                        block = plain_block(view, base, pos, written, topic_of_bytes, prefixes, index.prefix,
                                            codes, inline, now, LAG_BUCKETS)
                        if block is None:
                            block_at = pos + BLOCK_BYTES  # record by record for a while
                        else:
                            for bucket in np.flatnonzero(block.lags).tolist():
                                lags[bucket] += int(block.lags[bucket])
                            if inline:
                                keyed.extend(block.keys)
                            for block_topic, block_queue, first, block_entries, block_end, block_count in block.runs:
                                run = self._run_at(runs, (block_topic, block_queue), first, block_end)
                                run[1].append(block_entries)
                                run[2] = block_end
                                run[3] += block_count
                            run = None  # the next record looks its run up
                            put_bytes += block.total_bytes
                            pos = block.end
                            phys = base + pos
                            continue
                    if pos + 8 > written:
                        return
                    total, magic = unpack(view, pos)
                    if magic == BLANK_MAGIC_CODE:
                        if total != size - pos:
                            raise ReplicaMismatch(f"offset {base + pos}: a blank of {total} bytes does not end "
                                                  f"the segment (is mappedFileSizeCommitLog the master's?)")
                        if written < size:
                            return
                        break
                    if total <= 0 or pos + total > size:
                        raise ReplicaMismatch(f"offset {base + pos}: a record of {total} bytes")
                    if pos + total > written:
                        return  # cut by the frame: the rest comes next
                    topic, topic_end = None, 0
                    if magic == MESSAGE_MAGIC_CODE and total >= FIXED_SIZE:
                        queue_id, queue_offset, record_phys, sys_flag, store_ts, body_len = fields(view, pos + 12)
                        count = 1
                        p = pos + HEADER_SIZE + body_len
                        topic_end = p + 1 + view[p] if 0 <= body_len <= total - FIXED_SIZE else 0
                    if topic_end and topic_end + 2 <= pos + total and not sys_flag & INNER_BATCH_FLAG:
                        topic_bytes = view[p + 1:topic_end].tobytes()
                        topic = plain.get(topic_bytes, "")
                        if topic == "":
                            topic = topic_of_bytes(topic_bytes)
                        (props_len,) = props_len_of(view, topic_end)
                        if (topic is None or props_len < 0
                                or FIXED_SIZE + body_len + topic_end - p - 1 + props_len != total
                                or record_phys != base + pos):
                            topic = None  # recovery's rule, which says what is wrong
                    if topic is not None:  # a plain record: its entry without decoding its properties
                        lag = now - store_ts
                        lags[lag if 0 <= lag < LAG_BUCKETS else (0 if lag < 0 else LAG_BUCKETS - 1)] += 1
                        pairs = find_props(b"\x02" + view[topic_end + 2:topic_end + 2 + props_len]) \
                            if props_len else None
                        if pairs:
                            # the last of a name wins, as property_bytes answers (no dict: cheaper)
                            tags = keys = uniq = None
                            dedup = False
                            for name, value in pairs:
                                if name == _UNIQ_KEY:
                                    uniq = value
                                elif name == _TAGS:
                                    tags = value
                                elif name == _KEYS:
                                    keys = value
                                else:
                                    dedup = True
                            code = codes.get(tags)
                            if code is None:
                                code = codes[tags] = tags_code_of_value(tags)
                            if inline and dedup:  # the builder's rule for a batch send's run
                                inline = put_keys(pos)
                            elif inline and (keys or uniq):  # crc32(prefix + key), from the prefix CRC
                                prefix = prefixes.get(topic_bytes)
                                if prefix is None:
                                    prefix = prefixes[topic_bytes] = crc32(index.prefix(topic_bytes))
                                if keys:
                                    for k in keys.split(b" "):
                                        if k:
                                            add_key((crc32(k, prefix) & KEY_HASH_MASK, record_phys, store_ts))
                                if uniq:
                                    add_key((crc32(uniq, prefix) & KEY_HASH_MASK, record_phys, store_ts))
                        else:
                            code = 0
                        entries = pack_entry(base + pos, total, code)
                        record_end = base + pos + total
                    else:
                        try:
                            info = parse_record_info(view, pos, written, False)
                        except BadRecord as exc:
                            raise ReplicaMismatch(f"offset {base + pos}: {exc}") from None
                        if info.physical_offset != base + pos:
                            raise ReplicaMismatch(f"offset {base + pos}: the record says {info.physical_offset}")
                        d = dispatch_from_record(base + pos, info)
                        if inline:  # the index's order is the log's: the keys so far first
                            if info.sys_flag & INNER_BATCH_FLAG:  # a record batch: the builder's
                                if put_keys():  # else the builder walks from where it was
                                    index.built_offset = base + pos
                                inline = False
                            else:
                                inline = put_keys(pos)
                        if info.topic in record_listeners:  # state carried in the log (core/ha/offset_log.py)
                            record_listeners[info.topic](view[pos + info.body_offset:
                                                              pos + info.body_offset + info.body_length])
                        if info.sys_flag & INNER_BATCH_FLAG and listeners:
                            body = view[pos + info.body_offset:pos + info.body_offset + info.body_length]
                            for listener in listeners:
                                listener(d.topic, d.queue_id, d.queue_offset, body)
                        topic, queue_id = d.topic, d.queue_id
                        queue_offset, entries, record_end = d.queue_offset, d.entries, d.end
                        count = len(entries) // CQ_ENTRY_SIZE
                    if run is None or topic is not run_topic or queue_id != run_queue \
                            or run[0] + run[3] != queue_offset:  # not the last record's run
                        run_topic, run_queue = topic, queue_id
                        run = self._run_at(runs, (topic, queue_id), queue_offset, record_end)
                    run[1].append(entries)
                    run[2] = record_end
                    run[3] += count
                    put_bytes += total
                    pos += total
                    phys = base + pos
                phys = mf.end_offset
        finally:
            self.put_bytes += put_bytes
            for key, run in runs.items():
                self._dispatch_run(key, run)
            self.dispatched_offset = max(self.dispatched_offset, phys)  # past what was dispatched
            if inline and put_keys():
                index.built_offset = self.dispatched_offset

    def _run_at(self, runs: dict[tuple[str, int], list], key: tuple[str, int], first: int,
                end: int) -> list:
        """The queue's run of entries that goes on at ``first``: the one gathered so far,
        or a new one after dispatching a run that does not reach it."""
        run = runs.get(key)
        if run is None or run[0] + run[3] != first:
            if run is not None:
                self._dispatch_run(key, run)
            run = runs[key] = [first, [], end, 0]
        return run

    def _dispatch_run(self, key: tuple[str, int], run: list) -> None:
        first, entries, end, count = run
        self._dispatch(_Dispatch(key[0], key[1], first, b"".join(entries), end))
        self._next_queue_offset[key] = first + count
        self.put_count += count

    def truncate_replica(self, offset: int) -> None:
        """Cut the log (and what was dispatched from it) back to ``offset``, a record
        boundary of the master's log: a slave whose log holds bytes its master never had.
        Index entries past it stay in the index files but name records that are gone
        (lookups check the record they find)."""
        cl = self.commitlog
        log.warning("commit log: truncating %d bytes the master never had (%d..%d)",
                    cl.max_offset - offset, offset, cl.max_offset)
        cl.truncate(offset)
        for cq in self.consume_queues.values():
            if cq.max_physical_end > offset:
                cq.truncate_to_physical(offset)
        self._next_queue_offset = {k: cq.max_offset for k, cq in self.consume_queues.items()}
        self.dispatched_offset = min(self.dispatched_offset, offset)
        self.index.built_offset = min(self.index.built_offset, offset)
        if self.flush_service is not None:
            self.flush_service.flushed_offset = min(self.flush_service.flushed_offset, offset)
