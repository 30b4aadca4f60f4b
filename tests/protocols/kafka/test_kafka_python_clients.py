"""kafka-python 3.x against a live broker: produce, consume, groups, seek, admin.

Every client runs with bounded timeouts; every consume loop stops at a deadline.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic

from tests.support.kafka import start_broker
from tests.support.live_broker import LiveBroker

TIMEOUT_S = 20


def consume(consumer: KafkaConsumer, want: int, timeout_s: float = TIMEOUT_S) -> list:
    """Poll until ``want`` records arrived or the deadline passed."""
    out: list = []
    deadline = time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out.extend(records)
    return out


def producer(live: LiveBroker, **kw) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=live.bootstrap, request_timeout_ms=10000,
                         max_block_ms=10000, **kw)


def create_topic(live: LiveBroker, name: str, partitions: int = 1) -> None:
    live.run(lambda: live.server.broker.create_topic(name, read_queue_nums=partitions,
                                                     write_queue_nums=partitions))


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_each_compression_and_acks(live_broker, compression, acks):
    topic = f"c-{compression}-{acks}"
    create_topic(live_broker, topic)
    p = producer(live_broker, compression_type=compression, acks=acks, linger_ms=5)
    futures = [p.send(topic, key=b"k%d" % i, value=b"value-%d" % i * 10,
                      headers=[("h", b"\x00\xff%d" % i)]) for i in range(200)]
    p.flush(TIMEOUT_S)
    if acks != 0:
        offsets = sorted(f.get(TIMEOUT_S).offset for f in futures)
        assert offsets == list(range(200))
    p.close(TIMEOUT_S)
    c = KafkaConsumer(bootstrap_servers=live_broker.bootstrap, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    c.assign([TopicPartition(topic, 0)])
    got = consume(c, 200)
    c.close()
    assert [r.offset for r in got] == list(range(200))
    assert [r.value for r in got] == [b"value-%d" % i * 10 for i in range(200)]
    assert [r.key for r in got] == [b"k%d" % i for i in range(200)]
    assert [r.headers for r in got] == [[("h", b"\x00\xff%d" % i)] for i in range(200)]


def test_idempotent_producer(live_broker):
    create_topic(live_broker, "idem", 2)
    p = producer(live_broker, enable_idempotence=True, acks="all")
    futures = [p.send("idem", value=b"m%d" % i, partition=i % 2) for i in range(100)]
    p.flush(TIMEOUT_S)
    assert all(f.get(TIMEOUT_S) for f in futures)
    p.close(TIMEOUT_S)
    broker = live_broker.server.broker
    assert live_broker.run(broker.max_offset, "idem", 0) == 50
    assert live_broker.run(broker.max_offset, "idem", 1) == 50


def test_group_consume_commit_and_resume(live_broker):
    create_topic(live_broker, "orders", 3)
    p = producer(live_broker)
    for i in range(60):
        p.send("orders", key=b"%d" % i, value=b"order-%d" % i)
    p.flush(TIMEOUT_S)

    def group_consumer() -> KafkaConsumer:
        return KafkaConsumer("orders", bootstrap_servers=live_broker.bootstrap, group_id="billing",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=1000,
                             max_poll_interval_ms=7000)

    c = group_consumer()
    first = consume(c, 60)
    assert sorted(r.value for r in first) == sorted(b"order-%d" % i for i in range(60))
    c.commit()
    c.close()
    broker = live_broker.server.broker
    assert sum(live_broker.run(broker.query_offset, "billing", "orders", q) for q in range(3)) == 60

    for i in range(60, 70):
        p.send("orders", key=b"%d" % i, value=b"order-%d" % i)
    p.flush(TIMEOUT_S)
    p.close(TIMEOUT_S)
    c = group_consumer()
    resumed = consume(c, 10)
    c.close()
    assert sorted(r.value for r in resumed) == sorted(b"order-%d" % i for i in range(60, 70))


def test_assign_and_seek(live_broker):
    create_topic(live_broker, "seek", 1)
    p = producer(live_broker, linger_ms=20)
    for i in range(50):
        p.send("seek", value=b"%d" % i)
    p.flush(TIMEOUT_S)
    p.close(TIMEOUT_S)
    tp = TopicPartition("seek", 0)
    c = KafkaConsumer(bootstrap_servers=live_broker.bootstrap, enable_auto_commit=False)
    c.assign([tp])
    c.seek(tp, 37)  # inside a stored batch: the client skips the records before it
    got = consume(c, 13)
    assert [r.offset for r in got] == list(range(37, 50))
    c.seek_to_beginning(tp)
    assert consume(c, 1)[0].offset == 0
    assert c.end_offsets([tp])[tp] == 50
    assert c.beginning_offsets([tp])[tp] == 0
    c.close()


def test_admin_create_list_delete_topics(live_broker):
    admin = KafkaAdminClient(bootstrap_servers=live_broker.bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic("adm-a", 3, 1), NewTopic("adm-b", 1, 1), NewTopic("adm.dotted", 1, 1)])
    assert {"adm-a", "adm-b", "adm.dotted"} <= set(admin.list_topics())
    described = {t["name"]: t for t in admin.describe_topics(["adm-a"])}
    assert len(described["adm-a"]["partitions"]) == 3
    admin.create_partitions({"adm-b": NewPartitions(4)})
    assert live_broker.run(live_broker.server.broker.get_topic, "adm-b").write_queue_nums == 4
    admin.delete_topics(["adm-a"])
    assert "adm-a" not in set(admin.list_topics())
    admin.close()


def test_idempotent_state_survives_restart(tmp_path):
    """A restarted broker still knows the producer's sequences: a retried batch is not stored twice."""
    from .kafka_raw import RawClient, encode_batch

    live = start_broker(str(tmp_path / "store"))
    try:
        create_topic(live, "dup", 1)
        with RawClient(live.port) as client:
            pid, epoch = client.init_producer_id()
            batch = encode_batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
            assert client.produce("dup", 0, batch) == (0, 0)
    finally:
        live.stop()
    live = start_broker(str(tmp_path / "store"))
    try:
        with RawClient(live.port) as client:
            assert client.produce("dup", 0, batch) == (0, 0)  # the duplicate: original offset
            gap = encode_batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=5)
            assert client.produce("dup", 0, gap)[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
            nxt = encode_batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=2)
            assert client.produce("dup", 0, nxt) == (0, 2)
        assert live.run(live.server.broker.max_offset, "dup", 0) == 3
    finally:
        live.stop()
