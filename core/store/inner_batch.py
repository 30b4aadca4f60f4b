"""A stored inner batch read per record: the store's side of the one expander.

An inner batch is one CommitLog record (sys flag ``INNER_BATCH_FLAG``, property
``INNER_NUM``) whose body is a Kafka record batch; the ConsumeQueue indexes it as
``INNER_NUM`` logical offsets from the record's queue offset. This module reads such a record
— its header fields here, its body through ``core.batch.expander`` — so that every reader of
per-record content shares one decompression and one decode of each batch:

- :func:`open_batch`: the record's fields and its :class:`ExpandedBatch`, from the process's
  cache (:data:`BATCHES`); the index builder reads the decompressed payload from it;
- :func:`batches_of`: the same for the inner-batch segments of a read, opening a record
  once for a run of segments that point at it (a filter cuts a batch into many);
- :meth:`StoredBatch.matching`: the (offset, record index) pairs of logical offsets
  [first, first + count) that a subscription matches, per record, seeing the record as the
  message a consumer receives (``core.batch.messages``): the exact check the store's scan
  cannot make inside a batch;
- :func:`batch_messages`, :func:`matching_records`: decoded messages (key and id lookups,
  ``GetResult.messages``) and (offset, Record) pairs.

Cache key: the record's CommitLog position, with its body length, body CRC and store
timestamp. A record's bytes never change while it exists, and the extra fields keep another
store in the same process (tests, tools), or a log truncated by recovery and written again,
from ever finding a different batch under the same position. Only the body is cached: the
record's other fields are read from the record each time (cheap, and not covered by the key).

Never writes; never imports a protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from rocketport.common.batch.expander import BatchCache, ExpandedBatch
from rocketport.common.batch.messages import DEFAULT_TAG_HEADER
from rocketport.common.batch.record_batch import Record
from rocketport.common.message import PROPERTY_TAGS, MessageExt, decode_properties

from ..filter import EXPRESSION_TYPE_TAG
from .record import HEADER, HEADER_SIZE, I64, MESSAGE_MAGIC_CODE, POS_PHYSICAL_OFFSET, PROPS_LEN, BadRecord
from .record import ip_text as host_text  # cached bytes -> dotted text

if TYPE_CHECKING:
    from ..filter import MessageFilter
    from .get_result import Segment

__all__ = ["BATCHES", "StoredBatch", "batch_messages", "batches_of", "matching_records", "open_batch"]

# Every reader's batches, decoded: shared, so that a batch the index builder or one
# consumer decompressed is not decompressed again for the next.
BATCHES = BatchCache()


class StoredBatch:
    """An inner-batch CommitLog record: its header fields, and its records through the
    expander. Offsets are logical (queue) offsets; ``base_offset`` is the batch's first."""

    __slots__ = ("topic", "queue_id", "flag", "base_offset", "commit_log_offset", "store_size",
                 "body_crc", "sys_flag", "born_ip", "born_port", "store_timestamp", "store_ip",
                 "store_port", "properties", "batch")

    def __init__(self, record: memoryview | bytes, cache: BatchCache) -> None:
        (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, _born_ts, born_ip,
         born_port, store_ts, store_ip, store_port, _reconsume, _prepared,
         body_len) = HEADER.unpack_from(record, 0)
        if magic != MESSAGE_MAGIC_CODE:
            raise BadRecord(f"bad magic {magic & 0xFFFFFFFF:#x}")
        view = memoryview(record)
        p = HEADER_SIZE + body_len
        topic_len = view[p]
        self.topic = str(view[p + 1:p + 1 + topic_len], "utf-8", "replace")
        p += 1 + topic_len
        (props_len,) = PROPS_LEN.unpack_from(view, p)
        self.properties = decode_properties(view[p + 2:p + 2 + props_len])
        self.queue_id, self.flag, self.base_offset = queue_id, flag, queue_offset
        self.commit_log_offset, self.store_size, self.body_crc = phys, total, crc
        self.sys_flag, self.store_timestamp = sys_flag, store_ts
        self.born_ip, self.born_port, self.store_ip, self.store_port = born_ip, born_port, store_ip, store_port
        self.batch: ExpandedBatch = cache.get((phys, body_len, crc, store_ts),
                                              view[HEADER_SIZE:HEADER_SIZE + body_len])

    def offsets(self, first: int, count: int) -> list[tuple[int, int]]:
        """(logical offset, record index) of the records at offsets [first, first + count)."""
        base = self.base_offset
        batch = self.batch
        indexes = batch.span(first - base, first + count - base)  # decodes as far as needed
        if type(indexes) is range:  # deltas are indexes
            return [(base + i, i) for i in indexes]
        return [(base + batch.record(i).offset_delta, i) for i in indexes]

    def matching(self, first: int, count: int, message_filter: "MessageFilter | None",
                 tag_header: str = DEFAULT_TAG_HEADER) -> list[tuple[int, int]]:
        """`offsets` of the records a subscription matches (all of them without a filter).
        A tag subscription over a batch whose records all carry one tag (its TAGS property)
        is checked once for the batch."""
        wanted = self.offsets(first, count)
        if message_filter is None:
            return wanted
        shared = self.properties.get(PROPERTY_TAGS)
        if shared is not None and message_filter.expression_type == EXPRESSION_TYPE_TAG:
            return wanted if message_filter.match(shared, self.properties) else []
        props = self.batch.properties
        match = message_filter.match
        out = []
        for offset, i in wanted:
            p = props(i, tag_header)
            if match(p.get(PROPERTY_TAGS), p):
                out.append((offset, i))
        return out

    def record(self, index: int) -> Record:
        return self.batch.record(index)

    def message(self, index: int, tag_header: str = DEFAULT_TAG_HEADER) -> MessageExt:
        """Record ``index`` as a decoded message (its own copy of the properties)."""
        return self.messages([index], tag_header)[0]

    def messages(self, indexes: Iterable[int], tag_header: str = DEFAULT_TAG_HEADER) -> list[MessageExt]:
        """Records ``indexes`` as decoded messages, each with its own properties. Built
        positionally in one loop, as decode_record builds a plain one: a drain reads every
        message this way."""
        batch = self.batch
        record, own_properties = batch.record, batch.own_properties
        topic, queue_id, base, phys, size, crc = (self.topic, self.queue_id, self.base_offset,
                                                  self.commit_log_offset, self.store_size, self.body_crc)
        flag, sys_flag, born_ts, store_ts = self.flag, self.sys_flag, batch.base_timestamp, self.store_timestamp
        born = (host_text(self.born_ip), self.born_port)
        store = (host_text(self.store_ip), self.store_port)
        out = []
        for i in indexes:
            rec = record(i)
            out.append(MessageExt(topic, rec.value or b"", own_properties(i, tag_header), queue_id,
                                  base + rec.offset_delta, phys, size, crc, flag, sys_flag,
                                  born_ts + rec.timestamp_delta, born, store_ts, store, 0, 0))
        return out


def open_batch(record: memoryview | bytes, cache: BatchCache | None = None) -> StoredBatch:
    """The inner-batch record ``record`` (a whole CommitLog record), its body expanded
    through ``cache`` (default: :data:`BATCHES`). Raises BadRecord, or CorruptBatch for a
    body that does not load."""
    return StoredBatch(record, BATCHES if cache is None else cache)


def batches_of(segments: Iterable["Segment"], cache: BatchCache | None = None
               ) -> Iterator[tuple["Segment", StoredBatch | None]]:
    """Each segment of a read with its opened batch (None for plain records); a run of
    segments over one record (a filter cut it) opens the record once."""
    last_phys = -1
    batch: StoredBatch | None = None
    for seg in segments:
        if seg.batch_base is None:
            yield seg, None
            continue
        (phys,) = I64.unpack_from(seg.view, POS_PHYSICAL_OFFSET)
        if batch is None or phys != last_phys:
            batch = open_batch(seg.view, cache)
            last_phys = phys
        yield seg, batch


def batch_messages(record: memoryview | bytes, tag_header: str = DEFAULT_TAG_HEADER,
                   first_offset: int | None = None, count: int | None = None,
                   cache: BatchCache | None = None) -> Iterator[MessageExt]:
    """Messages of the inner-batch CommitLog ``record``, from ``first_offset`` on (all by
    default), at most ``count`` of them."""
    stored = open_batch(record, cache)
    first = stored.base_offset if first_offset is None else first_offset
    for _, i in stored.offsets(first, (1 << 62) if count is None else count):
        yield stored.message(i, tag_header)


def matching_records(segment: "Segment", message_filter: "MessageFilter | None", *,
                     tag_header: str = DEFAULT_TAG_HEADER,
                     cache: BatchCache | None = None) -> list[tuple[int, Record]]:
    """(logical offset, record) of the wanted records of an inner-batch segment (offsets
    [first_offset, first_offset + count)) that ``message_filter`` matches. Raises
    CorruptBatch for a batch that does not decode."""
    if segment.batch_base is None:
        raise ValueError("not an inner-batch segment")
    stored = open_batch(segment.view, cache)
    return [(offset, stored.record(i))
            for offset, i in stored.matching(segment.first_offset, segment.count, message_filter, tag_header)]
