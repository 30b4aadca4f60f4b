"""Streaming reads: 100k messages in several micro-batches, a restart from the checkpoint
that loses and repeats nothing, Trigger.AvailableNow, progress mirrored to the group."""

from __future__ import annotations

import subprocess
import sys

from rocketport.client import Message
from tests.pipeline.conftest import create_topic, produce


def stream(spark, broker, topic, **options):
    r = (spark.readStream.format("rocketport").option("namesrv", broker.namesrv)
         .option("topic", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def run_available_now(df, checkpoint, table_dir):
    """Run the query to the offsets of its start, appending parquet files (an idempotent
    file sink: Spark's own commit log says which files belong to committed batches)."""
    q = (df.select("queue_id", "offset", "value").writeStream.format("parquet")
         .option("path", str(table_dir)).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    q.stop()
    return batches


def test_100k_messages_in_micro_batches_then_a_restart(spark, broker, tmp_path):
    create_topic(broker, "SparkStream", 4)
    first = [Message("SparkStream", b"m%06d" % i) for i in range(100_000)]
    produce(broker, first, batch=1000)
    df = stream(spark, broker, "SparkStream", maxOffsetsPerTrigger="30000", group="spark-stream-job")
    batches = run_available_now(df, tmp_path / "ckpt", tmp_path / "out")
    assert [b["numInputRows"] for b in batches] == [30_000, 30_000, 30_000, 10_000]
    assert spark.read.parquet(str(tmp_path / "out")).count() == 100_000

    # stop, produce more, restart from the checkpoint: exactly the new ones are added
    more = [Message("SparkStream", b"n%06d" % i) for i in range(5_000)]
    produce(broker, more, batch=1000)
    batches = run_available_now(df, tmp_path / "ckpt", tmp_path / "out")
    assert sum(b["numInputRows"] for b in batches) == 5_000
    got = sorted(r.value for r in spark.read.parquet(str(tmp_path / "out")).select("value").collect())
    assert got == sorted(m.body for m in first + more)

    # the job's progress is the group's: committed up to the end of the last batch Spark
    # asked to commit (the first run's last batch: Spark commits one behind and skips the
    # last batch of an AvailableNow run), so the 5,000 of the second run show as lag
    lag = subprocess.run([sys.executable, "-m", "rocketport.cli", "admin", "consumerProgress",
                          "-n", broker.namesrv, "-g", "spark-stream-job", "-t", "SparkStream"],
                         capture_output=True, text=True, timeout=60)
    assert lag.returncode == 0, lag.stderr
    rows = [line.split("\t") for line in lag.stdout.splitlines() if line.startswith("SparkStream\t")]
    assert sorted((int(r[2]), int(r[4])) for r in rows) == [(q, 25_000) for q in range(4)]
    assert lag.stdout.split("diffTotal\n")[1].strip() == "5000"


def test_filters_and_new_messages_between_triggers(spark, broker, tmp_path):
    create_topic(broker, "SparkStreamTags", 2)
    produce(broker, [Message("SparkStreamTags", b"%d" % i, tags="keep" if i % 10 == 0 else "drop")
                     for i in range(1000)])
    df = stream(spark, broker, "SparkStreamTags", tags="keep")
    q = (df.select("value").writeStream.format("memory").queryName("tagged")
         .option("checkpointLocation", str(tmp_path / "c")).start())
    try:
        q.processAllAvailable()
        assert sorted(int(r.value) for r in spark.table("tagged").collect()) == list(range(0, 1000, 10))
        produce(broker, [Message("SparkStreamTags", b"%d" % i, tags="keep") for i in range(1000, 1010)])
        q.processAllAvailable()
        assert spark.table("tagged").count() == 110
    finally:
        q.stop()
