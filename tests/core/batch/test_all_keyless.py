"""all_keyless: the index builder's one-pass check that a batch has no keys to index.

Its promise is one-sided: True only when reading the records by their lengths (what
record_keys does) would find no key. It must say True for the common keyless batch, and
never for a batch with a key, headers, mixed value sizes or lengths that disagree with the
records' layout.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketport.common.batch.record_batch import (
    HEADER_SIZE,
    Record,
    all_keyless,
    build_batch,
    record_keys,
)


def payload(records: list[Record]) -> bytes:
    return build_batch(records, base_timestamp=1_700_000_000_000)[HEADER_SIZE:]


def test_keyless_batches_of_equal_values_are_recognised_for_every_delta_width():
    # timestamp deltas of one, two and three varint bytes; offset deltas past 63 take two
    deltas = [0, 5, 63, 64, 8191, 8192, 500_000]
    for size in (0, 1, 100, 1024):
        records = [Record(i, deltas[i % len(deltas)], None, bytes([i % 251]) * size) for i in range(300)]
        data = payload(records)
        assert all_keyless(data) and all_keyless(memoryview(data))  # the index reads a mapping
        assert record_keys(data, 0, len(records)) == ([], len(data))


def test_a_single_key_headers_or_another_value_size_mean_not_known():
    base = [Record(i, i, None, b"v" * 100) for i in range(50)]
    keyed = base[:25] + [Record(25, 25, b"k", b"v" * 100)] + base[26:]
    with_header = base[:49] + [Record(49, 49, None, b"v" * 100, [("tag", b"red")])]
    other_size = base[:49] + [Record(49, 49, None, b"v" * 99)]
    empty_key = [Record(0, 0, b"", b"v" * 100)] + base[1:]
    for records in (keyed, with_header, other_size, empty_key):
        assert not all_keyless(payload(records))


def test_lengths_that_disagree_with_the_layout_are_refused():
    """Read by lengths, a record whose length disagrees with its layout swallows bytes of
    the next one: the check must not accept a batch on the records' looks alone."""
    good = payload([Record(0, 0, None, b"a" * 100), Record(1, 0, None, b"b" * 100)])
    forged = bytearray(good)
    forged[0] += 2  # zigzag: one byte longer
    assert not all_keyless(bytes(forged))
    assert not all_keyless(good[:-1])  # truncated
    assert not all_keyless(good + b"\x00")  # trailing bytes
    assert not all_keyless(b"") and not all_keyless(b"\xff" * 12)


records = st.lists(
    st.builds(lambda key, size, headers, ts: (key, size, headers, ts),
              st.one_of(st.none(), st.binary(max_size=4)),
              st.sampled_from([0, 3, 100]),
              st.booleans(),
              st.integers(0, 3_000_000)),
    min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(records)
def test_true_only_when_reading_by_lengths_finds_no_key(spec):
    batch = [Record(i, ts, key, b"x" * size, [("h", b"1")] if headers else [])
             for i, (key, size, headers, ts) in enumerate(spec)]
    data = payload(batch)
    keys, _ = record_keys(data, 0, len(batch))
    # deltas past three varint bytes (2^20 ms) are a layout the check does not cover
    expected = (all(r.key is None and not r.headers and ts < 1 << 20 for r, (*_, ts) in zip(batch, spec))
                and len({len(r.value) for r in batch}) == 1)
    assert all_keyless(data) == expected
    if expected:
        assert keys == []
