"""The work of one compaction, as plain functions over copied record bytes (run in a thread).

Kafka's cleaner in two passes over a queue's dirty records (those past its compacted log):
`scan` builds the offset map (key -> the offset of its latest record), stopping at
``min.compaction.lag.ms``'s horizon or when the map holds its bound of keys; `keep` then
decides, for every record of the old compacted log and of the dirty range, whether it stays:
a record stays when no later record has its key, a tombstone (a null value) only until
``delete.retention.ms`` after it was stored. A batch whose records all stay is kept as stored;
one that lost some is rewritten with the rest, each keeping its offset delta (Kafka offsets
never change); transaction markers (control batches) always stay, since read_committed
readers need them. Keys longer than 32 bytes are kept in the map as a 128-bit digest.

Never touches the store or the event loop: callers hand it bytes and take back bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from rocketport.common.batch.record_batch import Record, batch_payload, build_batch, iter_records, parse_header, record_keys
from rocketport.common.message import PROPERTY_KEYS, decode_properties

from ..store.record import HEADER, I32, I64, POS_BODY_LENGTH, POS_STORE_TIMESTAMP, body_crc, topic_and_properties
from ..store.record import HEADER_SIZE as RECORD_HEADER_SIZE
from .snapshot import record_span

_ATTRIBUTES: Final = 21  # a Kafka batch's attributes (i16), from its start
_RECORDS_COUNT: Final = 57
_CONTROL: Final = 0x20
_SHORT_KEY: Final = 32


def map_key(key: bytes) -> bytes:
    return key if len(key) <= _SHORT_KEY else hashlib.blake2b(key, digest_size=16).digest()


def records_of(view: memoryview, first: int, count: int, batch_base: int | None) -> Iterator[memoryview]:
    """The CommitLog records a read segment covers (a plain run holds ``count`` of them)."""
    if batch_base is not None:
        yield view
        return
    pos = 0
    for _ in range(count):
        (size,) = I32.unpack_from(view, pos)
        yield view[pos:pos + size]
        pos += size


def store_time(record: bytes | memoryview) -> int:
    return I64.unpack_from(record, POS_STORE_TIMESTAMP)[0]


def _body(record: bytes | memoryview) -> memoryview:
    (length,) = I32.unpack_from(record, POS_BODY_LENGTH)
    return memoryview(record)[RECORD_HEADER_SIZE:RECORD_HEADER_SIZE + length]


def _is_control(body: memoryview) -> bool:
    return len(body) > _ATTRIBUTES + 1 and bool(body[_ATTRIBUTES + 1] & _CONTROL)


def message_count(record: bytes | memoryview) -> int:
    """Messages in a CommitLog record: 1, or an inner batch's records count."""
    batch = record_span(record)[2]
    return I32.unpack_from(record, RECORD_HEADER_SIZE + _RECORDS_COUNT)[0] if batch else 1


def _plain_key(record: bytes | memoryview) -> bytes | None:
    keys = decode_properties(topic_and_properties(record)[2]).get(PROPERTY_KEYS)
    return keys.encode("utf-8", "surrogateescape") if keys else None


def _batch_keys(body: memoryview, first: int, last: int) -> list[bytes] | None:
    """The keys of a batch as produced (offset deltas 0..n-1, every record keyed, as a
    compacted topic's producers must), read without decoding records; None otherwise."""
    count, payload = batch_payload(body)
    if last - first + 1 != count:
        return None
    keys, _ = record_keys(payload, 0, count)
    return keys if len(keys) == count else None


def keyed_offsets(record: bytes | memoryview) -> Iterator[tuple[int, bytes | None]]:
    """(offset, key) of each message of a CommitLog record (control batches: none; a plain
    record: its KEYS)."""
    first, last, batch = record_span(record)
    if not batch:
        yield first, _plain_key(record)
        return
    body = _body(record)
    if _is_control(body):
        return
    keys = _batch_keys(body, first, last)
    if keys is not None:
        yield from enumerate(keys, first)
        return
    for r in iter_records(body):
        yield first + r.offset_delta, r.key


@dataclass(slots=True)
class OffsetMap:
    """Kafka's cleaner offset map: each key's latest offset in the dirty range, bounded."""

    max_keys: int
    latest: dict[bytes, int] = field(default_factory=dict)
    end: int = -1  # offsets below this are scanned (-1: none yet)
    records: int = 0  # messages scanned

    @property
    def full(self) -> bool:
        return len(self.latest) >= self.max_keys


def scan(offset_map: OffsetMap, records: list[bytes], horizon_ms: int) -> bool:
    """Add ``records`` (whole CommitLog records, in offset order) to the map; stops before
    the first record stored after ``horizon_ms`` (min.compaction.lag.ms) or once the map is
    full. True when it stopped early: the dirty range to compact ends at ``offset_map.end``."""
    latest = offset_map.latest
    for record in records:
        if store_time(record) > horizon_ms or offset_map.full:
            return True
        last = record_span(record)[1]
        for offset, key in keyed_offsets(record):
            if key is not None:
                latest[map_key(key)] = offset
            offset_map.records += 1
        offset_map.end = last + 1
    return False


def kept(record: bytes | memoryview, latest: dict[bytes, int], tombstone_before_ms: int) -> bytes | memoryview | None:
    """The record as it stays in the compacted log: itself, a rewrite holding fewer of its
    batch's records, or None when nothing of it stays. A tombstone stored at or before
    ``tombstone_before_ms`` (now - delete.retention.ms) goes with its key's older values."""
    first, _, batch = record_span(record)
    if not batch:
        key = _plain_key(record)
        if key is None or latest.get(map_key(key), first) == first:
            return record
        return None
    body = _body(record)
    if _is_control(body):
        return record
    tombstones_expired = store_time(record) <= tombstone_before_ms
    keys = _batch_keys(body, first, record_span(record)[1])
    if keys is not None:  # most batches of a changelog lose all or none: no record decoded
        stays = sum(latest.get(map_key(key), offset) == offset for offset, key in enumerate(keys, first))
        if stays == 0:
            return None
        if stays == len(keys) and not tombstones_expired:
            return record
    records = list(iter_records(body))
    stay = []
    for r in records:
        offset = first + r.offset_delta
        if r.key is not None and latest.get(map_key(r.key), offset) != offset:
            continue
        if r.value is None and tombstones_expired:
            continue
        stay.append(r)
    if len(stay) == len(records):
        return record
    if not stay:
        return None
    return with_body(record, _rebuilt(body, stay))


def _rebuilt(body: memoryview, stay: list[Record]) -> bytes:
    h = parse_header(body)
    return build_batch(stay, base_offset=h.base_offset, base_timestamp=h.base_timestamp,
                       compression=h.compression, producer_id=h.producer_id,
                       producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                       transactional=h.is_transactional, partition_leader_epoch=h.partition_leader_epoch)


def with_body(record: bytes | memoryview, body: bytes) -> bytes:
    """The CommitLog record with another body (size, body CRC and length follow it)."""
    fields = list(HEADER.unpack_from(record, 0))
    old_len = fields[-1]
    tail = bytes(record[RECORD_HEADER_SIZE + old_len:fields[0]])
    fields[0] = RECORD_HEADER_SIZE + len(body) + len(tail)
    fields[2] = body_crc(body)
    fields[-1] = len(body)
    return b"".join((HEADER.pack(*fields), body, tail))

