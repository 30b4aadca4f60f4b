"""Big AMQP messages: what RabbitMQ 3.x takes (max_message_size, 128 MiB by default) is
AMQP's limit here too (amqp.maxMessageSize), while remoting keeps RocketMQ's
maxMessageSize; over the limit is RabbitMQ's 406 on the channel."""

from __future__ import annotations

import dataclasses
import hashlib

import pika
import pytest

from rocketport.core.config import BrokerConfig, ProtocolConfig
from tests.protocols.amqp.conftest import amqp_config
from tests.support.live_broker import start_live_broker

SIZE = 22_000_000  # the publish the issue names


@pytest.fixture
def big_broker(small_config):
    """Default limits (RabbitMQ's for AMQP, RocketMQ's for the broker), segments that hold
    a 22 MB record."""
    config = dataclasses.replace(amqp_config(small_config), mapped_file_size_commit_log=64 << 20,
                                 amqp=dataclasses.replace(BrokerConfig().amqp, port=0))  # its default limit
    assert config.max_message_size == 4 << 20 and config.message_size_of(config.amqp) == 128 << 20
    live = start_live_broker(config)
    try:
        yield live
    finally:
        live.stop()


def test_a_22_mb_publish_is_confirmed_and_delivered_whole_to_pika(big_broker):
    port = big_broker.endpoint("amqp")[1]
    body = hashlib.sha256(b"seed").digest() * (SIZE // 32) + b"z" * (SIZE % 32)
    assert len(body) == SIZE
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, blocked_connection_timeout=60)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("big")
        ch.basic_publish("", "big", body, pika.BasicProperties(headers={"n": 1}), mandatory=True)
        method, props, got = next(ch.consume("big", auto_ack=True, inactivity_timeout=60))
        ch.cancel()
    assert method is not None and len(got) == SIZE and got == body and props.headers == {"n": 1}


def test_over_amqp_max_message_size_is_406_on_the_channel(small_config):
    config = dataclasses.replace(amqp_config(small_config), amqp=ProtocolConfig(True, 0, max_message_size=1 << 20))
    live = start_live_broker(config)
    try:
        port = live.endpoint("amqp")[1]
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
            ch = conn.channel()
            ch.queue_declare("big")
            ch.basic_publish("", "big", b"x" * ((1 << 20) + 1))
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
                ch.queue_declare("big", passive=True)
            assert refused.value.reply_code == 406
            assert refused.value.reply_text == ("PRECONDITION_FAILED - message size 1048577 is larger than "
                                                "configured max size 1048576")  # RabbitMQ's words
            ch = conn.channel()
            ch.basic_publish("", "big", b"x" * (1 << 20))  # at the limit: taken
            assert ch.queue_declare("big", passive=True).method.message_count == 1
    finally:
        live.stop()
