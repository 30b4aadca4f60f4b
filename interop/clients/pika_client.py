"""pika: the most used Python AMQP 0-9-1 client (BlockingConnection)."""

from __future__ import annotations

import time
from importlib import metadata

import pika

from ..base import Client, Consume, In, Out
from . import amqp_common as ac


class Pika(Client):
    name = "pika"
    protocol = "amqp"
    fields = ac.FIELDS
    lacks = dict(ac.LACKS)
    precreate = False

    def version(self) -> str:
        return metadata.version("pika")

    def _connect(self) -> pika.BlockingConnection:
        host, port = self.ep.split(self.ep.amqp)
        creds = pika.PlainCredentials(self.creds.user, self.creds.secret) if self.creds else \
            pika.PlainCredentials("guest", "guest")
        return pika.BlockingConnection(pika.ConnectionParameters(
            host, port, credentials=creds, connection_attempts=1, blocked_connection_timeout=30))

    def prepare(self, topic: str, group: str, c: Consume) -> None:
        conn = self._connect()
        try:
            ch = conn.channel()
            ch.exchange_declare(topic, ac.EXCHANGE_TYPE, durable=True)
            ch.queue_declare(group, durable=True)
            for key in ac.binding_keys(c):
                ch.queue_bind(group, topic, key)
        finally:
            conn.close()

    def _publish(self, ch, topic: str, msgs: list[Out]) -> None:
        for m in msgs:
            ch.basic_publish(topic, ac.routing_key(m), m.body,
                             pika.BasicProperties(headers=ac.headers(m), delivery_mode=2))

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        conn = self._connect()
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.exchange_declare(topic, ac.EXCHANGE_TYPE, durable=True)
            self._publish(ch, topic, msgs)  # each publish waits for its confirm
        finally:
            if conn.is_open:
                conn.close()

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        conn = self._connect()
        try:
            ch = conn.channel()
            ch.exchange_declare(topic, ac.EXCHANGE_TYPE, durable=True)
            ch.tx_select()
            self._publish(ch, topic, commit)
            ch.tx_commit()
            self._publish(ch, topic, abort)
            ch.tx_rollback()
        finally:
            conn.close()

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        conn = self._connect()
        got: list[In] = []
        started, last = time.monotonic(), None
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=100)
            if c.ready is not None:
                c.ready.set()
            for method, props, body in ch.consume(group, inactivity_timeout=0.2):
                # one past the count asked for stays unacknowledged: back to the queue
                # when the channel closes
                if method is not None and (c.n is None or len(got) < c.n):
                    got.append(ac.received(body, method.routing_key, props.headers,
                                           method.redelivered))
                    last = time.monotonic()
                    if c.nack:
                        ch.basic_nack(method.delivery_tag, requeue=False)
                    else:
                        ch.basic_ack(method.delivery_tag)
                if c.done(len(got), started, last):
                    break
        finally:
            if conn.is_open:
                conn.close()
        return got


CLIENT = Pika
