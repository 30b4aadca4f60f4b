"""Rows the Spark writer stores as inner batches (one CommitLog record a chunk) come back
one message per row, each with its own offset, key, tags, keys and properties: through the
Spark reader, through the native client and through confluent-kafka, each row exactly once
and in the written order per queue; a pushed tag filter finds exactly its rows."""

from __future__ import annotations

import time

import pytest

from rocketport.client import PullConsumer
from rocketport.pipeline.writer import CHUNK
from tests.pipeline.conftest import create_topic
from tests.support.aio import run

TOPIC = "SparkInner"
ROWS = 3000
SCHEMA = "value binary, key string, tags string, keys array<string>, properties map<string,string>"


def _row(i: int) -> tuple:
    return (b"v%05d" % i, f"user{i % 5}" if i % 4 else None, "hot" if i % 10 == 0 else "cold",
            [f"id{i}", "x"] if i % 3 else None, {"n": str(i), "region": "eu" if i % 2 else "us"})


@pytest.fixture(scope="module")
def written(spark, broker) -> list[tuple]:
    create_topic(broker, TOPIC, 4)
    rows = [_row(i) for i in range(ROWS)]
    # one task: the written order is the rows' order, so the order per queue can be checked
    (spark.createDataFrame(rows, SCHEMA).coalesce(1).write.format("rocketport")
     .mode("append").option("namesrv", broker.namesrv).option("topic", TOPIC).save())
    return rows


def _expected(row: tuple) -> tuple:
    value, key, tags, keys, props = row
    return value, key, tags, keys or [], props


def _check_queue_order(rows: list[tuple], seen: dict[int, list[tuple[int, bytes]]]) -> None:
    """Each queue holds offsets 0..n-1, once each, and the rows of each key (and the keyless
    rows) in the order they were written."""
    key_of = {row[0]: row[1] for row in rows}
    assert sum(len(v) for v in seen.values()) == len(rows)
    for entries in seen.values():
        assert [offset for offset, _ in entries] == list(range(len(entries)))
        per_key: dict[str | None, list[bytes]] = {}
        for _, value in entries:
            per_key.setdefault(key_of[value], []).append(value)
        for values in per_key.values():
            assert values == sorted(values)  # b"v%05d": the order they were written in


def test_the_spark_reader_reads_one_row_per_message(spark, broker, written):
    df = spark.read.format("rocketport").option("namesrv", broker.namesrv).option("topic", TOPIC).load()
    got = df.collect()
    assert len(got) == ROWS
    by_value = {r.value: r for r in got}
    assert len(by_value) == ROWS and len({r.msg_id for r in got}) == ROWS
    for row in written:
        r = by_value[row[0]]
        props = {k: v for k, v in r.properties.items() if k not in ("DEDUP_KEY", "UNIQ_KEY")}
        assert (r.value, r.key, r.tags, r.keys, props) == _expected(row)
    seen: dict[int, list] = {}
    for r in sorted(got, key=lambda r: (r.queue_id, r.offset)):
        seen.setdefault(r.queue_id, []).append((r.offset, r.value))
    _check_queue_order(written, seen)
    # a pushed tag filter: the broker's prefilter and exact check see each row's own tag
    hot = df.filter("tags = 'hot'").collect()
    assert sorted(r.value for r in hot) == sorted(row[0] for row in written if row[2] == "hot")


def test_the_native_client_reads_one_message_per_row_stored_a_chunk_a_record(broker, written):
    async def main() -> list:
        async with PullConsumer("check-inner", broker.namesrv, consume_from="first") as c:
            c.assign(await c.queues(TOPIC))
            got: list = []
            deadline = time.monotonic() + 30
            while len(got) < ROWS and time.monotonic() < deadline:
                got += await c.poll(timeout_s=0.2, max_messages=1024)
            return got + await c.poll(timeout_s=0.5)
    got = run(main())
    by_value = {m.body: m for m in got}
    assert len(got) == ROWS == len(by_value)
    for row in written:
        m = by_value[row[0]]
        props = m.properties
        assert (m.tags, m.keys, props.get("__SHARDINGKEY"), props["n"], props["region"]) == (
            row[2], row[3] or [], row[1], row[4]["n"], row[4]["region"])
    seen: dict[int, list] = {}
    for m in sorted(got, key=lambda m: (m.queue_id, m.queue_offset)):
        seen.setdefault(m.queue_id, []).append((m.queue_offset, m.body))
    _check_queue_order(written, seen)
    # a chunk of rows is one CommitLog record: its messages share the record's offset
    records = {(m.queue_id, m.commit_log_offset) for m in got}
    assert len(records) <= ROWS // CHUNK + 4 * 2  # full chunks, and each stream's short ones
    assert max(sum(1 for m in got if (m.queue_id, m.commit_log_offset) == r) for r in records) == CHUNK


def test_a_kafka_client_reads_one_record_per_row(broker, written):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check-inner-kafka",
                                         "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(4)])
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < ROWS and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append(msg)
        got += [m for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    by_value = {m.value(): m for m in got}
    assert len(got) == ROWS == len(by_value)
    for row in written:
        m = by_value[row[0]]
        headers = dict((k, v.decode()) for k, v in m.headers() or [])
        assert m.key() == (" ".join(row[3]).encode() if row[3] else None)
        assert (headers.get("__SHARDINGKEY"), headers["TAGS"], headers["n"], headers["region"]) == (
            row[1], row[2], row[4]["n"], row[4]["region"])
        assert len(headers["UNIQ_KEY"]) == 32
    seen: dict[int, list] = {}
    for m in sorted(got, key=lambda m: (m.partition(), m.offset())):
        seen.setdefault(m.partition(), []).append((m.offset(), m.value()))
    _check_queue_order(written, seen)
