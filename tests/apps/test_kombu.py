"""kombu (Celery's messaging library, its py-amqp transport), unchanged, over Rocketport's
AMQP front-end: a SimpleQueue as its users write one, a consumer reading typed headers, and
a priority queue. RabbitMQ's behaviour is the expectation (each test says which)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime

import kombu
import pytest
from kombu.simple import SimpleQueue

WAIT_S = 10.0


@pytest.fixture
def conn(request, amqp_url) -> Iterator[kombu.Connection]:
    """kombu on Rocketport, and on RabbitMQ: what the test expects is what RabbitMQ does."""
    url = amqp_url if request.param == "rocketport" else request.getfixturevalue("rabbitmq").url + "/"
    with kombu.Connection(url, transport="pyamqp", connect_timeout=10) as connection:
        yield connection


def on_both(rocketport_mark: pytest.MarkDecorator | None = None) -> pytest.MarkDecorator:
    """Run the test on RabbitMQ and on Rocketport (``rocketport_mark``: Rocketport's xfail)."""
    marks = () if rocketport_mark is None else (rocketport_mark,)
    return pytest.mark.parametrize("conn", [pytest.param("rabbitmq", marks=pytest.mark.rabbitmq),
                                            pytest.param("rocketport", marks=marks)], indirect=True)


def _name(what: str) -> str:
    return f"kombu-{what}-{uuid.uuid4().hex[:8]}"


@on_both()
def test_a_simple_queue_puts_and_gets_in_order(conn):
    """SimpleQueue (a direct exchange and a queue of one name): put, qsize and clear count
    the ready messages, get takes them in order, get with a timeout on an empty queue
    raises Empty."""
    queue: SimpleQueue = conn.SimpleQueue(_name("simple"))
    try:
        for i in range(3):
            queue.put({"n": i})
        _poll(lambda: queue.qsize() == 3)  # RabbitMQ's count too follows the publishes
        assert queue.clear() == 3
        for i in range(3):
            queue.put({"n": i, "text": "h\u00e9llo"}, serializer="json")
        got = []
        for _ in range(3):
            message = queue.get(block=True, timeout=WAIT_S)
            got.append(message.payload)
            message.ack()
        assert got == [{"n": i, "text": "h\u00e9llo"} for i in range(3)]
        with pytest.raises(queue.Empty):
            queue.get(block=True, timeout=0.5)
    finally:
        queue.consumer.cancel()
        queue.queue(conn.default_channel).delete()
        queue.close()


HEADERS = {"retries": 3, "flag": True, "off": False, "limits": [None, 5], "nested": {"a": 1, "b": [1.5, "x"]},
           "none": None, "text": "t", "big": 2 ** 40, "when": datetime(2026, 1, 2, 3, 4, 5)}


@on_both()
def test_a_consumer_reads_headers_with_their_types(conn):
    """RabbitMQ gives a header table back as published: ints, booleans, arrays with nulls,
    nested tables, floats, null, timestamps (py-amqp reads them back as naive UTC datetimes)."""
    exchange = kombu.Exchange(_name("typed-x"), type="direct")
    queue = kombu.Queue(_name("typed"), exchange, routing_key="k")
    producer = conn.Producer(serializer="json")
    producer.publish({"job": 1}, exchange=exchange, routing_key="k", declare=[queue], headers=HEADERS)
    got = []
    with conn.Consumer(queue, callbacks=[lambda body, message: (got.append(message.headers), message.ack())]):
        _drain_until(conn, lambda: got)
    queue(conn.default_channel).delete()
    exchange(conn.default_channel).delete()
    assert got == [HEADERS]
    assert {k: type(v) for k, v in got[0].items()} == {k: type(v) for k, v in HEADERS.items()}


@on_both()
def test_a_priority_queue_hands_out_the_highest_priority_first(conn):
    """x-max-priority (kombu's ``max_priority``): RabbitMQ delivers ready messages highest
    priority first, equal priorities in publish order; above the maximum counts as it."""
    queue = kombu.Queue(_name("priority"), max_priority=5)
    producer = conn.Producer(serializer="json")
    for i, priority in enumerate([1, 5, 0, 9, 3, 5]):
        producer.publish({"i": i}, routing_key=queue.name, declare=[queue], priority=priority)
    got = []
    with conn.Consumer(queue, callbacks=[lambda body, message: (got.append(body["i"]), message.ack())],
                       prefetch_count=1):
        _drain_until(conn, lambda: len(got) == 6)
    queue(conn.default_channel).delete()
    assert got == [1, 3, 5, 4, 0, 2]


def _poll(done) -> None:
    for _ in range(int(WAIT_S / 0.05)):
        if done():
            return
        time.sleep(0.05)
    assert done()


def _drain_until(conn: kombu.Connection, done) -> None:
    """Drain events until ``done()`` (bounded)."""
    for _ in range(int(WAIT_S / 0.1)):
        if done():
            return
        try:
            conn.drain_events(timeout=0.1)
        except TimeoutError:
            pass
    assert done(), "not all messages came"
