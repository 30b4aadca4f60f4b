"""Log compaction seen by Kafka clients: a compacted topic's consumer from the beginning gets
the latest value of every key at its original offset, tombstoned keys go after
delete.retention.ms, the topic configs drive when it happens, and the CommitLog's old
segments can expire while the compacted values stay readable (core/compaction).

The schedule is set to an hour (compactionScheduleInternal): each test runs the pass itself
through the facade (`Broker.compaction.run_once`), so what is compacted and when is the test's.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tests.protocols.kafka.compaction_support import (  # noqa: F401  (broker: a fixture)
    HOUR_MS,
    broker,
    compact,
    create_compacted,
    latest,
    produce,
    read_all,
)


def test_a_consumer_from_the_beginning_gets_the_latest_value_of_every_key_at_its_offset(broker):
    create_compacted(broker, "table")
    items = [(b"k%d" % (i % 100), b"v%d" % i) for i in range(5000)]
    produce(broker, "table", items)
    assert compact(broker) == 1
    got = read_all(broker, "table")
    want = latest(items)
    assert len(got) == 100
    assert {key: (offset, value) for offset, key, value in got} == want
    assert [offset for offset, _, _ in got] == sorted(off for off, _ in want.values())


def test_a_fetch_at_a_removed_offset_starts_at_the_next_kept_one(broker):
    create_compacted(broker, "seek")
    items = [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"a", b"4"), (b"c", b"5")]
    produce(broker, "seek", items, **{"linger.ms": 0})
    assert compact(broker) == 1
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "seeker", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("seek", 0, 2)])  # offset 2 (a=3) was removed
        msgs = []
        for _ in range(40):  # bounded: at most 40 polls of 0.5 s
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                msgs.append(msg)
                if len(msgs) == 2:
                    break
        first = msgs[0]
        assert (first.offset(), first.key(), first.value()) == (3, b"a", b"4")
        assert [m.offset() for m in msgs[:2]] == [3, 4]
    finally:
        consumer.close()
    lows = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w"})
    assert lows.get_watermark_offsets(TopicPartition("seek", 0), timeout=20) == (0, 5)
    lows.close()


def test_records_produced_after_a_compaction_follow_the_compacted_ones_and_compact_again(broker):
    create_compacted(broker, "again")
    first = [(b"k%d" % (i % 10), b"a%d" % i) for i in range(200)]
    produce(broker, "again", first)
    assert compact(broker) == 1
    second = [(b"k%d" % (i % 20), b"b%d" % i) for i in range(200)]
    produce(broker, "again", second)
    items = first + second
    got = read_all(broker, "again")
    assert got[:10] == sorted((o, k, v) for k, (o, v) in latest(first).items())
    assert len(got) == 10 + 200
    assert compact(broker) == 1
    got = read_all(broker, "again")
    assert {key: (offset, value) for offset, key, value in got} == latest(items)
    assert len(got) == 20


def test_tombstones_remove_their_key_and_go_themselves_after_delete_retention_ms(broker):
    create_compacted(broker, "tomb", **{"delete.retention.ms": str(HOUR_MS)})
    items = [(b"k%d" % i, b"v") for i in range(10)] + [(b"k3", None), (b"k7", None)]
    produce(broker, "tomb", items)
    assert compact(broker) == 1
    got = read_all(broker, "tomb")
    assert [(o, k, v) for o, k, v in got if v is None] == [(10, b"k3", None), (11, b"k7", None)]
    assert {k for _, k, _ in got} == {b"k%d" % i for i in range(10)}
    # delete.retention.ms lowered to 0: the next compaction drops the tombstones themselves
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "tomb", incremental_configs=[
        ConfigEntry("delete.retention.ms", "0", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(20)
    produce(broker, "tomb", [(b"k0", b"w")])  # something dirty, so the queue is compacted again
    assert compact(broker) == 1
    got = read_all(broker, "tomb")
    assert {k for _, k, _ in got} == {b"k%d" % i for i in range(10) if i not in (3, 7)}
    assert (12, b"k0", b"w") in got and all(v is not None for _, _, v in got)


def test_min_compaction_lag_keeps_recent_records_and_the_dirty_ratio_gates_a_pass(broker):
    create_compacted(broker, "lagged", **{"min.compaction.lag.ms": str(HOUR_MS)})
    produce(broker, "lagged", [(b"k", b"%d" % i) for i in range(50)])
    assert compact(broker) == 0  # every record is younger than an hour
    assert len(read_all(broker, "lagged")) == 50
    create_compacted(broker, "ratio", **{"min.cleanable.dirty.ratio": "0.9"})
    produce(broker, "ratio", [(b"k%d" % i, b"x") for i in range(100)])
    assert compact(broker) == 1  # nothing clean yet: all dirty
    produce(broker, "ratio", [(b"k%d" % i, b"y") for i in range(100)])
    assert compact(broker) == 0  # 100 dirty of 200: below 0.9
    produce(broker, "ratio", [(b"k%d" % (i % 100), b"z") for i in range(1000)])
    assert compact(broker) == 1  # 1100 dirty of 1200
    assert len(read_all(broker, "ratio")) == 100


def test_topic_configs_round_trip_through_describe_configs(broker):
    create_compacted(broker, "configured", **{"min.cleanable.dirty.ratio": "0.2", "max.compaction.lag.ms": "60000"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [(resource, future)] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "configured")]).items()
    configs = future.result(20)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.cleanable.dirty.ratio"].value == "0.2"
    assert configs["max.compaction.lag.ms"].value == "60000"
    assert configs["delete.retention.ms"].value == "86400000"
    bad = ConfigResource(ConfigResource.Type.TOPIC, "configured", incremental_configs=[
        ConfigEntry("min.cleanable.dirty.ratio", "2", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException):
        admin.incremental_alter_configs([bad])[bad].result(20)


def test_compacted_values_outlive_the_commit_log_segments_that_held_them(broker, tmp_path):
    create_compacted(broker, "kept", **{"min.cleanable.dirty.ratio": "0.01"})
    produce(broker, "other", [(None, b"x" * 1000) for _ in range(2000)])  # a plain topic beside it
    items = [(b"k%d" % (i % 50), b"v%d-" % i + b"p" * 200) for i in range(3000)]
    produce(broker, "kept", items)
    assert compact(broker) == 1
    store = broker.server.broker.store
    segments_before = len(store.commitlog.queue.files)
    later = time.time() + 365 * 86400  # every segment but the last is past fileReservedTime
    deleted = broker.call(lambda: store.delete_expired_files(force=True, now=later))
    assert deleted >= 1 and len(store.commitlog.queue.files) < segments_before
    got = read_all(broker, "kept")
    assert {key: (offset, value) for offset, key, value in got} == latest(items)
    # records not yet compacted pin the segments that hold them: retention keeps them
    more = [(b"k%d" % (i % 50), b"w%d" % i) for i in range(50)]
    produce(broker, "kept", more)
    produce(broker, "other", [(None, b"x" * 1000) for _ in range(2000)])
    pinned = store.consume_queues[("kept", 0)].entry(3000)[0]
    broker.call(lambda: store.delete_expired_files(force=True, now=later))
    assert store.commitlog.min_offset <= pinned
    got = read_all(broker, "kept")
    assert {key: (offset, value) for offset, key, value in got} == latest(items + more)
    assert compact(broker) == 1
    broker.call(lambda: store.delete_expired_files(force=True, now=later))
    assert store.commitlog.min_offset > pinned  # compacted: the pin is gone
    assert {key: (o, v) for o, key, v in read_all(broker, "kept")} == latest(items + more)
