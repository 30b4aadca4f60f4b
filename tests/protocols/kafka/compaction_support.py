"""Helpers of the compaction tests (test_kafka_compaction*.py): a live broker whose compaction
schedule is an hour (each test runs the pass itself), a compacted topic, produce, read back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.kafka import kafka_config
from tests.support.live_broker import LiveBroker, start_live_broker

HOUR_MS = 3_600_000


@pytest.fixture
def broker(tmp_path) -> Iterator[LiveBroker]:
    config = kafka_config(str(tmp_path / "store"), compaction_schedule_internal=HOUR_MS)
    live = start_live_broker(config.with_overrides(mapped_file_size_commit_log=1 << 20))
    try:
        yield live
    finally:
        live.stop()


def create_compacted(live: LiveBroker, topic: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": live.bootstrap})
    config = {"cleanup.policy": "compact", **configs}
    for future in admin.create_topics([NewTopic(topic, partitions, 1, config=config)]).values():
        future.result(20)


def produce(live: LiveBroker, topic: str, items: list[tuple[bytes, bytes | None]], partition: int = 0,
            **settings) -> None:
    failed = []
    producer = Producer({"bootstrap.servers": live.bootstrap, "linger.ms": 5, "batch.size": 65536, **settings})
    for key, value in items:
        producer.produce(topic, value, key, partition=partition,
                         on_delivery=lambda err, _: err is not None and failed.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0 and not failed


def read_all(live: LiveBroker, topic: str, partition: int = 0) -> list[tuple[int, bytes, bytes | None]]:
    """Every record from offset 0 to the high watermark: (offset, key, value)."""
    consumer = Consumer({"bootstrap.servers": live.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)
        consumer.assign([TopicPartition(topic, partition, 0)])
        out: list[tuple[int, bytes, bytes | None]] = []
        for _ in range(600):  # bounded: at most 600 polls of 0.1 s
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == -191 and (not out or out[-1][0] >= high - 1):  # partition EOF
                    break
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def compact(live: LiveBroker) -> int:
    return live.call(live.server.broker.compaction.run_once)


def latest(items: list[tuple[bytes, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of each key's last record, offsets counted from 0."""
    return {key: (offset, value) for offset, (key, value) in enumerate(items)}
