"""Each record's tag in a batch (core.batch.record_tags): the one derivation of the tags codes
that both the produce path and recovery give an inner batch's ConsumeQueue entries."""

from __future__ import annotations

import pytest

from rocketport.common.batch import Record, build_batch
from rocketport.common.batch.compression import CODEC_NAMES, GZIP
from rocketport.common.batch.messages import record_properties
from rocketport.common.batch.record_batch import HEADER_SIZE, CorruptBatch
from rocketport.common.batch.record_tags import batch_tags, codes_and_shared, payload_tags
from rocketport.common.message import PROPERTY_TAGS
from rocketport.common.tags import tags_code

HEADERS: list[list[tuple[str, bytes | None]]] = [
    [("tag", b"A")],
    [],
    [("h", b"x"), ("tag", b"B"), ("z", None)],
    [("tag", None)],                         # a null value is no tag
    [("tag", b"A"), ("tag", b"C")],          # repeated: the last one wins
    [("tag", b"D"), ("tag", None)],          # ...among the non-null ones
    [("tag", b"\xff\xfe")],                  # not UTF-8: surrogateescape, as properties
    [("tagx", b"A"), ("Tag", b"A")],         # other names
    [("tag", b"")],                          # empty: no tag
]


def _batch(headers: list[list[tuple[str, bytes | None]]], codec: int = 0) -> bytes:
    records = [Record(i, i, None, b"v", list(h)) for i, h in enumerate(headers)]
    return build_batch(records, base_timestamp=1_700_000_000_000, compression=codec)


@pytest.mark.parametrize("codec", sorted(CODEC_NAMES), ids=CODEC_NAMES.get)
def test_each_record_gets_the_tag_its_message_has(codec):
    tags = batch_tags(_batch(HEADERS, codec), "tag")
    # exactly the TAGS that the records' per-message view (filters' exact check) gives
    assert tags == [record_properties(None, h).get(PROPERTY_TAGS) for h in HEADERS]
    assert tags == ["A", None, "B", None, "C", "D", "\udcff\udcfe", None, ""]


def test_the_configured_header_names_the_tag():
    headers = [[("x-tag", b"A"), ("tag", b"B")], [("tag", b"B")]]
    assert batch_tags(_batch(headers), "x-tag") == ["A", None]


def test_a_tags_header_wins_over_the_tag_header():
    """As a record's message has it (core.batch.messages): an explicit TAGS header is its tag."""
    headers = [[("TAGS", b"T")], [("tag", b"A"), ("TAGS", b"T")], [("TAGS", b"T"), ("tag", b"A")],
               [("TAGS", None), ("tag", b"A")], [("x", b"y")]]
    tags = batch_tags(_batch(headers), "tag")
    assert tags == [record_properties(None, h).get(PROPERTY_TAGS) for h in headers]
    assert tags == ["T", "T", "T", "A", None]


def test_no_record_is_decoded_when_the_name_does_not_occur():
    assert batch_tags(_batch([[("h", b"x")], []]), "tag") is None
    assert batch_tags(_batch([[]] * 50, GZIP), "tag") is None
    # garbage records: None all the same, since nothing was decoded
    assert payload_tags(memoryview(b"\xff" * 64), 5, "tag") is None


def test_the_name_inside_a_value_only_decodes_to_no_tags():
    batch = build_batch([Record(0, 0, b"tag", b"a tag value", [("tagging", b"x")])], base_timestamp=1)
    assert batch_tags(batch, "tag") == [None]


def test_payload_tags_reads_an_uncompressed_payload_in_place():
    batch = _batch([[("tag", b"A")], [("tag", b"B")]])
    assert payload_tags(memoryview(batch)[HEADER_SIZE:], 2, "tag") == ["A", "B"]


def test_corrupt_batches_raise_corrupt_batch():
    batch = bytearray(_batch([[("tag", b"A")], [("tag", b"B")]]))
    with pytest.raises(CorruptBatch):
        batch_tags(batch[:-3], "tag")  # shorter than its length says
    with pytest.raises(CorruptBatch):
        payload_tags(bytes(batch[HEADER_SIZE:]), 3, "tag")  # fewer records than counted
    compressed = bytearray(_batch([[("tag", b"A")]] * 20, GZIP))
    compressed[HEADER_SIZE + 12:HEADER_SIZE + 20] = b"\x00" * 8
    with pytest.raises(CorruptBatch):
        batch_tags(compressed, "tag")


def test_codes_and_the_shared_tag():
    assert codes_and_shared(["A", "B", None]) == ([tags_code("A"), tags_code("B"), 0], None)
    assert codes_and_shared(["A", "A"]) == ([tags_code("A")] * 2, "A")
    assert codes_and_shared(["A", None]) == ([tags_code("A"), 0], None)
    assert codes_and_shared([None, None]) == ([0, 0], None)
    assert codes_and_shared(["", ""]) == ([0, 0], None)
