"""The writer's encoding without Spark or a broker: rows from Arrow columns become records
of a record batch per chunk that read (core.batch.messages' mapping) as the message a
client Message of the same row would make (tags, keys, sharding key, properties, a unique
id each), the chunk's DEDUP_KEY on its batch, and which rows make which chunk, with which
key and queue, follows from the rows alone, not from how they were cut into RecordBatches."""

from __future__ import annotations

import asyncio
import zlib
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from rocketport.client.message import MessageQueue
from rocketport.common.batch.messages import record_properties
from rocketport.common.batch.record_batch import iter_records, parse_header, verify_crc
from rocketport.common.message import PROPERTY_DEDUP_KEY, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from rocketport.pipeline.entries import RowError
from rocketport.pipeline.schema import PROPERTY_KEY
from rocketport.pipeline.writer import CHUNK, PartitionSender

TOPIC = "Encoded"
QUEUES = [MessageQueue(TOPIC, "broker-a", q) for q in range(4)]
SCHEMA = pa.schema([("value", pa.binary()), ("key", pa.string()), ("tags", pa.string()),
                    ("keys", pa.list_(pa.string())), ("properties", pa.map_(pa.string(), pa.string())),
                    ("queue_id", pa.int32())])


class _Runtime:
    ip = "127.0.0.1"


class RecordingProducer:
    """Stands in for the native Producer: keeps each batch's queue and its records, read as
    the messages a consumer receives (with the batch's DEDUP_KEY)."""

    def __init__(self) -> None:
        self.runtime = _Runtime()
        self.sent: list[tuple[MessageQueue, list]] = []

    async def send_inner_batch(self, topic: str, body, *, queue: MessageQueue, dedup_key: str) -> None:
        assert topic == TOPIC
        assert verify_crc(body) and parse_header(body).size == len(body)
        records = list(iter_records(body))
        assert [r.offset_delta for r in records] == list(range(len(records)))
        assert parse_header(body).records_count == len(records)
        self.sent.append((queue, [SimpleNamespace(body=r.value, properties={
            **record_properties(r.key, r.headers), PROPERTY_DEDUP_KEY: dedup_key}) for r in records]))


def send(batches: list[pa.RecordBatch]) -> RecordingProducer:
    producer = RecordingProducer()

    async def main() -> int:
        sender = PartitionSender(producer, TOPIC, "w/0/3", QUEUES)  # type: ignore[arg-type]
        for batch in batches:
            await sender.add(batch)
        return await sender.finish()
    assert asyncio.run(main()) == sum(b.num_rows for b in batches)
    return producer


def rows(n: int) -> pa.RecordBatch:
    """Rows of every kind: round robin, keyed, to a named queue; each optional column null,
    empty or set; a user property the tags column overrides."""
    out = []
    for i in range(n):
        out.append({
            "value": b"v%d" % i,
            "key": f"user{i % 7}" if i % 3 == 1 else None,
            "tags": ["T%d" % (i % 4), "", None][i % 3],
            "keys": [[f"id{i}", "x"], [], None][i % 3],
            "properties": [[("n", str(i)), ("TAGS", "mine")], None, [("z", None), ("m", "1")]][i % 3],
            "queue_id": 2 if i % 11 == 0 else None})
    return pa.RecordBatch.from_pylist(out, schema=SCHEMA)


def expected_properties(row: dict) -> dict[str, str]:
    """What a client Message of this row carries (client/message.py's wire properties)."""
    props = {k: v for k, v in (row["properties"] or []) if v is not None}
    if row["key"] is not None:
        props[PROPERTY_KEY] = row["key"]
    if row["tags"]:
        props["TAGS"] = row["tags"]
    if row["keys"]:
        props["KEYS"] = " ".join(row["keys"])
    return props


def chunks_of(producer: RecordingProducer) -> list[tuple[MessageQueue, str, list[bytes]]]:
    return [(mq, entries[0].properties[PROPERTY_DEDUP_KEY], [bytes(e.body) for e in entries])
            for mq, entries in producer.sent]


def test_entries_carry_what_a_message_of_the_row_would():
    batch = rows(3000)
    producer = send([batch])
    by_value = {bytes(e.body): (mq, e) for mq, entries in producer.sent for e in entries}
    assert len(by_value) == 3000
    ids = set()
    for row in batch.to_pylist():
        mq, entry = by_value[row["value"]]
        props = dict(entry.properties)
        ids.add(props.pop(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
        assert props.pop(PROPERTY_DEDUP_KEY).startswith(f"w/0/3/broker-a:{mq.queue_id}/")
        assert props == expected_properties(row), row
        if row["queue_id"] is not None:
            assert mq.queue_id == row["queue_id"]
        elif row["key"] is not None:
            assert mq == QUEUES[zlib.crc32(row["key"].encode()) % 4]
    assert len(ids) == 3000 and all(len(i) == 32 for i in ids)


def test_chunks_follow_the_rows_not_the_batches():
    batch = rows(5000)
    whole = sorted(chunks_of(send([batch])), key=lambda chunk: chunk[1])
    cut = sorted(chunks_of(send([batch.slice(0, 7), batch.slice(7, 1000), batch.slice(1007, 1),
                                 batch.slice(1008, 2500), batch.slice(3508)])), key=lambda chunk: chunk[1])
    assert whole == cut  # the same chunks under the same keys (sent in another order)
    keys = [key for _, key, _ in whole]
    assert len(set(keys)) == len(keys)  # one key names one chunk
    assert all(0 < len(values) <= CHUNK for _, _, values in whole)
    # only each stream's last chunk (round robin, and one per queue for keyed rows) is short
    assert sum(len(values) < CHUNK for _, _, values in whole) <= 1 + len(QUEUES)
    assert sorted(v for _, _, values in whole for v in values) == sorted(b"v%d" % i for i in range(5000))


def test_round_robin_rows_take_the_queues_in_turn_a_chunk_each():
    batch = pa.RecordBatch.from_pylist([{"value": b"r%d" % i} for i in range(CHUNK * 6 + 5)],
                                       schema=pa.schema([("value", pa.binary())]))
    sent = chunks_of(send([batch.slice(0, 1000), batch.slice(1000)]))
    assert [(mq.queue_id, key, len(v)) for mq, key, v in sent] == [
        (0, "w/0/3/broker-a:0/0", CHUNK), (1, "w/0/3/broker-a:1/0", CHUNK),
        (2, "w/0/3/broker-a:2/0", CHUNK), (3, "w/0/3/broker-a:3/0", CHUNK),
        (0, "w/0/3/broker-a:0/1", CHUNK), (1, "w/0/3/broker-a:1/1", CHUNK),
        (2, "w/0/3/broker-a:2/1", 5)]
    assert [v for _, _, values in sent for v in values] == [b"r%d" % i for i in range(CHUNK * 6 + 5)]


def test_strings_are_sent_as_utf8_and_empty_values_are_refused():
    batch = pa.RecordBatch.from_pylist([{"value": "é%d" % i} for i in range(3)],
                                       schema=pa.schema([("value", pa.string())]))
    assert [v for _, _, values in chunks_of(send([batch])) for v in values] == [
        ("é%d" % i).encode() for i in range(3)]
    for bad in ("", None):
        batch = pa.RecordBatch.from_pylist([{"value": b"a"}, {"value": bad}],
                                           schema=pa.schema([("value", pa.binary())]))
        with pytest.raises(RowError, match="non-empty value"):
            send([batch])


def test_a_queue_the_topic_lacks_is_refused():
    batch = pa.RecordBatch.from_pylist([{"value": b"a", "queue_id": 9}],
                                       schema=pa.schema([("value", pa.binary()), ("queue_id", pa.int32())]))
    with pytest.raises(ValueError, match="no queue 9"):
        send([batch])


def test_varints_are_kafkas_zigzag_varints_below_and_above_the_table():
    from rocketport.common.batch.record_batch import _read_varint
    from rocketport.pipeline.entries import varints

    values = [0, 1, 63, 64, 8191, 8192, 300_000, (1 << 28) + 5, (1 << 33) + 1]
    for chunk in (values, values[:5]):  # every value tabled, and not
        encoded = varints(np.array(chunk, np.int64)).to_pylist()
        assert [_read_varint(e, 0) for e in encoded] == [(v, len(e)) for v, e in zip(chunk, encoded)]
