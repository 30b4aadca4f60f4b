"""Durable declarations and unacknowledged messages survive a broker restart; transient
ones do not, as in RabbitMQ."""

from __future__ import annotations

import pika
from pika.exceptions import ChannelClosedByBroker

from tests.protocols.amqp.conftest import amqp_config
from tests.protocols.amqp.test_pika import _drain, _get
from tests.support.live_broker import start_live_broker


def test_durable_entities_and_unacked_messages_survive_a_restart(small_config):
    config = amqp_config(small_config)
    live = start_live_broker(config)
    try:
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", live.endpoint("amqp")[1])) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.exchange_declare("durable-x", "topic", durable=True)
            ch.queue_declare("durable-q", durable=True)
            ch.queue_bind("durable-q", "durable-x", "keep.#")
            ch.exchange_declare("transient-x", "fanout", durable=False)
            ch.queue_declare("transient-q", durable=False)
            for i in range(3):
                ch.basic_publish("durable-x", "keep.it", b"%d" % i, pika.BasicProperties(delivery_mode=2))
            method, _, body = _get(ch, "durable-q")
            assert body == b"0"
            ch.basic_ack(method.delivery_tag)
            _get(ch, "durable-q")  # "1" stays unacknowledged: redelivered after the restart
    finally:
        live.stop()
    live = start_live_broker(config)
    try:
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", live.endpoint("amqp")[1])) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("durable-x", "keep.after", b"after")
            got = _drain(ch, "durable-q", 3)
            assert [b for _, _, b in got] == [b"1", b"2", b"after"]
            for name, declare in (("transient-x", lambda c: c.exchange_declare("transient-x", passive=True)),
                                  ("transient-q", lambda c: c.queue_declare("transient-q", passive=True))):
                try:
                    declare(conn.channel())
                    raise AssertionError(f"{name} survived the restart")
                except ChannelClosedByBroker as exc:
                    assert exc.reply_code == 404
    finally:
        live.stop()


def test_a_declared_queue_needs_no_auto_created_group(small_config):
    live = start_live_broker(amqp_config(small_config, auto_create_subscription_group=False))
    try:
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", live.endpoint("amqp")[1])) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("explicit")
            ch.basic_publish("", "explicit", b"served")
            assert _get(ch, "explicit")[2] == b"served"
    finally:
        live.stop()


def test_a_broker_shutdown_closes_connections_with_connection_forced(small_config):
    from pika.exceptions import ConnectionClosedByBroker
    live = start_live_broker(amqp_config(small_config))
    stopped = False
    try:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", live.endpoint("amqp")[1]))
        conn.channel().queue_declare("q")
        live.stop()
        stopped = True
        try:
            conn.process_data_events(time_limit=2)
            raise AssertionError("the connection is still open")
        except ConnectionClosedByBroker as exc:
            assert exc.reply_code == 320
    finally:
        if not stopped:
            live.stop()
