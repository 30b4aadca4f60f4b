"""Batch example: a report over the dead-letter topics (%DLQ%<group>).

    python -m rocketport.pipeline.examples.dlq_report --namesrv 127.0.0.1:9876 --demo

finds every %DLQ% topic through the name server, reads them all in one batch query and
prints, per consumer group: how many messages died, from which topics (RETRY_TOPIC), the
first and last time one arrived, and the first failure reasons: the distinct values of the
`--reason-property` (FAILURE_REASON by default) in the order they first appeared. RocketMQ
4 send-backs carry no reason, so a message without the property counts as "unknown".
`--demo` first writes a few dead letters for two groups, as a broker's send-back
leaves them.
"""

from __future__ import annotations

import argparse

from rocketport.client.sync import AdminClient, Message, Producer

from ..session import local_session

DLQ_PREFIX = "%DLQ%"


def send_demo_dead_letters(namesrv: str) -> None:
    reasons = {"billing": ["card declined", "timeout calling bank", "card declined"],
               "shipping": ["address invalid", None]}
    with AdminClient(namesrv) as admin, Producer(namesrv, "dlq-demo") as producer:
        for group, why in reasons.items():
            admin.create_topic(DLQ_PREFIX + group, queue_nums=1)
            for i, reason in enumerate(why * 3):
                props = {"RETRY_TOPIC": f"{group}-events", "RECONSUME_TIME": "16"}
                if reason:
                    props["FAILURE_REASON"] = reason
                producer.send(Message(DLQ_PREFIX + group, b"event-%d" % i, properties=props))


def dlq_topics(namesrv: str) -> list[str]:
    with AdminClient(namesrv) as admin:
        return [t for t in admin.topic_list() if t.startswith(DLQ_PREFIX)]


def report(spark, namesrv: str, topics: list[str], reason_property: str):
    from pyspark.sql import functions as F

    dead = (spark.read.format("rocketport").option("namesrv", namesrv)
            .option("topic", ",".join(topics)).load())
    reason = F.coalesce(F.col("properties")[reason_property], F.lit("unknown"))
    return (dead.withColumn("group", F.expr(f"substring(topic, {len(DLQ_PREFIX) + 1})"))
            .withColumn("reason", reason)
            .groupBy("group")
            .agg(F.count("*").alias("dead"),
                 F.array_sort(F.collect_set(F.col("properties")["RETRY_TOPIC"])).alias("from_topics"),
                 F.min("store_timestamp").alias("first"), F.max("store_timestamp").alias("last"),
                 # reasons by the time each first appeared
                 F.transform(F.array_sort(F.collect_list(F.struct("store_timestamp", "reason"))),
                             lambda s: s["reason"]).alias("reasons"))
            .withColumn("first_reasons", F.slice(F.array_distinct("reasons"), 1, 3))
            .drop("reasons").orderBy("group"))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--namesrv", default="127.0.0.1:9876")
    p.add_argument("--reason-property", default="FAILURE_REASON")
    p.add_argument("--demo", action="store_true", help="first write demo dead letters")
    args = p.parse_args(argv)
    if args.demo:
        send_demo_dead_letters(args.namesrv)
    topics = dlq_topics(args.namesrv)
    if not topics:
        print("dlq-report: no %DLQ% topic: nothing has died")
        return
    spark = local_session("dlq-report")
    report(spark, args.namesrv, topics, args.reason_property).show(truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
