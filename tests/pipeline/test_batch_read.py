"""Batch reads through the `rocketport` source: partitions per queue, schema, options,
and the broker-side filters the `tags` and `sql` options send with every pull."""

from __future__ import annotations

import datetime

import pytest

from rocketport.client import Message
from tests.pipeline.conftest import create_topic, produce


def reader(spark, broker, topic, **options):
    r = spark.read.format("rocketport").option("namesrv", broker.namesrv).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


@pytest.fixture(scope="module")
def orders(broker):
    """400 messages on 4 queues: tag A for every 100th, B otherwise; a region property."""
    create_topic(broker, "SparkOrders", 4)
    msgs = [Message("SparkOrders", b"order-%d" % i, tags="A" if i % 100 == 0 else "B",
                    keys=[f"k{i}", "x"], properties={"region": "eu" if i % 2 else "us", "n": str(i)})
            for i in range(400)]
    produce(broker, msgs)
    return msgs


def test_reads_every_queue_with_the_schema(spark, broker, orders):
    df = reader(spark, broker, "SparkOrders")
    assert df.rdd.getNumPartitions() == 4  # one per queue
    rows = df.collect()
    assert sorted(r.value for r in rows) == sorted(m.body for m in orders)
    by_value = {r.value: r for r in rows}
    r = by_value[b"order-200"]
    assert (r.topic, r.tags, r.keys, r.properties["region"], r.properties["n"]) == (
        "SparkOrders", "A", ["k200", "x"], "us", "200")
    assert "TAGS" not in r.properties and r.msg_id == r.properties["UNIQ_KEY"]
    assert isinstance(r.store_timestamp, datetime.datetime) and r.reconsume_times == 0
    # offsets are each queue's 0..99
    per_queue = {}
    for row in rows:
        per_queue.setdefault(row.queue_id, []).append(row.offset)
    assert {q: sorted(o) for q, o in per_queue.items()} == {q: list(range(100)) for q in range(4)}


def test_large_ranges_split_into_several_partitions(spark, broker, orders):
    df = reader(spark, broker, "SparkOrders", maxOffsetsPerPartition="30")
    assert df.rdd.getNumPartitions() == 4 * 4  # 0-30, 30-60, 60-90, 90-100 per queue
    assert df.count() == 400


def test_filtered_ranges_split_by_the_rows_they_hold(spark, broker, orders):
    # tag A: the four matches are all in one queue; ranges of 100 offsets are sampled
    # (longer than 30): the queue with the matches gets one partition, the others none
    df = reader(spark, broker, "SparkOrders", maxOffsetsPerPartition="30", tags="A")
    assert df.rdd.getNumPartitions() == 1
    assert sorted(r.value for r in df.collect()) == [b"order-%d" % i for i in range(0, 400, 100)]
    # tag B matches 96-100 of each queue's 100: cut in four per queue, as unfiltered ranges
    df = reader(spark, broker, "SparkOrders", maxOffsetsPerPartition="30", tags="B")
    assert df.rdd.getNumPartitions() == 16
    assert df.count() == 396
    # SQL92 from the options is sampled the same way
    df = reader(spark, broker, "SparkOrders", maxOffsetsPerPartition="30", sql="n = '7'")
    assert df.rdd.getNumPartitions() == 1 and [r.value for r in df.collect()] == [b"order-7"]


def test_filtered_ranges_expected_to_return_few_rows_share_a_task(spark, broker, orders):
    # tag A over four queues of 100 offsets (at most 100 rows each, far under a partition's
    # 200,000): one partition reads the four ranges together, every match once
    df = reader(spark, broker, "SparkOrders", tags="A")
    assert df.rdd.getNumPartitions() == 1
    assert sorted(r.value for r in df.collect()) == [b"order-%d" % i for i in range(0, 400, 100)]
    # up to 250 rows a partition: two queues' 100 offsets each
    df = reader(spark, broker, "SparkOrders", tags="B", maxOffsetsPerPartition="250")
    assert df.rdd.getNumPartitions() == 2
    rows = df.select("queue_id", "offset").collect()
    assert len(rows) == len({(r.queue_id, r.offset) for r in rows}) == 396


def test_offsets_options(spark, broker, orders):
    starting = '{"SparkOrders": {"0": 90, "1": 95}}'
    ending = '{"SparkOrders": {"0": 95, "2": 10}}'
    df = reader(spark, broker, "SparkOrders", startingOffsets=starting, endingOffsets=ending)
    got = sorted((r.queue_id, r.offset) for r in df.select("queue_id", "offset").collect())
    # queue 0: 90..94; queue 1: 95..99 (ends latest); queue 2: 0..9 (starts earliest);
    # queue 3, named by neither: 0..99
    want = ([(0, o) for o in range(90, 95)] + [(1, o) for o in range(95, 100)]
            + [(2, o) for o in range(10)] + [(3, o) for o in range(100)])
    assert got == want
    # a timestamp after every message: nothing; latest..latest: nothing
    later = str(int(datetime.datetime.now().timestamp() * 1000) + 60_000)
    assert reader(spark, broker, "SparkOrders", startingOffsets=later).count() == 0
    assert reader(spark, broker, "SparkOrders", startingOffsets="latest").count() == 0


def test_bad_options_are_named(spark, broker, orders):
    with pytest.raises(Exception, match="startingOffsets"):
        reader(spark, broker, "SparkOrders", startingOffsets="yesterday").collect()
    with pytest.raises(Exception, match="namesrv"):
        spark.read.format("rocketport").option("topic", "SparkOrders").load().collect()


def got_from_store(broker, action):
    """How many messages the broker's store handed out while `action` ran, and its result."""
    before = broker.call(broker.server.broker.stats).get_messages
    result = action()
    return broker.call(broker.server.broker.stats).get_messages - before, result


def test_tag_filter_runs_in_the_broker(spark, broker, orders):
    df = reader(spark, broker, "SparkOrders", tags="A")
    handed_out, rows = got_from_store(broker, df.collect)
    assert sorted(r.value for r in rows) == [b"order-%d" % i for i in range(0, 400, 100)]
    assert handed_out == 4  # the broker filtered: only the matches left the store
    df = reader(spark, broker, "SparkOrders", tags="A || C")
    handed_out, n = got_from_store(broker, df.count)
    assert (n, handed_out) == (4, 4)


def test_sql_option_runs_in_the_broker(spark, broker, orders):
    from pyspark.sql.functions import col

    df = reader(spark, broker, "SparkOrders", sql="region = 'us' AND n > 150 AND TAGS = 'B'")
    handed_out, rows = got_from_store(broker, df.collect)
    want = sorted(b"order-%d" % i for i in range(151, 400) if i % 2 == 0 and i % 100)
    assert sorted(r.value for r in rows) == want and handed_out == len(want)
    # Spark's own predicates (a body prefix, a property) hold on what the broker returned
    df = reader(spark, broker, "SparkOrders", tags="B").filter(
        col("value").cast("string").startswith("order-39") & (col("properties")["region"] == "eu"))
    assert sorted(r.value for r in df.collect()) == [b"order-%d" % i for i in (39, 391, 393, 395, 397, 399)]


def test_filtered_pulls_sent_together_read_each_match_once(spark, broker, monkeypatch):
    """A filtered range longer than the broker's scan of one get (here 16,000 entries) is
    read with several pulls in flight, each guessed to start where the one before ends:
    sparse matches (the guess holds), then dense ones (a pull finds its count early, the
    guess fails); every match comes back once, in the sparse part and the dense one alike."""
    from rocketport.core.store import reader as store_reader

    # the live broker runs in this process: a short scan keeps the topic small
    monkeypatch.setattr(store_reader, "MAX_PREFILTERED_SCAN_PER_GET", 16_000)
    create_topic(broker, "SparkScan", 1)
    tags = ["A" if i % 5000 == 0 or (i >= 40_000 and i % 2 == 0) else "B" for i in range(50_000)]
    produce(broker, [Message("SparkScan", b"%d" % i, tags=t) for i, t in enumerate(tags)], batch=1000)
    rows = reader(spark, broker, "SparkScan", tags="A").select("offset", "value").collect()
    offsets = sorted(r.offset for r in rows)
    assert offsets == [i for i, t in enumerate(tags) if t == "A"]
    assert all(r.value == b"%d" % r.offset for r in rows)
