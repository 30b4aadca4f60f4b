"""A Spark driver process for the exactly-once tests: a streaming query copying one topic
to another through the rocketport sink, checkpointed, run to its end (Trigger.AvailableNow).

``python -m tests.pipeline.copy_driver NAMESRV SOURCE SINK CHECKPOINT [STALL_FILE]``: with
STALL_FILE, the task that reaches queue 0's offset STALL_AT creates that file and sleeps
(a micro-batch caught in the middle, for the test to kill); without it the query runs to
its end and prints "done".
"""

from __future__ import annotations

import os
import sys
import time

STALL_AT = 1700  # queue 0's offset in the second micro-batch (1,000 offsets a queue each)
MAX_OFFSETS_PER_TRIGGER = 2000


def main(namesrv: str, source: str, sink: str, checkpoint: str, stall_file: str | None = None) -> None:
    from pyspark.sql import functions as F

    from rocketport.pipeline.session import local_session

    spark = local_session("copy-driver", **{"spark.driver.memory": "512m", "spark.ui.showConsoleProgress": "false"})

    @F.udf("binary")
    def passing(value: bytes, queue_id: int, offset: int) -> bytes:
        if stall_file and queue_id == 0 and offset == STALL_AT:
            open(stall_file, "w").close()
            time.sleep(600)  # the test kills the driver long before this ends
        return value

    src = (spark.readStream.format("rocketport").option("namesrv", namesrv).option("topic", source)
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(MAX_OFFSETS_PER_TRIGGER))
           .load())
    q = (src.select(passing("value", "queue_id", "offset").alias("value"), "tags")
         .writeStream.format("rocketport").option("namesrv", namesrv).option("topic", sink)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    main(*sys.argv[1:])
