"""Record batch v2: header, CRC, offsets, splitting, record decode and build.

The header is checked against an independent declarative decoder written with ``construct``
from the Kafka spec, so a wrong struct format in the product cannot pass unnoticed.
"""

from __future__ import annotations

import struct

import construct as cs
import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketport.common.batch import compression
from rocketport.common.batch.record_batch import (
    HEADER_SIZE,
    CorruptBatch,
    Record,
    build_batch,
    iter_records,
    parse_header,
    set_base_offset,
    split_batches,
    verify_crc,
)

TS = 1_700_000_000_000

SPEC_HEADER = cs.Struct(
    "base_offset" / cs.Int64sb,
    "batch_length" / cs.Int32sb,
    "partition_leader_epoch" / cs.Int32sb,
    "magic" / cs.Const(2, cs.Int8sb),
    "crc" / cs.Int32ub,
    "attributes" / cs.BitStruct(
        "unused" / cs.BitsInteger(9),
        "has_delete_horizon" / cs.Flag,
        "is_control" / cs.Flag,
        "is_transactional" / cs.Flag,
        "timestamp_type" / cs.Flag,
        "compression" / cs.BitsInteger(3),
    ),
    "last_offset_delta" / cs.Int32sb,
    "base_timestamp" / cs.Int64sb,
    "max_timestamp" / cs.Int64sb,
    "producer_id" / cs.Int64sb,
    "producer_epoch" / cs.Int16sb,
    "base_sequence" / cs.Int32sb,
    "records_count" / cs.Int32sb,
)


def _records(n: int, size: int = 100) -> list[Record]:
    return [Record(i, i * 3, b"key-%d" % i, bytes([i % 251]) * size, [("trace", b"t%d" % i)]) for i in range(n)]


def test_header_matches_independent_construct_decoder() -> None:
    recs = _records(7)
    batch = build_batch(
        recs,
        base_offset=1234,
        base_timestamp=TS,
        compression=compression.LZ4,
        producer_id=99,
        producer_epoch=3,
        base_sequence=40,
        transactional=True,
    )
    spec = SPEC_HEADER.parse(batch)
    assert spec.base_offset == 1234
    assert spec.batch_length == len(batch) - 12
    assert spec.partition_leader_epoch == -1
    assert spec.attributes.compression == compression.LZ4
    assert spec.attributes.is_transactional and not spec.attributes.is_control
    assert not spec.attributes.timestamp_type
    assert spec.last_offset_delta == 6
    assert spec.base_timestamp == TS
    assert spec.max_timestamp == TS + 18
    assert (spec.producer_id, spec.producer_epoch, spec.base_sequence) == (99, 3, 40)
    assert spec.records_count == 7
    assert spec.crc == crc32c.crc32c(batch[21:])
    h = parse_header(batch)
    assert (h.base_offset, h.batch_length, h.crc, h.records_count) == (1234, spec.batch_length, spec.crc, 7)
    assert h.compression == compression.LZ4 and h.is_transactional and not h.is_control
    assert h.size == len(batch) and h.last_offset == 1240 and HEADER_SIZE == 61


def test_hand_built_uncompressed_batch_decodes() -> None:
    # One record: key null, value b"hi", one header ("a", null), written byte by byte.
    body = bytes([0, 4, 2, 1, 4]) + b"hi" + bytes([2, 2]) + b"a" + bytes([1])
    record = bytes([len(body) * 2]) + body
    after_crc = struct.pack(">hiqqqhii", 0, 1, TS, TS + 2, -1, -1, -1, 1) + record
    batch = struct.pack(">qiib", 0, 9 + len(after_crc), -1, 2) + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc
    assert verify_crc(batch)
    assert list(iter_records(batch)) == [Record(1, 2, None, b"hi", [("a", None)])]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip_every_codec(codec: int) -> None:
    recs = _records(300) + [Record(300, 0, None, None, []), Record(301, -5, b"", b"", [("", b"")])]
    batch = build_batch(recs, base_timestamp=TS, compression=codec)
    assert verify_crc(batch)
    assert parse_header(batch).compression == codec
    assert list(iter_records(batch)) == recs
    assert list(iter_records(memoryview(batch))) == recs


def test_decodes_xerial_snappy_built_by_hand() -> None:
    import cramjam

    plain = build_batch(_records(50), base_timestamp=TS)
    payload = plain[HEADER_SIZE:]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for start in range(0, len(payload), 1000):
        block = bytes(cramjam.snappy.compress_raw(payload[start : start + 1000]))
        framed += struct.pack(">I", len(block)) + block
    head = bytearray(plain[:HEADER_SIZE])
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(framed))
    struct.pack_into(">h", head, 21, compression.SNAPPY)
    batch = bytearray(head + framed)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(batch[21:]))
    assert verify_crc(batch)
    assert list(iter_records(batch)) == _records(50)


def test_crc_mismatch_detected_anywhere_after_crc_field() -> None:
    batch = build_batch(_records(5), base_timestamp=TS, compression=compression.GZIP)
    assert verify_crc(batch)
    for pos in (21, 30, HEADER_SIZE, len(batch) - 1):
        broken = bytearray(batch)
        broken[pos] ^= 0x01
        assert not verify_crc(broken), pos
    assert not verify_crc(batch[:-1])
    assert not verify_crc(batch[:40])


def test_set_base_offset_keeps_crc_valid() -> None:
    batch = bytearray(build_batch(_records(3), base_timestamp=TS))
    two = bytearray(batch + batch)
    set_base_offset(two, len(batch), 10_000_000_000)
    assert parse_header(two, len(batch)).base_offset == 10_000_000_000
    assert verify_crc(two, len(batch))
    set_base_offset(memoryview(batch), 0, 77)
    assert parse_header(batch).base_offset == 77 and verify_crc(batch)


def test_split_batches() -> None:
    a = build_batch(_records(3), base_timestamp=TS)
    b = build_batch(_records(9), base_timestamp=TS, compression=compression.ZSTD)
    assert split_batches(a + b) == [(0, len(a)), (len(a), len(b))]
    assert split_batches(b"") == []
    with pytest.raises(CorruptBatch):
        split_batches(a + b[:-1])  # truncated tail
    with pytest.raises(CorruptBatch):
        split_batches(a + b[:30])  # partial header
    old_magic = bytearray(a)
    old_magic[16] = 1
    with pytest.raises(CorruptBatch, match="magic"):
        split_batches(old_magic)
    short = bytearray(a)
    struct.pack_into(">i", short, 8, 10)
    with pytest.raises(CorruptBatch):
        split_batches(short)


def test_corrupt_records_raise_typed_error() -> None:
    batch = bytearray(build_batch(_records(4), base_timestamp=TS))
    struct.pack_into(">i", batch, 57, 5)  # claims one record more than it holds
    with pytest.raises(CorruptBatch):
        list(iter_records(batch))
    batch = bytearray(build_batch(_records(4), base_timestamp=TS))
    struct.pack_into(">i", batch, 57, 3)  # one record left over
    with pytest.raises(CorruptBatch):
        list(iter_records(batch))
    batch = bytearray(build_batch(_records(4), base_timestamp=TS))
    batch[HEADER_SIZE] = 0x7E  # first record's length now overruns the batch
    with pytest.raises(CorruptBatch):
        list(iter_records(batch))
    gz = bytearray(build_batch(_records(4), base_timestamp=TS, compression=compression.GZIP))
    gz[HEADER_SIZE + 12] ^= 0xFF
    with pytest.raises(CorruptBatch):
        list(iter_records(gz))
    with pytest.raises(CorruptBatch):
        parse_header(bytes(60))


def test_build_rejects_empty() -> None:
    with pytest.raises(ValueError):
        build_batch([], base_timestamp=TS)


_bytes_or_none = st.one_of(st.none(), st.binary(max_size=300))
_record_bodies = st.tuples(
    st.integers(-(2**40), 2**40),
    _bytes_or_none,
    _bytes_or_none,
    st.lists(st.tuples(st.text(max_size=20), _bytes_or_none), max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(_record_bodies, min_size=1, max_size=40),
    gaps=st.lists(st.integers(0, 2**20), min_size=40, max_size=40),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
    base_offset=st.integers(0, 2**62),
    base_ts=st.integers(0, 2**50),
)
def test_build_iter_round_trip_property(bodies, gaps, codec, base_offset, base_ts) -> None:
    delta = 0
    recs = []
    for (ts_delta, key, value, headers), gap in zip(bodies, gaps):
        recs.append(Record(delta, ts_delta, key, value, headers))
        delta += 1 + gap  # compacted logs leave gaps in offset deltas
    batch = build_batch(recs, base_offset=base_offset, base_timestamp=base_ts, compression=codec)
    assert verify_crc(batch)
    h = parse_header(batch)
    assert h.base_offset == base_offset and h.records_count == len(recs)
    assert h.last_offset_delta == recs[-1].offset_delta
    assert h.max_timestamp == base_ts + max(r.timestamp_delta for r in recs)
    assert SPEC_HEADER.parse(batch).batch_length == len(batch) - 12
    assert list(iter_records(batch)) == recs


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 4))
def test_garbage_payload_never_escapes_as_other_exception(garbage: bytes, codec: int) -> None:
    after_crc = struct.pack(">hiqqqhii", codec, 0, TS, TS, -1, -1, -1, 3) + garbage
    batch = struct.pack(">qiib", 0, 9 + len(after_crc), -1, 2) + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc
    try:
        list(iter_records(batch))
    except CorruptBatch:
        pass
