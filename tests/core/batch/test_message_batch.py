"""MessageBatch bodies (what a client sends for a batch), against an independent decoder."""

from __future__ import annotations

import struct

import construct as cs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketport.common.batch.message_batch import BatchMessage, decode_batch, encode_batch
from rocketport.core.errors import InvalidMessage

BATCH_ENTRY = cs.Struct(
    "total" / cs.Int32sb,
    "magic" / cs.Int32sb,
    "crc" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "body" / cs.Prefixed(cs.Int32sb, cs.GreedyBytes),
    "properties" / cs.Prefixed(cs.Int16sb, cs.GreedyBytes),
)


def test_batch_layout_matches_independent_decoder() -> None:
    raw = encode_batch([BatchMessage(b"hello", {"TAGS": "A"}, flag=5), BatchMessage(b"", {})])
    entries = cs.GreedyRange(BATCH_ENTRY).parse(raw)
    assert [(e.total, e.magic, e.crc, e.flag, e.body, e.properties) for e in entries] == [
        (20 + 5 + 2 + 7, 0, 0, 5, b"hello", b"TAGS\x01A\x02"),
        (22, 0, 0, 0, b"", b""),
    ]


@given(st.lists(st.tuples(st.binary(max_size=40), st.dictionaries(
    st.text("ABCxyz_", min_size=1, max_size=5), st.text("abc 1", max_size=5), max_size=3),
    st.integers(-(2**31), 2**31 - 1)), max_size=5))
def test_batch_round_trip(items: list) -> None:
    messages = [BatchMessage(body, props, flag) for body, props, flag in items]
    decoded = decode_batch(encode_batch(messages))
    assert [(bytes(m.body), m.properties, m.flag) for m in decoded] == items


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x00\x00\x16",
        struct.pack(">iiiii", 100, 0, 0, 0, 0) + b"\x00\x00",
        struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00",
        struct.pack(">iiiii", 23, 0, 0, 0, 0) + b"\x00\x00" + b"x",
    ],
)
def test_bad_batches_raise(raw: bytes) -> None:
    with pytest.raises(InvalidMessage):
        decode_batch(raw)
