"""Properties text that writers other than RocketMQ's clients may leave, read to columns
without a broker: records built byte by byte, each row's properties split as RocketMQ
splits them (a pair ends at \\x02 or the end, its name at its first \\x01, a piece without
one is no pair, the last of a repeated name counts), tags, keys and the sharding key taken
out, and the rows the same whichever way the records are cut into pulls."""

from __future__ import annotations

import pytest

from rocketport.core.store.record import encode_record, ip_bytes
from rocketport.pipeline.columns import RecordFormatError, to_batch

TOPIC = "Props"


def record(offset: int, props: bytes, body: bytes = b"v") -> bytes:
    return encode_record(
        topic_bytes=TOPIC.encode(), body=body, props_bytes=props, queue_id=0, flag=0,
        queue_offset=offset, physical_offset=1000 + offset, sys_flag=0, born_timestamp=5,
        born_ip=ip_bytes("127.0.0.1"), born_port=1, store_timestamp=6,
        store_ip=ip_bytes("127.0.0.1"), store_port=10911, reconsume_times=0,
        prepared_transaction_offset=0)


CASES = [  # properties as stored -> (tags, keys, key, properties map, msg_id from UNIQ_KEY)
    (b"TAGS\x01A\x02KEYS\x01a  b\x02n\x011\x02", ("A", ["a", "b"], None, [("n", "1")], None)),
    (b"TAGS\x01A\x02n\x011", ("A", [], None, [("n", "1")], None)),  # no closing \x02
    (b"TAGS\x01A\x02\x02n\x011\x02", ("A", [], None, [("n", "1")], None)),  # an empty piece
    (b"n\x01a\x01b\x02", (None, [], None, [("n", "a\x01b")], None)),  # \x01 in a value
    (b"TAGS\x01A\x02TAGS\x01B\x02", ("B", [], None, [], None)),  # the last one counts
    (b"", (None, [], None, [], None)),
    (b"__SHARDINGKEY\x01s\x02__SHARDINGKEYX\x01t\x02__SHARDIN\x01u\x02",
     (None, [], "s", [("__SHARDINGKEYX", "t"), ("__SHARDIN", "u")], None)),
    (b"\x01v\x02TAG\x01x\x02noValue\x02", (None, [], None, [("", "v"), ("TAG", "x")], None)),
    (b"UNIQ_KEY\x01ID1\x02KEYS\x01k\x02", (None, ["k"], None, [("UNIQ_KEY", "ID1")], "ID1")),
    (b"TAGS\x01\xc3\xa9\x02", ("é", [], None, [], None)),
]


def rows_of(batch) -> list[tuple]:
    return [(r["tags"], r["keys"], r["key"], r["properties"], r["msg_id"]) for r in batch.to_pylist()]


def test_every_case_alone_and_all_together():
    records = [record(i, props) for i, (props, _) in enumerate(CASES)]
    expected = [want for _, want in CASES]
    for i, one in enumerate(records):
        [got] = rows_of(to_batch(one, TOPIC, 0, 100))
        assert got[:4] == expected[i][:4], CASES[i][0]
        if expected[i][4] is None:  # no producer id: the offset message id
            assert len(got[4]) == 32 and got[4].endswith("%016X" % (1000 + i))
        else:
            assert got[4] == expected[i][4]
    together = to_batch(b"".join(records), TOPIC, 0, 100)
    assert [r[:4] for r in rows_of(together)] == [w[:4] for w in expected]
    assert together.column("value").to_pylist() == [b"v"] * len(CASES)
    assert together.column("offset").to_pylist() == list(range(len(CASES)))


def test_well_formed_rows_read_the_same_beside_odd_ones():
    """The common shape (every pair closed, one \\x01 each) and the general one give the
    same rows: a batch of well-formed records, then the same with one odd record in it."""
    good = [record(i, b"TAGS\x01T%d\x02UNIQ_KEY\x01U%d\x02n\x01%d\x02" % (i % 3, i, i)) for i in range(50)]
    plain = rows_of(to_batch(b"".join(good), TOPIC, 0, 1000))
    odd = good[:25] + [record(99, b"TAGS\x01X\x02\x02")] + good[25:]
    mixed = rows_of(to_batch(b"".join(odd), TOPIC, 0, 1000))
    assert mixed[:25] + mixed[26:] == plain
    assert mixed[25][:4] == ("X", [], None, [])
    assert plain[7] == ("T1", [], None, [("UNIQ_KEY", "U7"), ("n", "7")], "U7")


def test_the_range_end_and_bad_bytes():
    body = b"".join(record(i, b"TAGS\x01A\x02") for i in range(10))
    assert to_batch(body, TOPIC, 0, 4).column("offset").to_pylist() == [0, 1, 2, 3]
    assert to_batch(body, TOPIC, 0, 4, frozenset({"B"})).num_rows == 0
    assert to_batch(b"", TOPIC, 0, 4).num_rows == 0
    with pytest.raises(RecordFormatError):
        to_batch(body[:-3], TOPIC, 0, 100)  # the last record cut short
    broken = bytearray(body)
    broken[len(record(0, b"TAGS\x01A\x02")) + 4] ^= 0xFF  # the second record's magic code
    with pytest.raises(RecordFormatError, match="magic"):
        to_batch(bytes(broken), TOPIC, 0, 100)
