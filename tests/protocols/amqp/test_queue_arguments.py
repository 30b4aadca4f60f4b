"""Queue arguments and queue lifetimes, as RabbitMQ users set them, through pika."""

from __future__ import annotations

import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from tests.protocols.amqp.test_pika import TIMEOUT, _connect, _drain, _get


def _empty_for(ch, queue: str, seconds: float = 0.5) -> bool:
    time.sleep(seconds)
    return ch.basic_get(queue, auto_ack=True) == (None, None, None)


def test_rejected_messages_go_to_the_dead_letter_exchange_with_its_routing_key(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("dlx", "direct")
        ch.queue_declare("dead")
        ch.queue_bind("dead", "dlx", "failed")
        ch.queue_declare("work-dlx", arguments={"x-dead-letter-exchange": "dlx",
                                                "x-dead-letter-routing-key": "failed"})
        ch.basic_publish("", "work-dlx", b"poison", pika.BasicProperties(headers={"id": "7"}))
        method, _, _ = _get(ch, "work-dlx")
        ch.basic_reject(method.delivery_tag, requeue=False)
        method, props, body = _get(ch, "dead")
        assert body == b"poison" and method.exchange == "dlx" and method.routing_key == "failed"
        assert props.headers["id"] == "7"
        assert props.headers["x-first-death-reason"] == "rejected"
        assert props.headers["x-first-death-queue"] == "work-dlx"
        assert _empty_for(ch, "work-dlx")


def test_message_ttl_and_per_message_expiration_expire_into_the_dead_letter_exchange(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("expired", "fanout")
        ch.queue_declare("graveyard")
        ch.queue_bind("graveyard", "expired")
        ch.queue_declare("short-lived", arguments={"x-message-ttl": 200, "x-dead-letter-exchange": "expired"})
        ch.basic_publish("", "short-lived", b"old")
        ch.queue_declare("own-expiry")
        ch.basic_publish("", "own-expiry", b"brief", pika.BasicProperties(expiration="100"))
        ch.basic_publish("", "own-expiry", b"lasting")
        time.sleep(0.5)
        ch.basic_publish("", "short-lived", b"fresh")
        assert _get(ch, "short-lived")[2] == b"fresh"
        method, props, body = _get(ch, "graveyard")
        assert body == b"old" and props.headers["x-first-death-reason"] == "expired"
        assert [b for _, _, b in _drain(ch, "own-expiry", 1)] == [b"lasting"]


def test_max_length_drops_the_oldest(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("bounded", arguments={"x-max-length": 2})
        for i in range(5):
            ch.basic_publish("", "bounded", b"%d" % i)
        got = _drain(ch, "bounded", 2)
        assert [b for _, _, b in got] == [b"3", b"4"]
        assert _empty_for(ch, "bounded")


def test_bad_queue_arguments_are_refused(amqp_port):
    with _connect(amqp_port) as conn:
        with pytest.raises(ChannelClosedByBroker) as bad:
            conn.channel().queue_declare("bad-ttl", arguments={"x-message-ttl": -1})
        assert bad.value.reply_code == 406


def test_unused_queue_expires(amqp_broker, amqp_port):
    vhost = amqp_broker.server.front_ends["amqp"].vhost
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.queue_declare("ephemeral", arguments={"x-expires": 500})
        # watched from the broker's side: a passive declare would be a use, and keep it
        deadline = time.monotonic() + TIMEOUT
        while amqp_broker.call(lambda: "ephemeral" in vhost.queues) and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ChannelClosedByBroker) as gone:
            conn.channel().queue_declare("ephemeral", passive=True)
        assert gone.value.reply_code == 404


def test_exclusive_queue_goes_with_its_connection_and_auto_delete_with_its_last_consumer(amqp_port):
    with _connect(amqp_port) as owner:
        q = owner.channel().queue_declare("", exclusive=True).method.queue
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.queue_declare("auto", auto_delete=True)
        consumer = conn.channel()
        tag = consumer.basic_consume("auto", lambda *a: None)
        consumer.basic_cancel(tag)
        for name in (q, "auto"):
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                probe = conn.channel()
                try:
                    probe.queue_declare(name, passive=True)
                    probe.close()
                    time.sleep(0.1)
                except ChannelClosedByBroker as exc:
                    assert exc.reply_code == 404
                    break
            else:
                raise AssertionError(f"{name} still exists")


def test_delivery_limit_dead_letters_a_message_returned_too_often(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("limit-dead")
        ch.queue_declare("limited", durable=True, arguments={
            "x-queue-type": "quorum", "x-delivery-limit": 1, "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "limit-dead"})
        ch.basic_publish("", "limited", b"flaky")
        method, _, _ = _get(ch, "limited")
        ch.basic_nack(method.delivery_tag, requeue=True)  # returned once: within the limit
        method, _, body = _get(ch, "limited")
        assert body == b"flaky" and method.redelivered
        ch.basic_nack(method.delivery_tag, requeue=True)  # twice: over it
        assert _empty_for(ch, "limited")  # it left at that return
        method, props, body = _get(ch, "limit-dead")
        assert body == b"flaky" and props.headers["x-first-death-reason"] == "delivery_limit"
