"""A driver process on a standalone cluster for test_cluster.py: reads a topic through the
`rocketport` source and prints, as JSON, what ran where and what was read.

``python -m tests.pipeline.cluster_driver MASTER_URL NAMESRV TOPIC``
"""

from __future__ import annotations

import json
import os
import sys


def main(master: str, namesrv: str, topic: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from rocketport.pipeline import register
    from rocketport.pipeline.cluster import EXECUTOR_CONF, wait_for_executors

    builder = (SparkSession.builder.master(master).appName("rocketport-cluster-test")
               .config("spark.driver.memory", "512m").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in EXECUTOR_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    executors = wait_for_executors(spark, 2)

    where = F.udf(lambda: os.getcwd(), "string")  # an executor's directory in its worker's work dir
    df = spark.read.format("rocketport").option("namesrv", namesrv).option("topic", topic).load()
    placed = df.select("queue_id", where().alias("dir")).distinct().collect()
    hot = spark.read.format("rocketport").option("namesrv", namesrv).option("topic", topic).option("tags", "A").load()
    print(json.dumps({
        "executors": executors,
        "partitions": df.rdd.getNumPartitions(),
        "placed": sorted([r.queue_id, r.dir] for r in placed),
        "values": sorted(r.value.decode() for r in df.select("value").collect()),
        "tagged": sorted(r.value.decode() for r in hot.collect()),
        "count_after_filter": [df.filter("tags = 'A'").count(), df.count()],
    }), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
