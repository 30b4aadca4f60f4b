"""Batch and streaming writes into a topic, read back with the native client; a task that
fails after sending and runs again leaves no duplicate."""

from __future__ import annotations

import time

import pytest

from rocketport.client import PullConsumer
from tests.pipeline.conftest import create_topic
from tests.support.aio import run


def read_back(broker, topic: str, count: int, timeout_s: float = 20.0) -> list:
    """Every message of `topic` through the native PullConsumer, then 0.5 s more of nothing."""
    async def main():
        async with PullConsumer(f"check-{topic}", broker.namesrv, consume_from="first") as c:
            c.assign(await c.queues(topic))
            got: list = []
            deadline = time.monotonic() + timeout_s
            while len(got) < count and time.monotonic() < deadline:
                got += await c.poll(timeout_s=0.2, max_messages=1024)
            got += await c.poll(timeout_s=0.5)
            return got
    return run(main())


def test_batch_write_every_column(spark, broker):
    create_topic(broker, "SparkWritten", 4)
    rows = [(f"v{i}".encode(), f"user{i % 5}", "T%d" % (i % 3), [f"id{i}"], {"n": str(i)})
            for i in range(1000)]
    df = spark.createDataFrame(rows, "value binary, key string, tags string, keys array<string>, "
                                     "properties map<string,string>").repartition(3)
    (df.write.format("rocketport").mode("append").option("namesrv", broker.namesrv)
     .option("topic", "SparkWritten").save())
    got = read_back(broker, "SparkWritten", 1000)
    assert sorted(m.body for m in got) == sorted(r[0] for r in rows)
    m = next(m for m in got if m.body == b"v7")
    assert (m.tags, m.keys, m.properties["n"], m.properties["__SHARDINGKEY"]) == ("T1", ["id7"], "7", "user2")
    # one key, one queue
    queues_of_key: dict[str, set[int]] = {}
    for m in got:
        queues_of_key.setdefault(m.properties["__SHARDINGKEY"], set()).add(m.queue_id)
    assert all(len(q) == 1 for q in queues_of_key.values())


def test_write_to_a_named_queue_and_bad_input(spark, broker):
    create_topic(broker, "SparkQueued", 4)
    df = spark.createDataFrame([("a", 2), ("b", 2)], "value string, queue_id int")
    df.write.format("rocketport").mode("append").option("namesrv", broker.namesrv).option("topic", "SparkQueued").save()
    got = read_back(broker, "SparkQueued", 2)
    assert sorted((m.body, m.queue_id) for m in got) == [(b"a", 2), (b"b", 2)]
    with pytest.raises(Exception, match="value"):
        (spark.createDataFrame([("x",)], "body string").write.format("rocketport").mode("append")
         .option("namesrv", broker.namesrv).option("topic", "SparkQueued").save())
    with pytest.raises(Exception, match="overwritten"):
        (df.write.format("rocketport").mode("overwrite").option("namesrv", broker.namesrv)
         .option("topic", "SparkQueued").save())


def test_a_retried_task_writes_no_duplicate(spark, broker):
    """Each task's first attempt fails in the writer at its 9,000th of 10,000 rows (an empty
    value, which the writer refuses), after most chunks of 512 rows filled by then were
    sent (8 stay in flight); Spark runs the task again (the session allows 2 attempts), the value is right
    this time, and the broker drops the resent chunks."""
    from pyspark.sql.functions import col, udf

    @udf("binary")
    def empty_on_first_attempt(n):
        from pyspark import TaskContext
        if TaskContext.get().attemptNumber() == 0 and n % 10_000 == 9000:
            return b""
        return b"row-%d" % n

    create_topic(broker, "SparkRetried", 4)
    df = spark.range(0, 20_000, numPartitions=2).select(empty_on_first_attempt(col("id")).alias("value"))
    (df.write.format("rocketport").mode("append").option("namesrv", broker.namesrv)
     .option("topic", "SparkRetried").save())
    dropped = broker.call(lambda: broker.server.broker.dedup.dropped)
    got = read_back(broker, "SparkRetried", 20_000)
    assert len(got) == 20_000 and sorted(m.body for m in got) == sorted(b"row-%d" % n for n in range(20_000))
    assert dropped >= 2 * 512  # chunks each first attempt had sent: resent, and dropped
