"""`register(spark)` on a session built as a user builds one: ``SparkSession.builder
.getOrCreate()``, no Rocketport setting, in a process of its own (the folder's shared
session already exists in this one)."""

from __future__ import annotations

import os
import subprocess
import sys

from rocketport.client import Message
from tests.pipeline.conftest import create_topic, produce

SCRIPT = """
import sys
from pyspark.sql import SparkSession
from rocketport.pipeline import register
spark = SparkSession.builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
register(spark)
df = spark.read.format("rocketport").option("namesrv", sys.argv[1]).option("topic", sys.argv[2]).load()
print("counts", df.count(), df.filter("tags = 'A'").count(), df.count(),
      spark.read.format("rocketport").option("namesrv", sys.argv[1]).option("topic", sys.argv[2])
      .option("tags", "A").load().count())
spark.stop()
"""


def test_reads_work_on_a_plain_session(broker):
    create_topic(broker, "SparkPlain", 2)
    produce(broker, [Message("SparkPlain", b"p%d" % i, tags="A" if i % 4 == 0 else "B") for i in range(200)])
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, broker.namesrv, "SparkPlain"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "counts 200 50 200 50" in done.stdout, done.stdout
