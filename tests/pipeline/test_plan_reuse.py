"""One DataFrame queried many ways returns what each query asks for.

Spark keeps one read plan per DataFrame and reuses it across the queries (and the scans of
one query) built from it; a source that narrowed its read by pushed filters would hand one
query's narrowing to the next (issue 32: `df.count()` 1000, `df.filter("tags = 'A'")
.count()` 500, then `df.count()` 500). Every query here is compared with the same
predicate evaluated in Python over the rows a fresh, unfiltered read collected, with
Spark's Python filter pushdown off (the default) and on.
"""

from __future__ import annotations

import pytest

from rocketport.client import Message
from tests.pipeline.conftest import create_topic, produce

TOPIC = "SparkReuse"
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture(scope="module")
def reuse_topic(broker):
    """1,000 messages on 4 queues, tags A and B alternating."""
    create_topic(broker, TOPIC, 4)
    produce(broker, [Message(TOPIC, b"r%04d" % i, tags="A" if i % 2 else "B") for i in range(1000)])


@pytest.fixture(params=["false", "true"], ids=["pushdown-off", "pushdown-on"])
def session(request, spark, reuse_topic):
    spark.conf.set(PUSHDOWN, request.param)
    try:
        yield spark
    finally:
        spark.conf.unset(PUSHDOWN)


def load(spark, broker):
    return spark.read.format("rocketport").option("namesrv", broker.namesrv).option("topic", TOPIC).load()


def keys(rows) -> list[tuple]:
    return sorted((r.queue_id, r.offset, r.tags, r.value) for r in rows)


@pytest.fixture
def truth(session, broker) -> list[tuple]:
    """Every row of the topic, from a DataFrame of its own that is never filtered."""
    rows = keys(load(session, broker).select("queue_id", "offset", "tags", "value").collect())
    assert len(rows) == 1000
    return rows


def where(truth, predicate) -> list[tuple]:
    return [t for t in truth if predicate(*t)]


def test_filtered_queries_leave_the_dataframe_whole(session, broker, truth):
    df = load(session, broker)
    assert df.count() == 1000
    assert keys(df.filter("tags = 'A'").collect()) == where(truth, lambda q, o, t, v: t == "A")
    assert df.count() == 1000
    assert sorted(r.value for r in df.select("value").collect()) == sorted(t[3] for t in truth)
    assert keys(df.filter("queue_id = 2 AND offset >= 200").collect()) == where(
        truth, lambda q, o, t, v: q == 2 and o >= 200)
    assert df.filter("topic = 'Elsewhere'").count() == 0
    assert keys(df.filter("tags IN ('B') AND offset < 10").collect()) == where(
        truth, lambda q, o, t, v: t == "B" and o < 10)
    assert keys(df.collect()) == truth


def test_unions_and_self_joins_of_filtered_views(session, broker, truth):
    df = load(session, broker)
    a, b = df.filter("tags = 'A'"), df.filter("tags = 'B' AND queue_id < 2")
    assert keys(a.union(b).collect()) == sorted(
        where(truth, lambda q, o, t, v: t == "A") + where(truth, lambda q, o, t, v: t == "B" and q < 2))
    early = df.filter("offset < 100")
    joined = a.alias("a").join(early.alias("e"), ["queue_id", "offset"]).select("queue_id", "offset", "a.tags", "a.value")
    assert keys(joined.collect()) == where(truth, lambda q, o, t, v: t == "A" and o < 100)
    assert df.count() == 1000


def test_cached_filtered_view_and_the_whole(session, broker, truth):
    df = load(session, broker)
    b = df.filter("tags = 'B'").cache()
    try:
        assert b.count() == 500
        assert df.count() == 1000
        assert keys(b.filter("queue_id = 1").collect()) == where(truth, lambda q, o, t, v: t == "B" and q == 1)
        assert keys(df.filter("tags = 'A'").collect()) == where(truth, lambda q, o, t, v: t == "A")
        assert b.count() == 500
    finally:
        b.unpersist()


def test_stream_and_batch_reads_of_one_source(session, broker, truth, tmp_path):
    seen: list = []
    df = load(session, broker)
    assert df.filter("tags = 'A'").count() == 500
    q = (session.readStream.format("rocketport").option("namesrv", broker.namesrv).option("topic", TOPIC)
         .option("startingOffsets", "earliest").load().filter("tags = 'A'")
         .writeStream.foreachBatch(lambda batch, _: seen.extend(batch.select("queue_id", "offset", "tags", "value").collect()))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert keys(seen) == where(truth, lambda q, o, t, v: t == "A")
    assert df.count() == 1000 and keys(df.collect()) == truth


def test_a_reused_dataframe_writes_every_row(session, broker, truth):
    out = f"{TOPIC}Copy{session.conf.get(PUSHDOWN)}"
    create_topic(broker, out, 4)
    df = load(session, broker)
    assert df.filter("tags = 'A'").count() == 500
    (df.select("value", "tags").write.format("rocketport").mode("append")
     .option("namesrv", broker.namesrv).option("topic", out).save())
    copied = session.read.format("rocketport").option("namesrv", broker.namesrv).option("topic", out).load()
    assert sorted((r.tags, r.value) for r in copied.collect()) == sorted((t[2], t[3]) for t in truth)
