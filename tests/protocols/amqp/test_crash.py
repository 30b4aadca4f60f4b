"""What a publisher confirm promises for a durable queue survives a SIGKILL of the broker
process, as in RabbitMQ: messages confirmed into a durable queue (through the default
exchange, and through a durable exchange bound after the queue was declared) are all there
after the restart, though nobody consumed them before the kill. The periodic offsets flush
is set to an hour, so the queue's start position can only have been kept by its declare."""

from __future__ import annotations

import re

import pika

from tests.support.processes import start_broker, stop, wait_ready

SETTINGS = ("listenPort=0", "namesrv.port=0", "kafka.enabled=false",
            "flushConsumerOffsetInterval=3600000")


def _port(log: str) -> int:
    return int(re.search(r"amqp listening on 127\.0\.0\.1:(\d+)", log).group(1))


def _channel(port: int) -> tuple[pika.BlockingConnection, object]:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    ch = conn.channel()
    ch.confirm_delivery()
    return conn, ch


def _bodies(ch, queue: str) -> list[bytes]:
    got = []
    for _ in range(100):  # bounded: far more gets than the queue holds
        method, _, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            break
        got.append(body)
    return got


def test_confirmed_messages_of_a_durable_queue_survive_a_sigkill(tmp_path):
    root = tmp_path / "store"
    proc = start_broker(root, *SETTINGS)
    try:
        conn, ch = _channel(_port(wait_ready(proc)))
        ch.queue_declare("crash-q", durable=True)
        ch.exchange_declare("crash-x", "fanout", durable=True)
        ch.queue_declare("crash-bound", durable=True)
        ch.queue_bind("crash-bound", "crash-x")
        for i in range(10):  # each publish returns once confirmed
            ch.basic_publish("", "crash-q", b"d%d" % i, pika.BasicProperties(delivery_mode=2))
            ch.basic_publish("crash-x", "", b"x%d" % i, pika.BasicProperties(delivery_mode=2))
    finally:
        proc.kill()  # SIGKILL right after the last confirm
        proc.wait()
    again = start_broker(root, *SETTINGS)
    try:
        conn, ch = _channel(_port(wait_ready(again)))
        assert _bodies(ch, "crash-q") == [b"d%d" % i for i in range(10)]
        assert _bodies(ch, "crash-bound") == [b"x%d" % i for i in range(10)]
        conn.close()
    finally:
        stop(again)
