"""The Spark pipeline (rocketport.pipeline) against a local broker process, in rows/s.

The broker runs in its own process (ASYNC_FLUSH, a temporary store, remoting and its name
server on free loopback ports); one local[2] SparkSession drives it. A topic of 4 queues
is loaded with `--messages` 100 B messages, 1% of them tagged `hot`, the rest `cold`.
Cases (each the best of `--passes` runs of one Spark action, planning included):

- batch_read_all: every queue read, the sum of the value lengths computed;
- batch_read_pushed_1pct: ``tags = 'hot'`` pushed into the broker (it filters, 1% leave it);
- batch_read_spark_1pct: the same predicate written so Spark cannot push it
  (``concat(tags, '') = 'hot'``): every row is read, then filtered in Spark;
  `pushed_filter_speedup` is their ratio, with the issue's floor of 10x;
- stream_read: the topic as a stream (Trigger.AvailableNow, micro-batches of
  maxOffsetsPerTrigger = messages / 4) into Spark's noop sink;
- batch_write: `--messages` rows of 100 B values written to a fresh topic.

Rows/s counts the topic's messages (the 1% cases too: the rate at which the topic is
searched). The machine is small and shared: note its load beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time

from rocketport.client import AdminClient, Message, Producer
from rocketport.core.config import BrokerConfig, ProtocolConfig
from procs import free_port as _free_port

BODY = b"x" * 100
TOPIC = "SparkBench"
FLOOR_SPEEDUP = 10.0


def _broker_main(store_dir: str, port: int, ready: mp.connection.Connection) -> None:
    from rocketport.server import BrokerServer

    async def serve() -> None:
        config = BrokerConfig(store_path_root_dir=store_dir, listen_port=port,
                              namesrv=ProtocolConfig(True, 0), kafka=ProtocolConfig(False, 0),
                              amqp=ProtocolConfig(False, 0), stomp=ProtocolConfig(False, 0))
        server = BrokerServer(config)
        await server.start()
        endpoints = {role: f"{host}:{p}" for fe in server.front_ends.values()
                     for role, host, p in fe.endpoints()}
        ready.send(endpoints["name server"])
        stop = asyncio.Event()
        asyncio.get_running_loop().add_reader(ready.fileno(), stop.set)
        await stop.wait()
        await server.stop()

    asyncio.run(serve())


async def _load(namesrv: str, count: int) -> None:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(TOPIC, queue_nums=4)
        await admin.create_topic(TOPIC + "Out", queue_nums=4)
    async with Producer(namesrv, "spark-bench") as producer:
        queues = await producer.runtime.routes.publish_queues(TOPIC)
        sends = []
        for start in range(0, count, 500):
            batch = [Message(TOPIC, BODY, tags="hot" if i % 100 == 0 else "cold")
                     for i in range(start, min(count, start + 500))]
            sends.append(producer.send_batch(batch, queue=queues[(start // 500) % len(queues)]))
            if len(sends) == 8:
                await asyncio.gather(*sends)
                sends = []
        await asyncio.gather(*sends)


def _best(action, passes: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(passes):
        t = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - t)
    return best, result


def _row(case: str, value: float, unit: str = "rows/s", **extra: object) -> None:
    print(json.dumps({"bench": "spark", "case": case, "value": round(value, 1), "unit": unit, **extra}),
          flush=True)


def run(spark, namesrv: str, count: int, passes: int, workdir: str, only: set[str]) -> None:
    from pyspark.sql import functions as F

    if "read" in only:
        _batch_reads(spark, namesrv, count, passes)
    if "stream" in only:
        _stream_read(spark, namesrv, count, passes, workdir)
    if "write" in only:
        rows = spark.range(count, numPartitions=2).select(F.lit(BODY).alias("value")).cache()
        rows.count()
        seconds, _ = _best(lambda: rows.write.format("rocketport").mode("append")
                           .option("namesrv", namesrv).option("topic", TOPIC + "Out").save(), passes)
        _row("batch_write", count / seconds, messages=count)


def _batch_reads(spark, namesrv: str, count: int, passes: int) -> None:
    from pyspark.sql import functions as F

    def source():
        return spark.read.format("rocketport").option("namesrv", namesrv).option("topic", TOPIC).load()

    seconds, total = _best(lambda: source().agg(F.sum(F.length("value"))).first()[0], passes)
    assert total == count * len(BODY), total
    _row("batch_read_all", count / seconds, messages=count)

    hot = count // 100
    pushed_s, n = _best(lambda: source().filter(F.col("tags") == "hot").count(), passes)
    assert n == hot, n
    _row("batch_read_pushed_1pct", count / pushed_s, messages=count, matches=n)
    spark_s, n = _best(lambda: source().filter(F.concat(F.col("tags"), F.lit("")) == "hot").count(), passes)
    assert n == hot, n
    _row("batch_read_spark_1pct", count / spark_s, messages=count, matches=n)
    _row("pushed_filter_speedup", spark_s / pushed_s, "x", floor=FLOOR_SPEEDUP)


def _stream_read(spark, namesrv: str, count: int, passes: int, workdir: str) -> None:
    def stream() -> int:
        ckpt = tempfile.mkdtemp(dir=workdir)
        q = (spark.readStream.format("rocketport").option("namesrv", namesrv).option("topic", TOPIC)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(count // 4))
             .load().writeStream.format("noop").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return sum(p["numInputRows"] for p in q.recentProgress)
    seconds, n = _best(stream, passes)
    assert n == count, n
    _row("stream_read", count / seconds, messages=count)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=500_000)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="100,000 messages, one pass")
    p.add_argument("--dir", help="where the store goes (default: a temporary directory)")
    p.add_argument("--only", default="read,stream,write", help="case groups: read,stream,write")
    args = p.parse_args()
    if args.quick:
        args.messages, args.passes = 100_000, 1
    workdir = tempfile.mkdtemp(prefix="spark-bench-", dir=args.dir)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    broker = ctx.Process(target=_broker_main, args=(os.path.join(workdir, "store"), _free_port(), child))
    broker.start()
    try:
        namesrv = parent.recv()
        asyncio.run(_load(namesrv, args.messages if {"read", "stream"} & set(args.only.split(",")) else 0))
        from rocketport.pipeline.session import local_session

        spark = local_session("spark-bench", **{"spark.driver.memory": "1g"})
        try:
            run(spark, namesrv, args.messages, args.passes, workdir, set(args.only.split(",")))
        finally:
            spark.stop()
    finally:
        parent.send(b"stop")
        broker.join(60)
        if broker.is_alive():
            broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
