"""keyless_header_values: the index builder's one pass over a batch of keyless records that
each carry one id header (the Spark writer's chunks), giving the ids and telling the
records have no key.

Like all_keyless its promise is one-sided: it answers the header values only when reading
the records by their lengths finds exactly such records, and None for anything else: a key,
another or a second header, a value of another size, lengths that disagree with the layout.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketport.common.batch.record_batch import (
    HEADER_SIZE,
    Record,
    build_batch,
    iter_payload_records,
    keyless_header_values,
)

NAME = b"UNIQ_KEY"


def payload(records: list[Record]) -> bytes:
    return build_batch(records, base_timestamp=1_700_000_000_000)[HEADER_SIZE:]


def ids(n: int) -> list[bytes]:
    return [b"%032X" % (0xABC0 + i) for i in range(n)]


def test_one_id_a_keyless_record_is_read_for_every_delta_width():
    deltas = [0, 5, 63, 64, 8191, 8192, 500_000]  # one, two and three varint bytes
    for size in (0, 1, 100, 1024):
        records = [Record(i, deltas[i % len(deltas)], None, bytes([i % 251]) * size, [("UNIQ_KEY", uid)])
                   for i, uid in enumerate(ids(600))]  # offset deltas of one and two bytes
        data = payload(records)
        assert keyless_header_values(data, NAME, 32) == ids(600)
        assert keyless_header_values(memoryview(data), NAME, 32) == ids(600)  # the index reads a mapping


def test_a_key_another_header_or_value_size_mean_not_known():
    base = [Record(i, 0, None, b"v" * 100, [("UNIQ_KEY", uid)]) for i, uid in enumerate(ids(50))]
    keyed = base[:25] + [Record(25, 0, b"k", b"v" * 100, [("UNIQ_KEY", ids(26)[25])])] + base[26:]
    empty_key = [Record(0, 0, b"", b"v" * 100, [("UNIQ_KEY", ids(1)[0])])] + base[1:]
    two_headers = base[:49] + [Record(49, 0, None, b"v" * 100, [("TAGS", b"a"), ("UNIQ_KEY", ids(50)[49])])]
    other_name = base[:49] + [Record(49, 0, None, b"v" * 100, [("UNIQ_KEZ", ids(50)[49])])]
    short_id = base[:49] + [Record(49, 0, None, b"v" * 100, [("UNIQ_KEY", b"A" * 31)])]
    no_header = base[:49] + [Record(49, 0, None, b"v" * 100)]
    other_size = base[:49] + [Record(49, 0, None, b"v" * 99, [("UNIQ_KEY", ids(50)[49])])]
    for records in (keyed, empty_key, two_headers, other_name, short_id, no_header, other_size):
        assert keyless_header_values(payload(records), NAME, 32) is None


def test_lengths_that_disagree_with_the_layout_are_refused():
    good = payload([Record(i, 0, None, b"a" * 100, [("UNIQ_KEY", uid)]) for i, uid in enumerate(ids(2))])
    forged = bytearray(good)
    forged[0] += 2  # zigzag: one byte longer
    assert keyless_header_values(bytes(forged), NAME, 32) is None
    assert keyless_header_values(good[:-1], NAME, 32) is None  # truncated
    assert keyless_header_values(good + b"\x00", NAME, 32) is None  # trailing bytes
    assert keyless_header_values(b"\xff" * 12, NAME, 32) is None


records = st.lists(
    st.builds(lambda key, size, header, ts: (key, size, header, ts),
              st.one_of(st.none(), st.binary(max_size=4)),
              st.sampled_from([0, 3, 100]),
              st.sampled_from([[], [("UNIQ_KEY", b"I" * 32)], [("UNIQ_KEY", b"I" * 4)], [("h", b"I" * 32)],
                               [("UNIQ_KEY", b"I" * 32), ("UNIQ_KEY", b"J" * 32)]]),
              st.integers(0, 3_000_000)),
    min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(records)
def test_values_only_when_reading_by_lengths_finds_such_records(spec):
    batch = [Record(i, ts, key, b"x" * size, header) for i, (key, size, header, ts) in enumerate(spec)]
    data = payload(batch)
    decoded = list(iter_payload_records(data, len(batch)))
    # deltas past three varint bytes (2^20 ms) are a layout the pass does not cover
    expected = (all(r.key is None and len(r.headers) == 1 and r.headers[0][0] == "UNIQ_KEY"
                    and len(r.headers[0][1]) == 32 and ts < 1 << 20 for r, (*_, ts) in zip(decoded, spec))
                and len({len(r.value) for r in decoded}) == 1)
    found = keyless_header_values(data, NAME, 32)
    assert found == ([r.headers[0][1] for r in decoded] if expected else None)
