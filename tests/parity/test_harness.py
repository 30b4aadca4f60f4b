"""The harness itself: it runs a script on both brokers, and a difference fails the test."""

from __future__ import annotations

import pika
import pytest

from .harness import Differential, Peer, ScriptFailed, typed


def basic_publish_get(peer: Peer) -> list:
    """A queue, two publishes with typed headers, two basic.gets and an empty one."""
    with pika.BlockingConnection(pika.URLParameters(peer.url)) as connection:
        channel = connection.channel()
        queue = peer.name()
        channel.queue_declare(queue, durable=True)
        observed = []
        for i in range(2):
            channel.basic_publish("", queue, b"m%d" % i,
                                  pika.BasicProperties(delivery_mode=2, headers={"n": i, "s": "x"}))
        for _ in range(3):
            method, properties, body = channel.basic_get(queue, auto_ack=True)
            observed.append(None if method is None else
                            (body, method.message_count, method.redelivered, typed(properties.headers["s"])))
        channel.queue_delete(queue)
        return observed


def test_a_basic_amqp_exchange_is_the_same_on_both(parity):
    assert parity.assert_same(basic_publish_get) == [
        (b"m0", 1, False, ("str", "x")), (b"m1", 0, False, ("str", "x")), None]


FAKE = (Peer("rabbitmq", "127.0.0.1", 1, 2), Peer("rocketport", "127.0.0.1", 3, 4))


def test_a_difference_fails_with_both_sides_shown():
    def script(peer: Peer) -> list:
        return [peer.name(), 1 if peer.broker == "rabbitmq" else "1"]
    with pytest.raises(AssertionError, match=r"(?s)!! \[1\] rabbitmq:   1\n!! \[1\] rocketport: '1'"):
        Differential(*FAKE, "t").assert_same(script)


def test_a_script_failing_on_rabbitmq_is_the_script_s_fault():
    def script(peer: Peer) -> list:
        raise ConnectionRefusedError(peer.amqp_port)
    with pytest.raises(ScriptFailed, match="RabbitMQ \\(the script is wrong\\)"):
        Differential(*FAKE, "t").observe(script)


def test_names_are_equal_on_both_peers_and_fresh_per_comparison():
    differential = Differential(*FAKE, "test x[1]")
    first = differential.observe(lambda peer: [peer.name("q")])
    second = differential.observe(lambda peer: [peer.name("q")])
    assert first[0] == first[1] and first != second and first[0][0].startswith("test-x-1.")
