"""Streaming write: topic to topic, consumed back by the native client; a micro-batch
replayed after a restart (its commit lost) leaves no duplicate."""

from __future__ import annotations

import os

import pytest

from rocketport.client import Message
from tests.pipeline.conftest import create_topic, produce
from tests.pipeline.test_write import read_back


def copy_query(spark, broker, checkpoint):
    src = (spark.readStream.format("rocketport").option("namesrv", broker.namesrv)
           .option("topic", "SparkCopyIn").option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", "1000").load())
    out = src.selectExpr("value", "tags", "concat('copied-', tags) AS key")
    q = (out.writeStream.format("rocketport").option("namesrv", broker.namesrv)
         .option("topic", "SparkCopyOut").option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    q.stop()
    return q


def test_stream_to_topic_and_a_replayed_batch(spark, broker, tmp_path):
    create_topic(broker, "SparkCopyIn", 2)
    create_topic(broker, "SparkCopyOut", 2)
    produce(broker, [Message("SparkCopyIn", b"e%d" % i, tags="t%d" % (i % 3)) for i in range(3000)])
    checkpoint = tmp_path / "ckpt"
    copy_query(spark, broker, checkpoint)
    # lose the record that the last micro-batch committed: the restart replays it
    commits = sorted(int(n) for n in os.listdir(checkpoint / "commits") if n.isdigit())
    assert len(commits) == 3  # 3 micro-batches of 1,000
    os.remove(checkpoint / "commits" / str(commits[-1]))
    os.remove(checkpoint / "commits" / f".{commits[-1]}.crc")
    produce(broker, [Message("SparkCopyIn", b"f%d" % i, tags="t0") for i in range(500)])
    dropped = broker.call(lambda: broker.server.broker.dedup.dropped)
    q = copy_query(spark, broker, checkpoint)
    assert [p["batchId"] for p in q.recentProgress if p["numInputRows"]][:1] == [commits[-1]]
    got = read_back(broker, "SparkCopyOut", 3500)
    want = [b"e%d" % i for i in range(3000)] + [b"f%d" % i for i in range(500)]
    assert sorted(m.body for m in got) == sorted(want)  # each once, the replayed batch too
    # the replay did resend its 1,000 rows (same micro-batch id, same checkpoint location:
    # the same keys), and the broker dropped them
    assert broker.call(lambda: broker.server.broker.dedup.dropped) - dropped == 1000
    m = next(m for m in got if m.body == b"e4")
    assert (m.tags, m.properties["__SHARDINGKEY"]) == ("t1", "copied-t1")


def test_a_stream_write_without_its_checkpoint_option_is_refused(spark, broker, tmp_path):
    # only the session's checkpoint root: the sink cannot know the query's checkpoint, so
    # a restart's replay would get fresh dedup keys
    create_topic(broker, "SparkNoCheckpoint", 1)
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "root"))
    try:
        with pytest.raises(Exception, match="checkpointLocation"):
            q = (spark.readStream.format("rocketport").option("namesrv", broker.namesrv)
                 .option("topic", "SparkNoCheckpoint").load().select("value")
                 .writeStream.format("rocketport").option("namesrv", broker.namesrv)
                 .option("topic", "SparkNoCheckpoint").trigger(availableNow=True).start())
            q.awaitTermination(120)
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
