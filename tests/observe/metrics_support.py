"""Helpers for the /metrics tests: a live broker with every front-end and the HTTP listener
on free loopback ports, a scrape parsed with prometheus-client's own parser, and one
client per protocol that produces and consumes exact counts."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pika
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.protocols.stomp.stomp_support import connect as stomp_connect
from tests.support.kafka import kafka_config
from tests.support.live_broker import LiveBroker
from tests.support.remoting import free_port

BASE_LABELS = ("cluster", "node_type", "node_id")
TIMEOUT = 20.0


def all_protocols_config(store_dir: str, **overrides: Any) -> BrokerConfig:
    settings: dict[str, Any] = {"listen_port": free_port(), "amqp": ProtocolConfig(True, 0),
                                "stomp": ProtocolConfig(True, 0), "http": ProtocolConfig(True, 0)}
    return kafka_config(store_dir, **{**settings, **overrides})


def metrics_url(live: LiveBroker, path: str = "/metrics") -> str:
    return "http://%s:%d%s" % (*live.endpoint("http"), path)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(live: LiveBroker) -> Samples:
    """Every sample of /metrics by (name, labels other than cluster/node_type/node_id)."""
    with urllib.request.urlopen(metrics_url(live), timeout=TIMEOUT) as answer:
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = frozenset((k, v) for k, v in sample.labels.items() if k not in BASE_LABELS)
            out[(sample.name, labels)] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def wait_for(live: LiveBroker, check: Callable[[Samples], bool], timeout: float = TIMEOUT) -> Samples:
    """Scrape until ``check`` holds (offsets are committed and dispatched a moment after the
    clients return); the last scrape either way, for the assertion to show."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(live)
        if check(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(0.1)


# ------------------------------------------------------------------ one client per protocol
def kafka_produce(live: LiveBroker, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": live.bootstrap, "linger.ms": 0})
    for i in range(start, start + count):
        producer.produce(topic, b"kafka-%d" % i)
    assert producer.flush(TIMEOUT) == 0


def kafka_consume(live: LiveBroker, topic: str, group: str, count: int) -> None:
    """Read ``count`` messages (all the topic holds past the group's offsets) and commit."""
    consumer = Consumer({"bootstrap.servers": live.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + TIMEOUT
        while got < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        assert got == count
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def amqp_channel(live: LiveBroker) -> tuple[pika.BlockingConnection, Any]:
    connection = pika.BlockingConnection(pika.ConnectionParameters(
        *live.endpoint("amqp"), connection_attempts=1, socket_timeout=TIMEOUT))
    return connection, connection.channel()


def amqp_produce(live: LiveBroker, queue: str, count: int) -> None:
    connection, channel = amqp_channel(live)
    try:
        channel.queue_declare(queue, durable=True)
        channel.confirm_delivery()
        for i in range(count):
            channel.basic_publish("", queue, b"amqp-%d" % i)
    finally:
        connection.close()


def amqp_consume(live: LiveBroker, queue: str, count: int) -> None:
    connection, channel = amqp_channel(live)
    try:
        got = 0
        deadline = time.monotonic() + TIMEOUT
        for method, _, _ in channel.consume(queue, inactivity_timeout=0.5):
            if method is not None:
                channel.basic_ack(method.delivery_tag)
                got += 1
            if got == count or time.monotonic() > deadline:
                break
        channel.cancel()
        assert got == count
    finally:
        connection.close()


def stomp_produce(live: LiveBroker, destination: str, count: int) -> None:
    conn, listener = stomp_connect(live)
    try:
        for i in range(count):
            conn.send(destination, b"stomp-%d" % i)
        conn.disconnect(receipt="bye")
    finally:
        if conn.is_connected():
            conn.disconnect()


def stomp_consume(live: LiveBroker, destination: str, count: int, **headers: str) -> None:
    conn, listener = stomp_connect(live)
    try:
        conn.subscribe(destination, id="1", ack="client-individual", headers=headers)
        messages = listener.wait_messages(count)
        assert len(messages) == count, messages
        for frame_headers, _ in messages:
            conn.ack(frame_headers["ack"])
        conn.unsubscribe(id="1")
        conn.disconnect(receipt="bye")
    finally:
        if conn.is_connected():
            conn.disconnect()


def remoting_produce(live: LiveBroker, topic: str, count: int) -> None:
    from rocketport.client import Message
    from rocketport.client.sync import Producer as NativeProducer
    producer = NativeProducer(live.namesrv, "MetricsProducer")
    producer.start()
    try:
        for i in range(count):
            producer.send(Message(topic, b"remoting-%d" % i))
    finally:
        producer.shutdown()


def remoting_consume(live: LiveBroker, topic: str, group: str, count: int) -> None:
    from rocketport.client.sync import PullConsumer
    consumer = PullConsumer(group, live.namesrv, consume_from="first")
    consumer.start()
    try:
        consumer.assign(consumer.queues(topic))
        got: list = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            got += consumer.poll(timeout_s=0.2, max_messages=count - len(got))
        assert len(got) == count
        consumer.commit()
    finally:
        consumer.shutdown()
