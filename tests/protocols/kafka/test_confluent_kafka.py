"""confluent-kafka (librdkafka) against a live broker: produce, group consume, rebalance, lz4."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from tests.support.live_broker import LiveBroker

TIMEOUT_S = 30


def create_topic(live: LiveBroker, name: str, partitions: int) -> None:
    live.run(lambda: live.server.broker.create_topic(name, read_queue_nums=partitions,
                                                     write_queue_nums=partitions))


def produce(live: LiveBroker, topic: str, n: int, **conf) -> list:
    delivered: list = []

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))

    p = Producer({"bootstrap.servers": live.bootstrap, "linger.ms": 5, **conf})
    for i in range(n):
        p.produce(topic, key=b"key-%d" % i, value=b"value-%d" % i, headers=[("n", str(i).encode())],
                  on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(TIMEOUT_S) == 0
    return delivered


def group_consumer(live: LiveBroker, group: str, **conf) -> Consumer:
    return Consumer({"bootstrap.servers": live.bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 6000, "max.poll.interval.ms": 7000,
                     "heartbeat.interval.ms": 500, **conf})


def drain(consumer: Consumer, want: int, timeout_s: float = TIMEOUT_S) -> list:
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            continue
        out.append(msg)
    return out


@pytest.mark.parametrize("compression", ["none", "lz4", "snappy", "zstd", "gzip"])
def test_produce_and_group_consume(live_broker, compression):
    create_topic(live_broker, "cf", 2)
    delivered = produce(live_broker, "cf", 300, **{"compression.type": compression, "acks": "all"})
    assert len(delivered) == 300
    c = group_consumer(live_broker, f"cf-{compression}")
    c.subscribe(["cf"])
    got = drain(c, 300)
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition("cf", 0), TopicPartition("cf", 1)], timeout=10)
    c.close()
    assert sorted(m.value() for m in got) == sorted(b"value-%d" % i for i in range(300))
    by_value = {m.value(): m for m in got}
    assert by_value[b"value-7"].key() == b"key-7"
    assert by_value[b"value-7"].headers() == [("n", b"7")]
    assert sum(tp.offset for tp in committed) == 300


def test_two_consumers_rebalance_across_partitions(live_broker):
    create_topic(live_broker, "rb", 4)
    first = group_consumer(live_broker, "rb-group")
    first.subscribe(["rb"])
    deadline = time.monotonic() + TIMEOUT_S
    while not first.assignment() and time.monotonic() < deadline:
        first.poll(0.2)
    assert len(first.assignment()) == 4

    second = group_consumer(live_broker, "rb-group")
    second.subscribe(["rb"])
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and (len(first.assignment()) != 2 or len(second.assignment()) != 2):
        first.poll(0.1)
        second.poll(0.1)
    parts_a = {tp.partition for tp in first.assignment()}
    parts_b = {tp.partition for tp in second.assignment()}
    assert len(parts_a) == 2 and len(parts_b) == 2 and not parts_a & parts_b

    produce(live_broker, "rb", 200)
    got: list = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < 200 and time.monotonic() < deadline:
        for consumer in (first, second):
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                got.append((consumer, msg.partition()))
    assert len(got) == 200
    assert {p for c, p in got if c is first} == parts_a
    assert {p for c, p in got if c is second} == parts_b

    second.close()  # leaves the group: the first consumer takes every partition back
    deadline = time.monotonic() + TIMEOUT_S
    while len(first.assignment()) != 4 and time.monotonic() < deadline:
        first.poll(0.1)
    assert len(first.assignment()) == 4
    first.close()
