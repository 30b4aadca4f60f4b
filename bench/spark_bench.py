"""The Spark pipeline (rocketport.pipeline) against a local broker process, in rows/s.

The broker runs in its own process (ASYNC_FLUSH, a temporary store, remoting and its name
server on free loopback ports); one local[2] SparkSession drives it (two Python workers,
one task each at a time), or with `--cluster` a session on a standalone cluster of a
master and two one-core workers started on loopback (`rocketport.pipeline.cluster`). A topic of 4 queues is loaded with `--messages` 100 B messages
(2,000,000 by default, sent as batches of 1,000 with 16 in flight), 1% of them tagged
`hot`, the rest `cold`. Cases:

- session_start: building the SparkSession (the JVM's start), seconds;
- first_query: the session's first query (a broker-filtered count), seconds: the Python
  workers' start and first import of the pipeline, the JVM's warm-up;
- pull_ceiling: this process pulling every queue's range as a Spark task would (four
  pulls in flight) without decoding anything: what one worker can at most read from this
  broker, rows/s;
- worker_read: this process reading every queue's range through the pipeline's own read
  (`plan.read_range`: pulls and RecordBatches) without Spark: one worker's rate, with the
  issue's floor of 1,000,000 rows/s of 100 B per worker and `pull_ceiling` beside it;
- batch_read_all: Spark reading every queue (the rows counted and the sum of the value
  lengths computed), rows/s and `per_worker` (over its 2 workers), with the same floor,
  beside its two ceilings: `pull_ceiling` (above) and `spark_ceiling_marginal_per_worker`
  (the spark_ceiling row's marginal rate per worker, printed just before it);
  the same query over the first quarter of each queue (`endingOffsets`) gives the
  marginal rate per worker (`marginal_per_worker`: the query's fixed cost, `fixed_s`,
  taken out; at 1,000,000 rows that cost is a large share of the time) and the CPU per
  row of Spark (`spark_cpu_us_per_row`: this process and its descendants, the JVM and its
  Python workers) and of the broker (`broker_cpu_us_per_row`), between the two sizes: on
  a loaded machine rows/s move with the load, CPU per row much less; an untimed read of
  the quarter goes first (the session's first full read costs the JVM and the Python
  workers several times a later one: its figures would be the warm-up's);
- spark_ceiling: the same query over a Python source of the same schema that yields one
  RecordBatch of 8,192 rows read from the topic again and again (as many rows, no broker
  after that first read): what Spark's Python data source path itself takes, with the
  same fields;
- query_fixed_cost: the broker-filtered query below against an empty topic of 4 queues:
  what every query pays whatever it reads (Spark's job, planning, route and offset
  lookups), in seconds, beside `spark_fixed_cost`: the same count over the ceiling's
  Python source planning two partitions that yield nothing and touch no broker (Spark's
  own share);
- batch_read_pushed_1pct: the `tags` option ``hot``: the broker filters, 1% leave it;
- batch_read_spark_1pct: the same predicate in Spark (``tags = 'hot'``): every row is
  read, then filtered in Spark;
  `pushed_filter_speedup` is their ratio, with the issue's floor of 10x, and carries both
  timings and the fixed cost;
- stream_read: the topic's last `--stream-messages` as a stream (Trigger.AvailableNow,
  4 micro-batches by maxOffsetsPerTrigger) into Spark's noop sink;
- write_ceiling: `--write-messages` rows of 100 B values written by Spark (2 tasks) to a
  Python sink that only counts them (no broker): what Spark's Python write path itself
  takes, rows/s and `per_worker`;
- batch_write: the same rows written to a topic by 2 tasks (each chunk of 512 rows one
  record batch the broker stores whole), rows/s and `per_worker`, with the issue's floor of
  300,000 rows/s per worker and the broker's CPU per row (as worker_write's), best of
  `--passes`, after one untimed write of a row a task (`first_write_s`: the workers
  import the pipeline); `fixed_s` is such a one-row-a-task write timed (best of
  `--passes`: Spark's job, the writer's producer start and route lookup), and
  `marginal_per_worker` the rate with it taken out;
- worker_write: this process writing as many rows through the pipeline's own write
  (`writer.send_partition`, batches of 10,000 rows) without Spark: one worker's rate, with
  the same floor (the broker storing them is usually what bounds it), and the broker's CPU
  per row (`broker_cpu_us_per_row`: from the write's start until the broker idles again,
  its index builder's catch-up included). With `--baseline REV` also against two broker
  processes of their own, one running this tree's code and one commit REV's, passes
  taking turns (rows `worker_write` with `"code"`): the broker's cost before and after a
  change, measured side by side.

The broker-filtered query's cost grows with the 1% it moves, the Spark-side one's with the
whole topic, so on a small topic both are the fixed cost and the ratio says little: the
topic is large by default. The cases that read every message and batch_write take seconds
to tens of seconds each, so they run once (`--long-passes`); the other cases run
`--passes` times. Rows/s counts the topic's messages (the 1% cases too: the rate at which
the topic is searched). The machine is small and shared: note its load beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rocketport.client import AdminClient, Message, Producer
from procs import cpu_seconds, free_port as _free_port, remoting_broker_main, tree_cpu_seconds, wait_for_port

BODY = b"x" * 100
TOPIC = "SparkBench"
FLOOR_SPEEDUP = 10.0
FLOOR_READ_PER_WORKER = 1_000_000
FLOOR_WRITE_PER_WORKER = 300_000
WORKERS = 2  # local[2], or two one-core workers
LOAD_BATCH = 1000  # messages per batch send while loading
LOAD_IN_FLIGHT = 16


async def _create_topics(namesrv: str) -> None:
    async with AdminClient(namesrv) as admin:
        for topic in (TOPIC, TOPIC + "Out", TOPIC + "Empty"):
            await admin.create_topic(topic, queue_nums=4)


async def _load(namesrv: str, count: int) -> float:
    """Load the topic; returns the messages per second it took."""
    await _create_topics(namesrv)
    started = time.perf_counter()
    async with Producer(namesrv, "spark-bench") as producer:
        queues = await producer.runtime.routes.publish_queues(TOPIC)
        window = asyncio.Semaphore(LOAD_IN_FLIGHT)

        async def send(start: int) -> None:
            try:
                batch = [Message(TOPIC, BODY, tags="hot" if i % 100 == 0 else "cold")
                         for i in range(start, min(count, start + LOAD_BATCH))]
                await producer.send_batch(batch, queue=queues[(start // LOAD_BATCH) % len(queues)])
            finally:
                window.release()

        sends = []
        for start in range(0, count, LOAD_BATCH):
            await window.acquire()
            sends.append(asyncio.create_task(send(start)))
        await asyncio.gather(*sends)
    return count / (time.perf_counter() - started)


def _best(action, passes: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(passes):
        t = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - t)
    return best, result


def _row(case: str, value: float, unit: str = "rows/s", floor: float | None = None, **extra: object) -> None:
    print(json.dumps({"bench": "spark", "case": case, "value": round(value, 1), "unit": unit,
                      "floor": floor, **extra}), flush=True)


def run(spark, namesrv: str, args: argparse.Namespace, workdir: str, only: set[str], broker_pid: int) -> None:
    from pyspark.sql import functions as F

    if "read" in only:
        _batch_reads(spark, namesrv, args.messages, args.passes, args.long_passes, broker_pid)
    if "stream" in only:
        _stream_read(spark, namesrv, args.messages, args.stream_messages, args.long_passes, workdir)
    if "write" in only:
        # the ceiling first: the broker indexes what a write stored for a while after it,
        # which would slow Spark's own path beside it
        count = args.write_messages
        rows = spark.range(count, numPartitions=2).select(F.lit(BODY).alias("value")).cache()
        rows.count()
        spark.dataSource.register(_CountSink)

        def count_all() -> None:
            rows.write.format("rocketport-bench-count").mode("append").save()
        count_all()  # untimed: the session's first Python write starts its workers
        seconds, _ = _best(count_all, args.long_passes)
        _row("write_ceiling", count / seconds, messages=count, seconds=round(seconds, 2),
             per_worker=round(count / seconds / WORKERS), floor=FLOOR_WRITE_PER_WORKER)
        tiny = spark.range(WORKERS, numPartitions=WORKERS).select(F.lit(BODY).alias("value")).cache()
        tiny.count()

        def write(df) -> None:
            df.write.format("rocketport").mode("append").option("namesrv", namesrv).option("topic", TOPIC + "Out").save()
        started = time.perf_counter()
        write(tiny)  # the session's first rocketport write: its workers import the pipeline
        first_s = time.perf_counter() - started
        best = None
        for _ in range(args.passes):  # a few seconds each
            run = _with_broker_cpu(broker_pid, lambda: write(rows))
            best = run if best is None or run[0] < best[0] else best
        seconds, _, cpu = best
        fixed_s, _ = _best(lambda: write(tiny), args.passes)  # a write of one row a task
        _row("batch_write", count / seconds, messages=count, seconds=round(seconds, 2),
             per_worker=round(count / seconds / WORKERS), floor=FLOOR_WRITE_PER_WORKER,
             marginal_per_worker=round(count / (seconds - fixed_s) / WORKERS) if seconds > fixed_s else None,
             fixed_s=round(fixed_s, 2), first_write_s=round(first_s, 2),
             broker_cpu_us_per_row=round(cpu * 1e6 / count, 2))
        _worker_write(namesrv, count, args.long_passes, broker_pid)
        if args.baseline:
            _baseline_writes(args.baseline, count, args.long_passes, workdir)


def _worker_write(namesrv: str, count: int, passes: int, broker_pid: int, code: str | None = None) -> None:
    """worker_write: this process sending `count` rows of 100 B values through the
    pipeline's own write (`writer.send_partition`, RecordBatches of 10,000 rows as Spark
    hands them to a task) without Spark: one worker's rate, and the broker's CPU per row."""
    import pyarrow as pa

    from rocketport.pipeline.options import WriteOptions
    from rocketport.pipeline.writer import send_partition

    batch = pa.record_batch([pa.array([BODY] * 10_000, pa.binary())], names=["value"])
    batches = [batch.slice(0, min(10_000, count - at)) for at in range(0, count, 10_000)]
    opts = WriteOptions(namesrv, TOPIC + "Out", "spark-bench")
    best, cpu = float("inf"), float("inf")
    for _ in range(passes):
        seconds, n, used = _with_broker_cpu(
            broker_pid, lambda: send_partition(opts, f"bench-{time.time_ns()}/0/0", iter(batches)))
        assert n == count, n
        best, cpu = min(best, seconds), min(cpu, used)
    _row("worker_write", count / best, messages=count, seconds=round(best, 2),
         floor=FLOOR_WRITE_PER_WORKER, broker_cpu_us_per_row=round(cpu * 1e6 / count, 2),
         **({"code": code} if code else {}))


def _with_broker_cpu(pid: int, action) -> tuple[float, object, float]:
    """(seconds, result) of ``action()``, and the CPU seconds broker ``pid`` spent from its
    start until the broker idles after it (0.5 s with under 10 ms of CPU, at most 30 s):
    what the rows cost it, its index builder's catch-up included."""
    before = cpu_seconds(pid)
    started = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - started
    last = cpu_seconds(pid)
    for _ in range(60):
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last < 0.01:
            break
        last = now
    return seconds, result, last - before


def _baseline_writes(rev: str, count: int, passes: int, workdir: str) -> None:
    """worker_write against a broker process running this tree's code and one running
    commit ``rev``'s, a pass on each in turn (see the module docstring)."""
    from kafka_bench import baseline_env

    brokers = {}
    try:
        for code, env in (("current", None), ("baseline", baseline_env(rev, os.path.join(workdir, "baseline")))):
            root, port, ns_port = os.path.join(workdir, code), _free_port(), _free_port()
            proc = subprocess.Popen(
                [sys.executable, "-m", "rocketport", "broker", "--set", f"storePathRootDir={root}",
                 "--set", f"listenPort={port}", "--set", f"namesrv.port={ns_port}",
                 *[a for key in ("kafka", "amqp", "stomp", "http") for a in ("--set", f"{key}.enabled=false")]],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                cwd=workdir)  # not the repository: `-m` would import its rocketport/ first
            brokers[code] = (proc, f"127.0.0.1:{ns_port}")
            wait_for_port(port, proc)
            asyncio.run(_create_topics(brokers[code][1]))
        for _ in range(passes):
            for code, (proc, namesrv) in brokers.items():
                _worker_write(namesrv, count, 1, proc.pid, code)
    finally:
        for proc, _ in brokers.values():
            proc.terminate()
            proc.wait(60)


def _count_sink():
    """A Python data source whose writer only counts the RecordBatches' rows: what Spark's
    Python write path itself takes (defined here so Spark pickles it by value)."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    @dataclass
    class Counted(WriterCommitMessage):
        rows: int

    class Writer(DataSourceArrowWriter):
        def write(self, iterator) -> Counted:
            return Counted(sum(batch.num_rows for batch in iterator))

    class Sink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketport-bench-count"

        def writer(self, schema, overwrite: bool) -> Writer:
            return Writer()

    return Sink


_CountSink = _count_sink()


def _batch_reads(spark, namesrv: str, count: int, passes: int, long_passes: int, broker_pid: int) -> None:
    from pyspark.sql import functions as F

    from rocketport.pipeline.remote import Link

    def source(topic: str = TOPIC, **options: str):
        return (spark.read.format("rocketport").option("namesrv", namesrv).option("topic", topic)
                .options(**options).load())

    seconds, n = _best(lambda: source(tags="hot").count(), 1)
    assert n == count // 100, n
    _row("first_query", seconds, "s")
    ceiling = _worker_rates(namesrv, count, long_passes)
    with Link(namesrv) as link:  # a quarter of each queue: the marginal rate's second size
        mqs = link.queues(TOPIC)
        quarter = {str(mq.queue_id): end // 4 for mq, end in zip(mqs, link.max_offsets(mqs))}
    part = sum(quarter.values())

    def read_all(df) -> int:  # rows, having checked their bytes (Spark reads every value)
        rows, size = df.agg(F.count("value"), F.sum(F.length("value"))).first()
        assert size == rows * len(BODY), (rows, size)
        return rows
    # one untimed read first: the session's first reads of every row (the JVM compiling its
    # Arrow-to-row path for this schema, the Python workers' first decode) cost several
    # times what later ones do, and the ceiling below runs warm after it
    read_all(source(endingOffsets=json.dumps({TOPIC: quarter})))
    whole = _read_costs(lambda: read_all(source()), long_passes, broker_pid)
    some = _read_costs(lambda: read_all(source(endingOffsets=json.dumps({TOPIC: quarter}))), long_passes, broker_pid)
    assert (whole[1], some[1]) == (count, part), (whole[1], some[1])
    spark.dataSource.register(_RepeatSource)

    def repeated(rows: int):
        return spark.read.format("rocketport-bench-repeat").option("namesrv", namesrv).option("rows", str(rows)).load()
    ceiling_whole = _read_costs(lambda: read_all(repeated(count)), long_passes, broker_pid)
    ceiling_some = _read_costs(lambda: read_all(repeated(count // 4)), long_passes, broker_pid)
    spark_ceiling = _read_row("spark_ceiling", ceiling_whole[1], ceiling_whole, ceiling_some[1], ceiling_some)
    # the full read beside both of its bounds: what this process pulls raw (nothing decoded)
    # and what Spark's Python source path takes for the same rows with no broker behind it
    _read_row("batch_read_all", count, whole, part, some, pull_ceiling=ceiling,
              spark_ceiling_marginal_per_worker=spark_ceiling)

    # the pushed query and the same against an empty topic take turns, so both see the
    # same minutes of the machine (and the same warmth of the JVM)
    hot = count // 100
    nothing = spark.read.format("rocketport-bench-repeat").option("namesrv", namesrv).option("rows", "0").load()
    pushed_s = fixed_s = spark_fixed_s = float("inf")
    for _ in range(passes):
        seconds, n = _best(lambda: source(tags="hot").count(), 1)
        assert n == hot, n
        pushed_s = min(pushed_s, seconds)
        seconds, n = _best(lambda: source(TOPIC + "Empty", tags="hot").count(), 1)
        assert n == 0, n
        fixed_s = min(fixed_s, seconds)
        seconds, n = _best(nothing.count, 1)
        assert n == 0, n
        spark_fixed_s = min(spark_fixed_s, seconds)
    _row("query_fixed_cost", fixed_s, "s", spark_fixed_cost=round(spark_fixed_s, 3))
    _row("batch_read_pushed_1pct", count / pushed_s, messages=count, matches=hot, seconds=round(pushed_s, 2))
    spark_s, n = _best(lambda: source().filter(F.col("tags") == "hot").count(),
                       long_passes)
    assert n == hot, n
    _row("batch_read_spark_1pct", count / spark_s, messages=count, matches=n, seconds=round(spark_s, 2))
    _row("pushed_filter_speedup", spark_s / pushed_s, "x", floor=FLOOR_SPEEDUP, messages=count,
         pushed_s=round(pushed_s, 2), spark_s=round(spark_s, 2), fixed_s=round(fixed_s, 2))


def _read_costs(action, passes: int, broker_pid: int) -> tuple[float, object, float, float]:
    """(seconds, result, Spark's CPU seconds, the broker's) of the best of ``passes`` runs of
    a query: Spark's CPU is this process's and its descendants' (the JVM, its Python workers)
    but the broker process's."""
    best = None
    for _ in range(passes):
        spark_cpu, broker_cpu = tree_cpu_seconds(os.getpid(), broker_pid), cpu_seconds(broker_pid)
        seconds, result = _best(action, 1)
        spark_cpu = tree_cpu_seconds(os.getpid(), broker_pid) - spark_cpu
        run = (seconds, result, spark_cpu, cpu_seconds(broker_pid) - broker_cpu)
        best = run if best is None or run[0] < best[0] else best
    return best


def _read_row(case: str, rows: int, whole: tuple, part_rows: int, part: tuple, **extra: object) -> int | None:
    """A full read's row: rows/s and per worker over the whole query, and from the same query
    over ``part_rows`` of the rows the marginal rate per worker (the query's fixed cost,
    `fixed_s`, taken out) and the CPU per row of Spark (the JVM and its Python workers) and
    of the broker: what a worker reads per CPU second of its own, whatever else loads the
    machine."""
    (seconds, _, spark_cpu, broker_cpu), (part_s, _, part_spark, part_broker) = whole, part
    more = rows - part_rows
    marginal = more / (seconds - part_s) if seconds > part_s else float("nan")
    _row(case, rows / seconds, messages=rows, seconds=round(seconds, 2),
         per_worker=round(rows / seconds / WORKERS), floor=FLOOR_READ_PER_WORKER,
         marginal_per_worker=round(marginal / WORKERS) if marginal == marginal else None,
         fixed_s=round(part_s - part_rows / marginal, 2) if marginal == marginal else None,
         part_rows=part_rows, part_seconds=round(part_s, 2),
         spark_cpu_us_per_row=round((spark_cpu - part_spark) * 1e6 / more, 3),
         broker_cpu_us_per_row=round((broker_cpu - part_broker) * 1e6 / more, 3), **extra)
    return round(marginal / WORKERS) if marginal == marginal else None


def _repeat_source():
    """A Python data source of the rocketport schema yielding one RecordBatch of the topic's
    first messages again and again, `rows` in all over WORKERS partitions (defined here so
    Spark pickles it by value: workers need not import the bench)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Share(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class Reader(DataSourceReader):
        def __init__(self, namesrv: str, rows: int) -> None:
            self.namesrv, self.rows = namesrv, rows

        def partitions(self) -> list:
            return [Share(self.rows // WORKERS)] * WORKERS

        def read(self, partition: Share):
            if not partition.rows:  # spark_fixed_cost: a query of nothing
                return
            from rocketport.pipeline.plan import QueueRange, read_range
            from rocketport.pipeline.remote import Link

            with Link(self.namesrv) as link:
                mq = link.queues(TOPIC)[0]
                r = QueueRange(TOPIC, mq.broker_name, link.broker_addr(mq), mq.queue_id, 0, 8192, None, None)
            batch = next(read_range(r, "spark-bench", self.namesrv))
            for _ in range(partition.rows // batch.num_rows):
                yield batch

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketport-bench-repeat"

        def schema(self) -> str:
            from rocketport.pipeline.schema import DDL
            return DDL

        def reader(self, schema) -> Reader:
            return Reader(self.options["namesrv"], int(self.options["rows"]))

    return Source


_RepeatSource = _repeat_source()


def _worker_rates(namesrv: str, count: int, passes: int) -> int:
    """pull_ceiling and worker_read rows, measured in this process; returns the ceiling."""
    from rocketport.pipeline.plan import PULLS_IN_FLIGHT, QueueRange, read_range
    from rocketport.pipeline.remote import MAX_PULL, Link, subscription

    with Link(namesrv) as link:
        mqs = link.queues(TOPIC)
        ranges = [QueueRange(TOPIC, mq.broker_name, link.broker_addr(mq), mq.queue_id, 0, end, None, None)
                  for mq, end in zip(mqs, link.max_offsets(mqs))]
        sub = subscription(TOPIC, None, None)

        def pull_all() -> int:
            pulled = 0
            for r in ranges:
                offset = r.start
                while offset < r.end:
                    requests = [(o, MAX_PULL) for o in range(offset, min(r.end, offset + PULLS_IN_FLIGHT * MAX_PULL), MAX_PULL)]
                    answers = link.answers(link.send_pulls(r.addr, r.mq, requests, sub))
                    pulled += sum(len(body) for _, _, body in answers)
                    offset = answers[-1][1]
            return pulled
        seconds, _ = _best(pull_all, passes)
    ceiling = round(count / seconds)
    _row("pull_ceiling", ceiling, messages=count, seconds=round(seconds, 2))
    seconds, n = _best(lambda: sum(b.num_rows for r in ranges for b in read_range(r, "spark-bench", namesrv)), passes)
    assert n == count, n
    _row("worker_read", count / seconds, messages=count, seconds=round(seconds, 2),
         floor=FLOOR_READ_PER_WORKER, pull_ceiling=ceiling)
    return ceiling


def _stream_read(spark, namesrv: str, count: int, stream_count: int, passes: int, workdir: str) -> None:
    """The topic's last `stream_count` messages (the loader spreads them evenly over the 4
    queues) as a stream of 4 micro-batches."""
    stream_count = min(stream_count, count)
    start = json.dumps({TOPIC: {str(q): (count - stream_count) // 4 for q in range(4)}})

    def stream() -> int:
        ckpt = tempfile.mkdtemp(dir=workdir)
        q = (spark.readStream.format("rocketport").option("namesrv", namesrv).option("topic", TOPIC)
             .option("startingOffsets", start).option("maxOffsetsPerTrigger", str(stream_count // 4))
             .load().writeStream.format("noop").option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return sum(p["numInputRows"] for p in q.recentProgress)
    seconds, n = _best(stream, passes)
    assert n == stream_count, n
    _row("stream_read", stream_count / seconds, messages=stream_count, seconds=round(seconds, 2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=2_000_000, help="the read topic's messages")
    p.add_argument("--stream-messages", type=int, default=500_000,
                   help="the stream case reads the topic's last N messages")
    p.add_argument("--write-messages", type=int, default=300_000, help="rows of the write case")
    p.add_argument("--passes", type=int, default=3, help="passes of the short cases")
    p.add_argument("--long-passes", type=int, default=1,
                   help="passes of the cases that read every message (tens of seconds each)")
    p.add_argument("--quick", action="store_true", help="100,000 messages, one pass each")
    p.add_argument("--dir", help="where the store goes (default: a temporary directory)")
    p.add_argument("--only", default="read,stream,write", help="case groups: read,stream,write")
    p.add_argument("--baseline", help="a commit whose broker code worker_write runs against too")
    p.add_argument("--cluster", action="store_true",
                   help="run Spark on a standalone cluster of two one-core workers started on loopback")
    args = p.parse_args()
    if args.quick:
        args.messages = args.stream_messages = args.write_messages = 100_000
        args.passes = args.long_passes = 1
    workdir = tempfile.mkdtemp(prefix="spark-bench-", dir=args.dir)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    broker = ctx.Process(target=remoting_broker_main,
                         args=(os.path.join(workdir, "store"), _free_port(), child, False))
    broker.start()
    try:
        namesrv = parent.recv()
        loaded = args.messages if {"read", "stream"} & set(args.only.split(",")) else 0
        rate = asyncio.run(_load(namesrv, loaded))
        if loaded:
            _row("load", rate, "msg/s", messages=loaded, batch=LOAD_BATCH, in_flight=LOAD_IN_FLIGHT)
        from rocketport.pipeline.cluster import EXECUTOR_CONF, start_cluster, wait_for_executors
        from rocketport.pipeline.session import local_session

        conf = {"spark.driver.memory": "1g", "spark.ui.showConsoleProgress": "false"}
        cluster = start_cluster(Path(workdir) / "cluster") if args.cluster else None
        try:
            started = time.perf_counter()
            if cluster is None:
                spark = local_session("spark-bench", **conf)
            else:
                spark = local_session("spark-bench", cluster.master_url, **conf, **EXECUTOR_CONF)
                assert wait_for_executors(spark, WORKERS) == WORKERS
            _row("session_start", time.perf_counter() - started, "s", master="cluster" if cluster else "local[2]")
            try:
                run(spark, namesrv, args, workdir, set(args.only.split(",")), broker.pid)
            finally:
                spark.stop()
        finally:
            if cluster is not None:
                cluster.stop()
    finally:
        parent.send(b"stop")
        broker.join(60)
        if broker.is_alive():
            broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
