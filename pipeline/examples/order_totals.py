"""Streaming example: per-minute order totals per tag, from an order topic to a result topic.

    python -m rocketport.pipeline.examples.order_totals --namesrv 127.0.0.1:9876 --demo 2000

reads order events (JSON bodies ``{"ts": "2026-11-25 14:03:05", "amount": 12.5}``, the tag
is the product category) from `--source`, sums the amounts per one-minute window of event
time and tag, and writes each minute's totals to `--sink` as JSON keyed
``<minute>/<tag>``, once: when an order one minute later has been seen (the watermark), so
a minute is final when written. `--demo N` first sends N random orders spread over the last
ten minutes; the query runs to the data there is (Trigger.AvailableNow) unless `--follow`
keeps it running. Its checkpoint makes a rerun continue where the last one stopped.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import tempfile

from rocketport.client.sync import Message, Producer

from ..session import local_session

TAGS = ("books", "games", "tools", "food")


def demo_orders(topic: str, count: int) -> list[Message]:
    """`count` orders over the ten minutes before the current one, in time order."""
    rng = random.Random(21)
    now = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0, tzinfo=None)
    base = now - datetime.timedelta(minutes=10)
    return [Message(topic, json.dumps({
        "ts": str(base + datetime.timedelta(seconds=600 * i // count)),
        "amount": round(rng.uniform(1, 100), 2)}).encode(), tags=rng.choice(TAGS))
        for i in range(count)]


def send_demo_orders(namesrv: str, topic: str, count: int) -> list[Message]:
    orders = demo_orders(topic, count)
    with Producer(namesrv, "order-totals-demo") as producer:
        for start in range(0, count, 500):
            producer.send_batch(orders[start:start + 500])
    return orders


def build(spark, namesrv: str, source: str):
    """The totals as a streaming DataFrame of the sink's columns (value, key, tags)."""
    from pyspark.sql import functions as F

    orders = (spark.readStream.format("rocketport").option("namesrv", namesrv)
              .option("topic", source).option("startingOffsets", "earliest")
              .option("group", "order-totals").load())
    body = F.col("value").cast("string")
    events = orders.select(F.get_json_object(body, "$.ts").cast("timestamp").alias("ts"),
                           F.get_json_object(body, "$.amount").cast("double").alias("amount"), "tags")
    totals = (events.withWatermark("ts", "1 minute")
              .groupBy(F.window("ts", "1 minute").alias("w"), "tags")
              .agg(F.round(F.sum("amount"), 2).alias("total"), F.count("*").alias("orders")))
    return totals.select(
        F.to_json(F.struct(F.col("w.start").cast("string").alias("minute"), "tags", "total",
                           "orders")).alias("value"),
        F.concat_ws("/", F.col("w.start").cast("string"), "tags").alias("key"),
        F.lit("order-total").alias("tags"))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--namesrv", default="127.0.0.1:9876")
    p.add_argument("--source", default="Orders")
    p.add_argument("--sink", default="OrderTotals")
    p.add_argument("--checkpoint", default=f"{tempfile.gettempdir()}/rocketport-order-totals")
    p.add_argument("--demo", type=int, default=0, metavar="N", help="first send N demo orders")
    p.add_argument("--follow", action="store_true", help="keep running (default: stop at the end)")
    args = p.parse_args(argv)
    if args.demo:
        send_demo_orders(args.namesrv, args.source, args.demo)
    spark = local_session("order-totals")
    writer = (build(spark, args.namesrv, args.source).writeStream.format("rocketport")
              .outputMode("append").option("namesrv", args.namesrv).option("topic", args.sink)
              .option("checkpointLocation", args.checkpoint))
    query = writer.start() if args.follow else writer.trigger(availableNow=True).start()
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"order-totals: read {rows} orders from {args.source}, totals in {args.sink}")
    spark.stop()


if __name__ == "__main__":
    main()
