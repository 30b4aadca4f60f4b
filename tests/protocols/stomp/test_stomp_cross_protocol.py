"""One store, wire to wire: what a STOMP client sends (headers, x-tags) a RocketMQ client
and a Kafka client consume with the same body, tag and properties, and what they send a
STOMP subscriber receives the same way."""

from __future__ import annotations

import dataclasses
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from rocketport.core.config import ProtocolConfig
from tests.protocols.test_cross_protocol_wire import _rocketmq
from tests.support.live_broker import start_live_broker

from .stomp_support import connect


@pytest.fixture
def broker(stomp_config):
    live = start_live_broker(dataclasses.replace(stomp_config, kafka=ProtocolConfig(True, 0),
                                                 mapped_file_size_commit_log=8 << 20))
    try:
        yield live
    finally:
        live.stop()


def test_stomp_sent_messages_reach_rocketmq_and_kafka_consumers(broker, tmp_path):
    broker.call(lambda: broker.server.broker.create_topic("cross", read_queue_nums=1, write_queue_nums=1))
    conn, listener = connect(broker)
    for i in range(6):
        conn.send("/topic/cross", b"s-%d" % i,
                  headers={"x-tags": "TagA" if i % 2 == 0 else "TagB", "color": "red", "x-keys": f"key-{i}"})
    conn.disconnect(receipt="sent")
    got = _rocketmq(tmp_path, "push", broker.namesrv, "cross", "CrossGroup", "3", "--expr", "TagA",
                    "--timeout", "60", "--linger", "2", "--show-prop", "color")
    assert sorted(m["body"] for m in got) == ["s-0", "s-2", "s-4"]
    assert all(m["tags"] == "TagA" and m["props"] == {"color": "red"} for m in got)
    assert {m["keys"] for m in got} == {"key-0", "key-2", "key-4"}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cross-kafka",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("cross", 0, 0)])
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 6 and time.monotonic() < deadline:
            record = consumer.poll(1.0)
            if record is not None and record.error() is None:
                records.append(record)
    finally:
        consumer.close()
    assert [r.value() for r in records] == [b"s-%d" % i for i in range(6)]
    headers = dict(records[0].headers())
    assert headers["color"] == b"red" and headers["tag"] == b"TagA"
    assert records[0].key() == b"key-0"


def test_rocketmq_and_kafka_sent_messages_reach_a_stomp_subscriber(broker, tmp_path):
    broker.call(lambda: broker.server.broker.create_topic("back", read_queue_nums=1, write_queue_nums=1))
    conn, listener = connect(broker)
    conn.subscribe("/queue/back", id="s", ack="client-individual", headers={"x-group": "BackGroup"})
    _rocketmq(tmp_path, "produce", broker.namesrv, "back", "2", "--tag", "TagR", "--prop", "color=blue")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("back", value=b"\x00kafka\xff", key=b"kk", partition=0,
                     headers=[("tag", b"TagK"), ("size", b"7")])
    assert producer.flush(20) == 0
    got = listener.wait_messages(3)
    by_body = {body: headers for headers, body in got}
    remoting = by_body[b"body-0"]
    assert remoting["x-tags"] == "TagR" and remoting["color"] == "blue" and remoting["x-keys"] == "key-0"
    assert remoting["destination"] == "/queue/back"
    kafka = by_body[b"\x00kafka\xff"]
    assert kafka["x-tags"] == "TagK" and kafka["size"] == "7" and kafka["x-keys"] == "kk"
    assert kafka["content-length"] == "7"
    for headers, _ in got:
        conn.ack(headers["ack"])
    conn.disconnect(receipt="done")
