"""`rocketport admin amqpExchanges` / `amqpQueues`: what pika declared, bound and consumes,
read through the remoting front-end from the CLI (subprocess), as an operator would."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import orjson
import pika
import pytest

from rocketport.core.config import ProtocolConfig
from tests.support.live_broker import start_live_broker
from tests.support.remoting import free_port


def admin(namesrv: str, *args: str, expect: int = 0) -> str:
    env = dict(os.environ, COLUMNS="400", TERM="dumb")
    proc = subprocess.run([sys.executable, "-m", "rocketport", "admin", *args, "-n", namesrv],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return proc.stdout if expect == 0 else proc.stderr


@pytest.fixture
def broker(small_config):
    config = dataclasses.replace(small_config, listen_port=free_port(), namesrv=ProtocolConfig(True, 0),
                                 kafka=ProtocolConfig(False, 0), amqp=ProtocolConfig(True, 0),
                                 mapped_file_size_commit_log=4 << 20)
    live = start_live_broker(config)
    try:
        yield live
    finally:
        live.stop()


@pytest.mark.timeout(120)
def test_admin_lists_exchanges_and_queues_with_bindings_consumers_and_ready_messages(broker):
    params = pika.ConnectionParameters("127.0.0.1", broker.endpoint("amqp")[1], connection_attempts=3)
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.exchange_declare("orders", "topic", durable=True)
        ch.exchange_declare("audit", "fanout", durable=False, auto_delete=True)
        ch.exchange_bind("audit", "orders", "order.#")
        ch.queue_declare("eu-orders", durable=True, arguments={"x-max-length": 100})
        ch.queue_bind("eu-orders", "orders", "order.eu.*")
        ch.queue_declare("watched", durable=True)
        ch.queue_bind("watched", "orders", "order.#")
        ch.confirm_delivery()
        for _ in range(3):
            ch.basic_publish("orders", "order.eu.new", b"x", pika.BasicProperties(delivery_mode=2))
        ch.basic_qos(prefetch_count=1)
        ch.basic_consume("watched", lambda *a: None)
        conn.process_data_events(time_limit=0.5)

        queues = {q["name"]: q for q in orjson.loads(admin(broker.namesrv, "amqpQueues", "--output", "json"))}
        assert queues["eu-orders"]["bindings"] == ["orders -> order.eu.*"]
        assert queues["eu-orders"]["arguments"] == {"x-max-length": 100}
        assert queues["eu-orders"]["durable"] is True and queues["eu-orders"]["consumers"] == 0
        assert queues["eu-orders"]["messagesReady"] == 3
        assert queues["watched"]["consumers"] == 1
        # one of its three is held by the consumer (prefetch 1), two wait
        assert queues["watched"]["messagesReady"] == 2

        exchanges = {e["name"]: e for e in orjson.loads(admin(broker.namesrv, "amqpExchanges", "--output", "json"))}
        assert exchanges["orders"]["type"] == "topic" and exchanges["orders"]["durable"] is True
        assert exchanges["orders"]["boundTo"] == ["audit <- order.#"]
        assert exchanges["audit"]["autoDelete"] is True and exchanges["audit"]["durable"] is False
        assert {"amq.direct", "amq.topic", "amq.fanout", "amq.headers"} <= exchanges.keys()

        table = admin(broker.namesrv, "amqpQueues", "--output", "table")
        assert "eu-orders" in table and "order.eu.*" in table


@pytest.mark.timeout(60)
def test_admin_amqp_view_on_a_broker_without_amqp_says_so(small_config):
    config = dataclasses.replace(small_config, listen_port=free_port(), namesrv=ProtocolConfig(True, 0),
                                 kafka=ProtocolConfig(False, 0), mapped_file_size_commit_log=4 << 20)
    live = start_live_broker(config)
    try:
        assert "no front-end view 'amqp'" in admin(live.namesrv, "amqpQueues", expect=1)
    finally:
        live.stop()
