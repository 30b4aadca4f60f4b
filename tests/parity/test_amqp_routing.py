"""AMQP routing and queue arguments against RabbitMQ 3.10, beside the queue cases of
test_amqp_queue_parity.py (TTL, dead-lettering, x-death, x-max-length overflow modes):
exchange-to-exchange chains, what an unbind does to messages already routed, the byte length
limit, unused-queue expiry."""

from __future__ import annotations

import time

import pika
import pika.exceptions
import pytest

from .amqp_client import connection, drain
from .harness import Peer


def exchange_chain(peer: Peer) -> list:
    """exchange.bind: RabbitMQ routes a publish through a source exchange to the bound
    destination exchange (by the binding's key), on through chains (a fanout destination
    ignores its keys), and after exchange.unbind no longer does."""
    source, destination, chained = peer.name("src"), peer.name("dst"), peer.name("chained")
    queues = via_binding, direct, via_chain = peer.name("q-dst"), peer.name("q-src"), peer.name("q-chained")
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        channel.exchange_declare(source, "topic")
        channel.exchange_declare(destination, "fanout")
        channel.exchange_declare(chained, "direct")
        channel.exchange_bind(destination, source, routing_key="a.*")
        channel.exchange_bind(chained, destination, routing_key="ignored-by-fanout")
        for queue, exchange, key in ((via_binding, destination, ""), (direct, source, "#"),
                                     (via_chain, chained, "a.b")):
            channel.queue_declare(queue)
            channel.queue_bind(queue, exchange, key)
        for key in ("a.b", "c.d", "a.c"):
            channel.basic_publish(source, key, key.encode(), mandatory=True)
        observed = [drain(channel, queue) for queue in queues]
        channel.exchange_unbind(destination, source, routing_key="a.*")
        channel.basic_publish(source, "a.b", b"after unbind")
        observed += [drain(channel, queue) for queue in queues]
        for queue in queues:
            channel.queue_delete(queue)
        for exchange in (source, destination, chained):
            channel.exchange_delete(exchange)
        return observed


def test_an_exchange_bound_to_an_exchange_routes_through_chains(parity):
    assert parity.assert_same(exchange_chain) == [
        [b"a.b", b"a.c"], [b"a.b", b"c.d", b"a.c"], [b"a.b"], [], [b"after unbind"], []]


def unbind_keeps_what_was_routed(peer: Peer, kind: str) -> list:
    """RabbitMQ routes at publish: a message in a queue stays there when the binding that
    brought it goes (queue.unbind, or exchange.unbind upstream); later ones do not come."""
    source, destination, queue = peer.name("src"), peer.name("dst"), peer.name()
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        channel.exchange_declare(source, "topic")
        channel.queue_declare(queue)
        if kind == "exchange.unbind":
            channel.exchange_declare(destination, "fanout")
            channel.exchange_bind(destination, source, routing_key="a.*")
            channel.queue_bind(queue, destination)
        else:
            channel.queue_bind(queue, source, "a.*")
        channel.basic_publish(source, "a.b", b"before")
        observed = [channel.queue_declare(queue, passive=True).method.message_count]
        if kind == "exchange.unbind":
            channel.exchange_unbind(destination, source, routing_key="a.*")
        else:
            channel.queue_unbind(queue, source, "a.*")
        channel.basic_publish(source, "a.c", b"after")
        observed += [channel.queue_declare(queue, passive=True).method.message_count, drain(channel, queue)]
        channel.queue_delete(queue)
        channel.exchange_delete(source)
        if kind == "exchange.unbind":
            channel.exchange_delete(destination)
        return observed


@pytest.mark.parametrize("kind", ["queue.unbind", "exchange.unbind"])
def test_an_unbind_leaves_what_was_routed_in_the_queue(parity, kind):
    assert parity.assert_same(unbind_keeps_what_was_routed, kind) == [1, 1, [b"before"]]


def length_in_bytes(peer: Peer) -> list:
    """x-max-length-bytes counts bodies: RabbitMQ keeps the newest that fit (drop-head)."""
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        queue = peer.name()
        channel.queue_declare(queue, arguments={"x-max-length-bytes": 10})
        for i in range(4):
            channel.basic_publish("", queue, b"b%03d" % i)
        observed = [channel.queue_declare(queue, passive=True).method.message_count, drain(channel, queue)]
        channel.queue_delete(queue)
        return observed


def test_a_byte_length_limit_keeps_the_newest_that_fit(parity):
    assert parity.assert_same(length_in_bytes) == [2, [b"b002", b"b003"]]


LEASE_MS = 200


def unused_queue_expires(peer: Peer) -> list:
    """x-expires: RabbitMQ deletes a queue unused (no consumer, no basic.get, no redeclare)
    for that long. Any probe (a passive declare) is a use that starts the lease again, so the
    script leaves the queue alone well past its lease (the behaviour is "after so long"),
    then probes once: 404."""
    queue, kept = peer.name("expiring"), peer.name("consumed")
    with connection(peer) as conn:
        channel = conn.channel()
        channel.queue_declare(queue, arguments={"x-expires": LEASE_MS})
        channel.queue_declare(kept, arguments={"x-expires": LEASE_MS})
        channel.basic_consume(kept, lambda *a: None)  # a consumer keeps it in use
        deadline = time.monotonic() + 8 * LEASE_MS / 1000 + 1.0
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        observed = []
        for name in (queue, kept):
            probe = conn.channel()
            try:
                probe.queue_declare(name, passive=True)
                observed.append("there")
                probe.close()
            except pika.exceptions.ChannelClosedByBroker as e:
                observed.append(e.reply_code)
        channel.queue_delete(kept)
        return observed


def test_an_unused_queue_expires_and_a_consumed_one_stays(parity):
    assert parity.assert_same(unused_queue_expires) == [404, "there"]
