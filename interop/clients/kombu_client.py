"""kombu (Celery's messaging library) on its py-amqp transport."""

from __future__ import annotations

import socket
import time
from importlib import metadata

import kombu

from ..base import Client, Consume, In, Out
from . import amqp_common as ac


class Kombu(Client):
    name = "kombu"
    protocol = "amqp"
    fields = ac.FIELDS
    lacks = dict(ac.LACKS)
    precreate = False

    def version(self) -> str:
        return f"{metadata.version('kombu')} (py-amqp {metadata.version('amqp')})"

    def _connection(self, confirm: bool = True) -> kombu.Connection:
        host, port = self.ep.split(self.ep.amqp)
        user, password = (self.creds.user, self.creds.secret) if self.creds else ("guest", "guest")
        # confirm_publish: each publish waits for the broker's confirm
        return kombu.Connection(hostname=host, port=port, userid=user, password=password,
                                transport="pyamqp", connect_timeout=10,
                                transport_options={"confirm_publish": confirm})

    def _queue(self, topic: str, group: str, c: Consume) -> list[kombu.Queue]:
        ex = kombu.Exchange(topic, type=ac.EXCHANGE_TYPE, durable=True)
        return [kombu.Queue(group, ex, routing_key=key, durable=True) for key in ac.binding_keys(c)]

    def prepare(self, topic: str, group: str, c: Consume) -> None:
        with self._connection() as conn:
            for q in self._queue(topic, group, c):
                q(conn.default_channel).declare()

    def produce(self, topic: str, msgs: list[Out], *, ordered: bool = False,
                compression: str | None = None) -> None:
        with self._connection() as conn:
            ex = kombu.Exchange(topic, type=ac.EXCHANGE_TYPE, durable=True)
            producer = conn.Producer(exchange=ex)
            ex(producer.channel).declare()
            for m in msgs:
                producer.publish(m.body, routing_key=ac.routing_key(m), headers=ac.headers(m),
                                 serializer=None, content_type="application/octet-stream",
                                 content_encoding="binary", delivery_mode=2)

    def transaction(self, topic: str, commit: list[Out], abort: list[Out]) -> None:
        with self._connection(confirm=False) as conn:  # a channel is in tx or confirm mode
            ch = conn.default_channel
            ex = kombu.Exchange(topic, type=ac.EXCHANGE_TYPE, durable=True)
            ex(ch).declare()
            producer = conn.Producer(channel=ch, exchange=ex)
            ch.tx_select()
            for msgs, end in ((commit, ch.tx_commit), (abort, ch.tx_rollback)):
                for m in msgs:
                    producer.publish(m.body, routing_key=ac.routing_key(m), headers=ac.headers(m),
                                     serializer=None, content_type="application/octet-stream",
                                     content_encoding="binary")
                end()

    def consume(self, topic: str, group: str, c: Consume) -> list[In]:
        got: list[In] = []

        def on_message(body, message) -> None:
            if c.n is not None and len(got) >= c.n:
                return  # unacknowledged: back to the queue at close
            got.append(ac.received(message.body, message.delivery_info.get("routing_key"),
                                   message.headers, bool(message.delivery_info.get("redelivered"))))
            last[0] = time.monotonic()
            if c.nack:
                message.reject(requeue=False)
            else:
                message.ack()

        last: list[float | None] = [None]
        with self._connection() as conn:
            queue = kombu.Queue(group, no_declare=True)
            with conn.Consumer(queue, callbacks=[on_message], prefetch_count=100, accept=None):
                if c.ready is not None:
                    c.ready.set()
                started = time.monotonic()
                while not c.done(len(got), started, last[0]):
                    try:
                        conn.drain_events(timeout=0.2)
                    except socket.timeout:
                        pass
        return got


CLIENT = Kombu
