"""The one inner-batch expander: a batch decompressed once, records decoded once and only as
far as asked, a cache bounded by batches and by memory."""

from __future__ import annotations

import os

import pytest

from rocketport.common.batch import Record, build_batch, iter_records
from rocketport.common.batch.compression import LZ4, ZSTD
from rocketport.common.batch.expander import BatchCache, ExpandedBatch
from rocketport.common.batch.messages import record_properties
from rocketport.common.batch.record_batch import CorruptBatch


def _records(n: int, value_size: int = 100) -> list[Record]:
    return [Record(i, i * 3, b"k%d" % i if i % 4 else None, os.urandom(value_size),
                   [("tag", b"AB"[i % 2:i % 2 + 1]), ("bin", bytes([i % 256, 0xFF])), ("nil", None)])
            for i in range(n)]


def test_records_decoded_once_and_only_as_far_as_asked():
    recs = _records(1000)
    batch = build_batch(recs, base_timestamp=7, compression=LZ4)
    cache = BatchCache()
    got = cache.get("b", batch)
    assert cache.stats.decompressions == 1 and cache.stats.misses == 1
    assert got.count == 1000 and got.base_timestamp == 7
    loaded = got.cost
    assert list(got.span(0, 32)) == list(range(32))
    first_pull = got.cost - loaded  # what the 32 decoded records cost: not 1,000 of them
    for first in range(32, 1000, 32):  # the rest of the batch, 32 at a time
        again = cache.get("b", b"never read on a hit")
        assert again is got
        assert list(again.span(first, first + 32)) == list(range(first, min(first + 32, 1000)))
    assert cache.stats.decompressions == 1 and cache.stats.record_decodes == 1
    assert cache.stats.hits == 31
    assert got.records() == list(iter_records(batch)) == recs  # key, value, headers, deltas
    assert got.cost - loaded > 25 * first_pull


def test_properties_are_the_one_mapping_and_built_once():
    recs = _records(10)
    got = ExpandedBatch(build_batch(recs, base_timestamp=1))
    props = got.properties(3, "tag")
    assert props == record_properties(recs[3].key, recs[3].headers, "tag")
    assert props["TAGS"] == "B" and "nil" not in props
    assert got.properties(3, "tag") is props
    assert got.properties(3, "bin") == record_properties(recs[3].key, recs[3].headers, "bin")


def test_span_of_a_batch_whose_deltas_are_not_indexes():
    recs = [Record(d, 0, None, b"v%d" % d, []) for d in (0, 2, 3, 7)]
    got = ExpandedBatch(build_batch(recs, base_timestamp=1))
    assert list(got.span(1, 4)) == [1, 2]
    assert list(got.span(0, 100)) == [0, 1, 2, 3]
    assert list(got.span(4, 7)) == []
    assert list(got.span(5, 5)) == []


def test_evicts_least_recently_used_by_count_and_by_size():
    batch = build_batch(_records(50), base_timestamp=1, compression=ZSTD)
    cache = BatchCache(max_batches=3)
    for key in "abc":
        cache.get(key, batch)
    cache.get("a", batch)  # now b is the oldest
    cache.get("d", batch)
    assert "b" not in cache and {"a", "c", "d"} <= {k for k in "abcd" if k in cache}
    assert cache.stats.evictions == 1 and len(cache) == 3

    one = ExpandedBatch(batch).cost
    cache = BatchCache(max_batches=100, max_bytes=int(one * 2.5))
    for key in range(5):
        cache.get(key, batch)
    assert len(cache) == 2 and cache.bytes <= cache.max_bytes
    # decoding records grows an entry's cost: the cache keeps within its budget
    cache.get(4, batch).records()
    assert len(cache) == 1 and 4 in cache


def test_a_batch_larger_than_the_budget_is_still_decoded_once():
    batch = build_batch(_records(200), base_timestamp=1, compression=LZ4)
    cache = BatchCache(max_bytes=1)
    for first in range(0, 200, 32):
        cache.get("big", batch).span(first, first + 32)
    assert cache.stats.decompressions == 1 and cache.stats.record_decodes == 1
    cache.get("other", batch)
    assert len(cache) == 1 and "other" in cache


def test_a_corrupt_batch_is_refused_and_not_kept():
    batch = bytearray(build_batch(_records(5), base_timestamp=1, compression=LZ4))
    batch[70:80] = b"\x00" * 10  # inside the lz4 frame
    cache = BatchCache()
    with pytest.raises(CorruptBatch):
        cache.get("bad", bytes(batch))
    assert len(cache) == 0 and cache.bytes == 0


def test_records_that_do_not_decode_keep_failing():
    good = build_batch([Record(i, 0, None, b"x" * 10, []) for i in range(4)], base_timestamp=1)
    bad = bytearray(good)
    bad[-1] = 5  # the last record claims five headers it does not hold
    got = ExpandedBatch(bytes(bad))
    assert got.record(0).value == b"x" * 10  # what decodes is served
    with pytest.raises(CorruptBatch):
        got.records()
    with pytest.raises(CorruptBatch):
        got.span(0, 4)
