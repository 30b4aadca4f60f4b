"""One store, wire to wire: what pika publishes to an exchange, Kafka and RocketMQ clients
read from the exchange's topic (body, routing key as tag, headers and basic properties as
headers / user properties), and what a Kafka producer writes into a topic reaches an AMQP
queue bound to it as an exchange."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from rocketport.core.config import ProtocolConfig
from tests.protocols.amqp.test_pika import _drain
from tests.support.live_broker import LiveBroker, start_live_broker

ROCKETMQ_CLIENT = Path(__file__).parents[3] / "interop" / "rocketmq_py" / "client.py"


@pytest.fixture
def broker(small_config) -> Iterator[LiveBroker]:
    config = dataclasses.replace(small_config, listen_port=0, namesrv=ProtocolConfig(True, 0),
                                 kafka=ProtocolConfig(True, 0), amqp=ProtocolConfig(True, 0),
                                 mapped_file_size_commit_log=8 << 20)
    live = start_live_broker(config)
    try:
        yield live
    finally:
        live.stop()


def _publish(live: LiveBroker, exchange: str, kind: str, messages: list[tuple[str, bytes, dict]]) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", live.endpoint("amqp")[1]))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare(exchange, kind)
        for key, body, headers in messages:
            ch.basic_publish(exchange, key, body, pika.BasicProperties(
                headers=headers, content_type="text/plain", correlation_id="c-" + key))
    finally:
        conn.close()


def test_amqp_publishes_are_read_by_a_kafka_consumer(broker):
    _publish(broker, "amqp-to-kafka", "topic", [("eu.orders", b"one", {"region": "eu"}),
                                                ("us.orders", b"two", {"region": "us"})])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "from-amqp",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("amqp-to-kafka", 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    consumer.close()
    assert [m.value() for m in got] == [b"one", b"two"]
    headers = dict(got[0].headers())
    assert headers["tag"] == b"eu.orders"
    assert headers["region"] == b"eu" and headers["content_type"] == b"text/plain"
    assert headers["correlation_id"] == b"c-eu.orders"


def test_amqp_publishes_are_pushed_to_a_rocketmq_consumer_filtering_by_routing_key(broker, tmp_path):
    _publish(broker, "amqp-to-rocketmq", "direct",
             [("TagA" if i % 2 == 0 else "TagB", b"r-%d" % i, {"color": "red"}) for i in range(6)])
    proc = subprocess.run([sys.executable, str(ROCKETMQ_CLIENT), "push", broker.namesrv, "amqp-to-rocketmq",
                           "FromAmqp", "3", "--expr", "TagA", "--timeout", "60", "--linger", "2",
                           "--show-prop", "color"],
                          env=dict(os.environ, HOME=str(tmp_path)), capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert sorted(m["body"] for m in got) == ["r-0", "r-2", "r-4"]
    assert all(m["tags"] == "TagA" and m["props"] == {"color": "red"} for m in got)


def test_kafka_produce_into_an_exchange_topic_reaches_a_bound_amqp_queue(broker):
    port = broker.endpoint("amqp")[1]
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        ch = conn.channel()
        ch.exchange_declare("kafka-in", "direct")
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(q, "kafka-in", "wanted")
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("kafka-in", value=b"k-1", key=b"key-1", headers=[("tag", b"wanted"), ("trace", b"t1")])
        producer.produce("kafka-in", value=b"k-2", headers=[("tag", b"other")])
        producer.produce("kafka-in", value=b"k-3", headers=[("tag", b"wanted")])
        assert producer.flush(20) == 0
        got = _drain(ch, q, 2)
        assert [b for _, _, b in got] == [b"k-1", b"k-3"]
        method, props, _ = got[0]
        assert method.exchange == "kafka-in" and method.routing_key == "wanted"
        assert props.headers["trace"] == "t1"
    finally:
        conn.close()
