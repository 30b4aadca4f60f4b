"""Heartbeats: an idle client that heartbeats stays connected; one that stops is closed
after two intervals, and the broker heartbeats while it is silent."""

from __future__ import annotations

import time

import pika
import pytest
from pamqp import heartbeat

from tests.protocols.amqp.raw_client import RawAmqp


def test_an_idle_pika_connection_survives_on_heartbeats(amqp_port):
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_port, heartbeat=2))
    try:
        ch = conn.channel()
        ch.queue_declare("idle")
        deadline = time.monotonic() + 8  # four heartbeat intervals of silence from the application
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.5)
        ch.basic_publish("", "idle", b"still here")
        assert conn.is_open
    finally:
        conn.close()


def test_a_silent_client_is_closed_and_the_broker_heartbeats_first(amqp_port):
    raw = RawAmqp(amqp_port, heartbeat=1)
    try:
        started = time.monotonic()
        kinds = []
        while True:
            channel, frame = raw.read_frame()
            if frame is None:
                break
            kinds.append(type(frame))
            assert time.monotonic() - started < 10
        assert heartbeat.Heartbeat in kinds
        assert 1.5 <= time.monotonic() - started < 6
    finally:
        raw.close()


def test_a_consuming_connection_without_heartbeats_is_not_idle(small_config):
    """The listener closes connections idle for serverChannelMaxIdleTimeSeconds; one whose
    consumer only receives (no_ack, heartbeats off) sends nothing, yet is in use."""
    from tests.protocols.amqp.conftest import amqp_config
    from tests.support.live_broker import start_live_broker
    live = start_live_broker(amqp_config(small_config, server_channel_max_idle_time_seconds=1))
    try:
        port = live.endpoint("amqp")[1]
        idle = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))
        consumer = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))
        ch = consumer.channel()
        ch.queue_declare("watched")
        ch.basic_consume("watched", lambda *a: None, auto_ack=True)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            consumer.process_data_events(time_limit=0.2)
        assert consumer.is_open
        with pytest.raises(pika.exceptions.AMQPConnectionError):  # the idle one was closed
            idle.process_data_events(time_limit=0.1)
        consumer.close()
    finally:
        live.stop()
