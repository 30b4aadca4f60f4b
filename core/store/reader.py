"""Reader: what a consumer reads (get_messages) and the lookups by offset, time and key.

`StoreReader` is one of the classes `MessageStore` (core/store/message_store.py) is made
of; its methods are plain methods of the store (no delegation on the hot path).
`get_messages` walks a ConsumeQueue from an offset and returns CommitLog slices
(memoryviews of the mapped segments, zero-copy): `_collect_run` takes the commonest read
(plain records back to back) without a per-entry loop; `_collect` does the rest, with the
tags-code prefilter one numpy compare over a chunk of entries (`_code_hits`) and the exact
check run on a candidate's properties in place, in its mapped segment. The lookups:
min/max offset, an
offset by store or record timestamp, a message by CommitLog offset, messages by key
(through the index service).

This module never writes: no CommitLog bytes, no ConsumeQueue entries, no queue offsets
(the index catch-up a key lookup asks for is the index service's own). It never serves an
entry that is not dispatched, and never decodes a record a filter can reject from its
tags code.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from rocketport.common.batch.record_batch import iter_records, parse_header
from rocketport.common.message import (
    INNER_BATCH_FLAG,
    PROPERTY_INNER_NUM,
    PROPERTY_KEYS,
    MessageExt,
    property_bytes,
    property_needles,
)

from .commitlog import now_ms
from .consume_queue import CQ_ENTRY_SIZE, ConsumeQueue
from .get_result import GetResult, GetStatus, Segment
from .inner_batch import batch_messages
from .record import (
    HEADER_SIZE,
    I32,
    POS_BODY_LENGTH,
    POS_BORN_TIMESTAMP,
    POS_QUEUE_OFFSET,
    POS_STORE_TIMESTAMP,
    POS_SYS_FLAG,
    QUEUE_OFFSET,
    decode_record,
    topic_and_properties,
)
from .state import StoreState

MAX_SCAN_PER_GET = 16_000  # entries examined per get when a filter checks each one
# entries examined per get when the tags-code prefilter skips most of them: a numpy compare
# (about 3 ns an entry), so a get still costs well under a millisecond plus its matches;
# a 1%-selective tag read then takes 655 matches a pull, under a pull's 1,024
MAX_PREFILTERED_SCAN_PER_GET = 65_536
QUERY_CATCH_UP = 50_000  # messages a key lookup indexes first, at most
PREFILTER_CHUNK = 16_384  # ConsumeQueue entries read at once when a filter may skip many


class TagsFilter(Protocol):
    """The part of a subscription filter the store applies (see core.filter.MessageFilter)."""

    @property
    def prefilter_codes(self) -> frozenset[int] | None: ...
    @property
    def needs_exact_check(self) -> bool: ...
    @property
    def raw_matcher(self) -> Callable[[bytes], bool]: ...


class StoreReader(StoreState):
    """Gets and lookups (the store's state: see MessageStore.__init__)."""

    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queues.get((topic, queue_id))

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int, *,
                     max_bytes: int | None = None,
                     message_filter: TagsFilter | None = None,
                     exact: bool = True) -> GetResult:
        """Messages from ``offset`` as CommitLog slices, filtered by tags code (and exactly,
        when ``exact`` and the filter asks for it), at most ``max_count`` of them."""
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_off, max_off = cq.min_offset, cq.max_offset
        if max_off == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
        if offset < min_off:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_off, min_off, max_off)
        if offset == max_off:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
        if offset > max_off:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_off if min_off else 0,
                             min_off, max_off)
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_off, max_off)
        self._collect(cq, offset, max_count, max_bytes, message_filter, exact, result)
        if result.message_count:
            result.status = GetStatus.FOUND
            self.get_count += result.message_count
            self.get_bytes += result.total_bytes
        elif result.next_begin_offset == offset:
            result.status = GetStatus.OFFSET_FOUND_NULL
        return result

    def _collect(self, cq: ConsumeQueue, offset: int, max_count: int, max_bytes: int | None,
                 flt: TagsFilter | None, exact: bool, result: GetResult) -> None:
        cl = self.commitlog
        cl_min = cl.min_offset
        segments = result.segments
        count = 0
        total = 0
        scanned = 0
        byte_limit = max_bytes if max_bytes is not None else 1 << 62
        if flt is None and self._collect_run(cq, offset, max_count, byte_limit, cl_min, result):
            return
        # the tags-code prefilter and the exact check on the record's properties bytes
        codes = flt.prefilter_codes if flt is not None else None
        matcher = (flt.raw_matcher if exact and flt is not None and flt.needs_exact_check
                   else None)
        filtering = codes is not None or matcher is not None
        scan_limit = MAX_PREFILTERED_SCAN_PER_GET if codes is not None else MAX_SCAN_PER_GET
        run_start = run_end = -1
        run_first = run_count = 0
        batch_phys = -1
        batch_seg = Segment(memoryview(b""), -1, 0)
        next_offset = offset
        max_off = result.max_offset
        find = cl.queue.find
        body_length = I32.unpack_from
        seg_mm: Any = None  # the CommitLog segment the last candidate was in (mmap, view):
        seg_view: Any = None  # seg_base = seg_end = 0 sends the first through find
        seg_base = seg_end = 0
        while count < max_count and next_offset < max_off and scanned < scan_limit:
            want = PREFILTER_CHUNK if filtering else max_count - count + 64
            chunk = cq.entries(next_offset, min(want, scan_limit - scanned))
            if not chunk:
                break
            base = next_offset
            chunk_end = base + len(chunk) // CQ_ENTRY_SIZE
            stop = False
            resume = -1  # where to go on when the loop leaves a chunk early
            if codes is not None:  # the tags-code prefilter: only the hits are looked at
                at, picked = _code_hits(chunk, codes)
                entries: Iterator[tuple[int, tuple[int, int]]] = zip(
                    at.tolist(), zip(picked["phys"].tolist(), picked["size"].tolist()))
            else:
                entries = enumerate(_CQ_PHYS_SIZE.iter_unpack(chunk))
            for i, (phys, size) in entries:  # lazy: a full get stops reading
                qo = base + i
                if phys < cl_min:
                    continue
                if size > 0:
                    # the exact check on the record's properties, read in place in its mapped
                    # segment: nothing is built for a record that fails (an inner batch's
                    # entries pass it: their reader filters per record, core.store.inner_batch)
                    if matcher is not None:
                        if phys < seg_base or phys + size > seg_end:
                            mf = find(phys)
                            if mf is None:
                                continue
                            seg_mm, seg_view, seg_base = mf.mm, mf.view, mf.file_from_offset
                            seg_end = seg_base + mf.wrote_position
                            if phys < seg_base or phys + size > seg_end:
                                continue
                        pos = phys - seg_base
                        at = pos + HEADER_SIZE + body_length(seg_view, pos + POS_BODY_LENGTH)[0]
                        # topicLength u8 + topic + propertiesLength i16, then the properties
                        if not matcher(seg_mm[at + 3 + seg_view[at]:pos + size]):
                            continue
                    if total and total + size > byte_limit:  # the first message always fits
                        stop = True
                        resume = qo
                        break
                    if phys == run_end:
                        run_end += size
                        run_count += 1
                    else:
                        if run_count:
                            segments.append(Segment(
                                seg_view[run_start - seg_base:run_end - seg_base]
                                if seg_base <= run_start and run_end <= seg_end
                                else cl.written(run_start, run_end - run_start), run_first, run_count))
                        run_start, run_end, run_first, run_count = phys, phys + size, qo, 1
                    total += size
                else:  # an entry of an inner batch (negative size)
                    if run_count:
                        segments.append(Segment(cl.written(run_start, run_end - run_start), run_first, run_count))
                        run_count = 0
                        run_end = -1
                    if phys == batch_phys and batch_seg.first_offset + batch_seg.count == qo:
                        batch_seg.count += 1
                    else:
                        if total and total - size > byte_limit:
                            stop = True
                            resume = qo
                            break
                        view = cl.slice(phys, -size)
                        if view is None:
                            continue
                        (batch_base,) = QUEUE_OFFSET.unpack_from(view, POS_QUEUE_OFFSET)
                        batch_seg = Segment(view, qo, 1, batch_base)
                        segments.append(batch_seg)
                        batch_phys = phys
                        total -= size
                        if not filtering:  # take the rest of the batch at once
                            take = min(batch_base + _inner_count(view) - qo, max_count - count)
                            batch_seg.count = take
                            count += take
                            resume = qo + take
                            if count >= max_count or total >= byte_limit:
                                stop = True
                            break  # re-read entries from after the batch
                count += 1
                if count >= max_count or total >= byte_limit:
                    stop = True
                    resume = qo + 1
                    break
            next_offset = chunk_end if resume < 0 else resume
            scanned += next_offset - base
            if stop:
                break
        if run_count:
            segments.append(Segment(cl.written(run_start, run_end - run_start), run_first, run_count))
        # slices are None only if the log was truncated under us: drop them
        if any(s.view is None for s in segments):
            segments[:] = [s for s in segments if s.view is not None]
            count = sum(s.count for s in segments)
        result.message_count = count
        result.total_bytes = total
        result.next_begin_offset = next_offset

    def _collect_run(self, cq: ConsumeQueue, offset: int, max_count: int, byte_limit: int,
                     cl_min: int, result: GetResult) -> bool:
        """`_collect` for the commonest unfiltered read, a run of plain records that lie
        back to back in the CommitLog (one producer's queue), with no per-entry Python
        loop: the entries are unpacked in one call and checked with C-level map,
        accumulate and bisect. False, having done nothing, for anything else."""
        count = min(max_count, result.max_offset - offset)
        if not 1 < count <= MAX_RUN:
            return False
        chunk = cq.entries(offset, count)
        count = len(chunk) // CQ_ENTRY_SIZE
        if count < 2 or _CQ_PHYS_SIZE.unpack_from(chunk)[1] <= 0:  # an inner batch's entry
            return False
        words = _cq_run(count).unpack(chunk)
        sizes = words[1::3]
        first = words[0]
        total = sum(sizes)
        # Records never overlap and a queue's lie in log order, so they are back to back
        # exactly when the last starts where the others' sizes end.
        if (first < cl_min or min(sizes) <= 0  # trimmed, or an inner batch's entries
                or words[-3] - first != total - sizes[-1]):  # others' records between
            return False
        if total > byte_limit:  # as many as fit; the first always does
            totals = list(accumulate(sizes))
            count = max(1, bisect_right(totals, byte_limit))
            total = totals[count - 1]
        view = self.commitlog.slice(first, total)
        if view is None:
            return False
        result.segments.append(Segment(view, offset, count))
        result.message_count = count
        result.total_bytes = total
        result.next_begin_offset = offset + count
        return True

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Visible max offset (next offset a consumer will see)."""
        cq = self.consume_queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def store_timestamp_at(self, topic: str, queue_id: int, offset: int) -> int | None:
        cq = self.consume_queues.get((topic, queue_id))
        entry = cq.entry(offset) if cq else None
        if entry is None or entry[0] < self.commitlog.min_offset:
            return None
        view = self.commitlog.slice(entry[0], abs(entry[1]))
        return QUEUE_OFFSET.unpack_from(view, POS_STORE_TIMESTAMP)[0] if view is not None else None

    def offset_by_timestamp(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first offset whose message was stored at or after ``timestamp`` (ms);
        max offset if none was."""
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            ts = self.store_timestamp_at(topic, queue_id, mid)
            if ts is None or ts < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def offset_by_record_timestamp(self, topic: str, queue_id: int, timestamp: int) -> tuple[int, int]:
        """Kafka's ListOffsets by time: the first offset whose record timestamp (a Kafka
        record's own, another message's born time) is at or after ``timestamp``, with that
        timestamp; (max offset, -1) when there is none.

        Searches on each entry's newest timestamp (a stored batch's maxTimestamp), so it
        assumes timestamps grow along the queue, as Kafka's time index does; inside the
        batch found, the records are read to find the first one at or after ``timestamp``.
        """
        cq = self.consume_queues.get((topic, queue_id))
        if cq is None:
            return 0, -1
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            found = self._newest_timestamp(cq, mid)
            if found is None or found[0] < timestamp:
                lo = mid + 1
            else:
                hi = mid
        found = self._newest_timestamp(cq, lo) if lo < cq.max_offset else None
        if found is None:
            return lo, -1
        newest, batch = found
        if batch is None:
            return lo, newest
        header = parse_header(batch)  # its baseOffset is the batch's first queue offset
        for index, record in enumerate(iter_records(batch)):
            if header.base_timestamp + record.timestamp_delta >= timestamp:
                return header.base_offset + index, header.base_timestamp + record.timestamp_delta
        return lo, newest

    def _newest_timestamp(self, cq: ConsumeQueue, offset: int) -> tuple[int, memoryview | None] | None:
        """(newest timestamp, the stored batch or None) of the entry at ``offset``."""
        entry = cq.entry(offset)
        view = self.commitlog.slice(entry[0], abs(entry[1])) if entry else None
        if view is None:
            return None
        born = QUEUE_OFFSET.unpack_from(view, POS_BORN_TIMESTAMP)[0]
        if not I32.unpack_from(view, POS_SYS_FLAG)[0] & INNER_BATCH_FLAG:
            return born, None
        batch = view[HEADER_SIZE:HEADER_SIZE + I32.unpack_from(view, POS_BODY_LENGTH)[0]]
        return parse_header(batch).max_timestamp, batch

    def message_at(self, commit_log_offset: int) -> MessageExt | None:
        rec = self.commitlog.record_at(commit_log_offset)
        return decode_record(rec) if rec is not None else None

    def query_by_key(self, topic: str, key: str, max_num: int = 32, begin: int = 0,
                     end: int | None = None) -> list[MessageExt]:
        end = end if end is not None else now_ms() + 1000
        self.index.build(self, QUERY_CATCH_UP)  # bounded: a lookup never stalls the loop long
        found: list[MessageExt] = []
        for phys in dict.fromkeys(self.index.lookup(f"{topic}#{key}", max_num * 4, begin, end)):
            for msg in self._messages_at(phys):
                if msg.topic == topic and (key in msg.keys or msg.uniq_key == key
                                           or msg.properties.get(PROPERTY_KEYS) == key):
                    found.append(msg)
            if len(found) >= max_num:
                break
        return found[:max_num]

    def _messages_at(self, phys: int) -> list[MessageExt]:
        """The message at ``phys``, or every message of the inner batch stored there."""
        rec = self.commitlog.record_at(phys)
        if rec is None:
            return []
        msg = decode_record(rec)
        if not msg.sys_flag & INNER_BATCH_FLAG:
            return [msg]
        try:
            return list(batch_messages(rec, self.config.kafka_tag_header))
        except ValueError:
            return []


# a ConsumeQueue entry's CommitLog offset and size (its tagsCode skipped)
_CQ_PHYS_SIZE = struct.Struct(">qi8x")
# the same as numpy fields: the low word of the tagsCode, signed, is the Java int RocketMQ
# compares (tagsCode.intValue())
_CQ_ENTRIES = np.dtype([("phys", ">i8"), ("size", ">i4"), ("code_high", ">i4"), ("code", ">i4")])
MAX_RUN = 1024  # entries `_collect_run` unpacks at once; longer reads take the loop


@lru_cache(maxsize=32)
def _cq_run(count: int) -> struct.Struct:
    """The layout of ``count`` ConsumeQueue entries (a few counts recur: 32, 256...)."""
    return struct.Struct(">" + "qiq" * count)


def _code_hits(chunk: memoryview, codes: frozenset[int]) -> tuple[np.ndarray, np.ndarray]:
    """(indexes, entries), ascending, of the entries of a chunk whose tagsCode's low word is
    in ``codes``: one numpy compare over the chunk's code column (a tag filter typically
    rejects most of a queue), the hits copied out of the mapped ConsumeQueue."""
    entries = np.frombuffer(chunk, _CQ_ENTRIES)
    found = entries["code"]
    if len(codes) == 1:
        hit = found == next(iter(codes))
    else:
        hit = np.isin(found, _code_array(codes))
    at = np.flatnonzero(hit)
    return at, entries[at]


_INNER_NUM_NEEDLES = property_needles(PROPERTY_INNER_NUM)


@lru_cache(maxsize=1024)
def _code_array(codes: frozenset[int]) -> np.ndarray:
    return np.fromiter(codes, np.int32, len(codes))


def _inner_count(record: memoryview) -> int:
    """INNER_NUM of an inner-batch record, read without decoding the other properties;
    the batch's own count where INNER_NUM is torn (properties are outside the body CRC:
    recovery indexes such a record by that count too)."""
    value = property_bytes(topic_and_properties(record)[2], _INNER_NUM_NEEDLES)
    if not value:
        return 1
    try:
        return int(value)
    except ValueError:
        return parse_header(record, HEADER_SIZE).records_count
