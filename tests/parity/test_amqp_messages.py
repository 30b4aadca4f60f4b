"""AMQP messages against RabbitMQ 3.10: what a consumer gets back (header types, properties,
counts, redelivery, size; priorities are in test_amqp_queue_parity.py). Each script names the RabbitMQ behaviour it checks;
pika unless it says otherwise (py-amqp is Celery's and kombu's client)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import datetime
from decimal import Decimal

import aio_pika
import amqp
import pika

from .amqp_client import closed, connection, drain, get, get_unacked, wait_for
from .harness import Peer, typed

# every field type pika writes: S x t I l D T F A V (and a str that is not ASCII; pika has
# no float)
PIKA_HEADERS = {
    "str": "text", "empty": "", "unicode": "h\u00e9llo", "bytes": b"\x00\xff\xfe",
    "int": 7, "negative": -3, "big": 2 ** 40, "true": True, "false": False,
    "decimal": Decimal("3.14"), "time": datetime(2026, 1, 2, 3, 4, 5), "none": None,
    "list": [1, "two", [3], {"four": 4}, None, True], "table": {"nested": {"deep": True}, "n": 1},
}
# what Celery 5 puts in a task message's headers, through py-amqp
CELERY_HEADERS = {
    "lang": "py", "task": "tasks.add", "id": "6c5d", "retries": 0, "eta": None, "expires": None,
    "timelimit": [None, None], "ignore_result": False, "stamps": {}, "group_index": None,
    "argsrepr": "(2, 3)", "replaced_task_nesting": 0, "parent_id": None,
}


def pika_typed_headers(peer: Peer) -> list:
    """RabbitMQ hands a header table back as it was published: every field type, nested."""
    with connection(peer) as conn:
        channel = conn.channel()
        queue = peer.name()
        channel.queue_declare(queue)
        properties = pika.BasicProperties(
            headers=PIKA_HEADERS, content_type="application/json", content_encoding="utf-8",
            delivery_mode=2, priority=3, correlation_id="c-1", reply_to="replies",
            message_id="m-1", timestamp=1767322800, type="kind", user_id="guest", app_id="app")
        channel.basic_publish("", queue, b"typed", properties)
        method, got, body = get(channel, queue)
        channel.queue_delete(queue)
        fields = ("content_type", "content_encoding", "delivery_mode", "priority", "correlation_id",
                  "reply_to", "message_id", "timestamp", "type", "user_id", "app_id")
        return [body, typed(got.headers), [typed(getattr(got, name)) for name in fields]]


def test_a_header_table_comes_back_with_its_types(parity):
    parity.assert_same(pika_typed_headers)


def py_amqp_celery_headers(peer: Peer) -> list:
    """RabbitMQ gives py-amqp (Celery's client) a task message's headers back typed: Celery
    unpacks ``timelimit`` as a pair and counts ``retries``."""
    with amqp.Connection(f"{peer.host}:{peer.amqp_port}", userid="guest", password="guest") as conn:
        channel = conn.channel()
        queue = peer.name()
        channel.queue_declare(queue, auto_delete=False)
        channel.basic_publish(amqp.Message(b"[[2, 3], {}, {}]", application_headers=CELERY_HEADERS,
                                           content_type="application/json"), "", queue)
        message = None
        for _ in range(500):  # bounded poll
            message = channel.basic_get(queue, no_ack=True)
            if message is not None:
                break
            time.sleep(0.02)
        channel.queue_delete(queue)
        assert message is not None
        return [message.body, typed(message.headers), message.content_type]


def test_py_amqp_gets_celerys_task_headers_typed(parity):
    observed = parity.assert_same(py_amqp_celery_headers)
    assert observed[1] == typed(CELERY_HEADERS)


# what aio-pika (pamqp) writes besides: floats, and ints sized to the smallest type (pamqp
# writes no byte arrays)
AIO_PIKA_HEADERS = {
    "float": 1.5, "small": 5, "short": 1000, "long": 70000, "longlong": 2 ** 40, "negative": -129,
    "decimal": Decimal("-0.5"), "time": datetime(2026, 1, 2, 3, 4, 5),
    "list": [1.25, None, ["x"]], "table": {"f": 2.5, "t": {"u": True}}, "none": None, "text": "t",
}


def aio_pika_typed_headers(peer: Peer) -> list:
    """RabbitMQ hands aio-pika's header table back typed (pamqp's field types)."""
    async def main() -> list:
        connection = await aio_pika.connect(peer.url)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(peer.name())
            await channel.default_exchange.publish(aio_pika.Message(b"typed", headers=AIO_PIKA_HEADERS),
                                                   routing_key=queue.name)
            message = None
            for _ in range(500):  # bounded poll
                message = await queue.get(no_ack=True, fail=False)
                if message is not None:
                    break
                await asyncio.sleep(0.02)
            await queue.delete()
            assert message is not None
            return [message.body, typed(message.headers)]
    return asyncio.run(asyncio.wait_for(main(), 30))


def test_aio_pika_gets_its_header_table_typed(parity):
    parity.assert_same(aio_pika_typed_headers)


def get_and_purge_counts(peer: Peer) -> list:
    """RabbitMQ's counts are of ready messages: declare-ok and basic.get-ok's message_count
    leave out what is delivered and unacknowledged, and so does purge-ok; delete-ok counts
    what the delete threw away (a requeued message included)."""
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        queue = peer.name()
        observed = [channel.queue_declare(queue).method.message_count]
        for i in range(5):
            channel.basic_publish("", queue, b"m%d" % i)
        observed.append(("declare-ok", channel.queue_declare(queue, passive=True).method.message_count))
        method, _, body = channel.basic_get(queue, auto_ack=False)
        observed.append(("get-ok", body, method.message_count, method.redelivered))
        observed.append(("declare-ok", channel.queue_declare(queue, passive=True).method.message_count))
        observed.append(("purge-ok", channel.queue_purge(queue).method.message_count))
        observed.append(("declare-ok", channel.queue_declare(queue, passive=True).method.message_count))
        channel.basic_nack(method.delivery_tag, requeue=True)
        again, _, body = get(channel, queue)
        observed.append(("get-ok", body, again.message_count, again.redelivered))
        channel.basic_publish("", queue, b"last")
        observed.append(("delete-ok", channel.queue_delete(queue).method.message_count))
        return observed


def test_get_purge_and_delete_count_ready_messages(parity):
    assert parity.assert_same(get_and_purge_counts) == [
        0, ("declare-ok", 5), ("get-ok", b"m0", 4, False), ("declare-ok", 4), ("purge-ok", 4),
        ("declare-ok", 0), ("get-ok", b"m0", 0, True), ("delete-ok", 1)]


def requeue_order(peer: Peer) -> list:
    """RabbitMQ puts a nacked or rejected message (requeue=true) back where it was, marked
    redelivered: gets after it see the queue's order as published."""
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        queue = peer.name()
        channel.queue_declare(queue)
        for i in range(4):
            channel.basic_publish("", queue, b"m%d" % i)
        tags = {}
        for _ in range(3):
            method, _, body = get_unacked(channel, queue)
            tags[body] = method.delivery_tag
        channel.basic_nack(tags[b"m1"], requeue=True)
        channel.basic_reject(tags[b"m0"], requeue=True)
        channel.basic_ack(tags[b"m2"])
        observed = []
        for _ in range(3):
            method, _, body = get_unacked(channel, queue)
            observed.append((body, method.redelivered))
            channel.basic_nack(method.delivery_tag, multiple=False, requeue=False)
        observed.append(channel.basic_get(queue)[0])
        channel.queue_delete(queue)
        return observed


def test_nack_and_reject_with_requeue_put_the_message_back_where_it_was(parity):
    assert parity.assert_same(requeue_order) == [
        (b"m0", True), (b"m1", True), (b"m3", False), None]


def consumer_requeue(peer: Peer) -> list:
    """A consumer's nack (requeue) comes back to it redelivered; nack with ``multiple``
    requeues every delivery up to the tag."""
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        queue = peer.name()
        channel.queue_declare(queue)
        for i in range(3):
            channel.basic_publish("", queue, b"m%d" % i)
        channel.basic_qos(prefetch_count=3)
        seen = []
        for method, _, body in channel.consume(queue, inactivity_timeout=10):
            assert method is not None, seen
            seen.append((body, method.redelivered))
            if len(seen) == 3:
                channel.basic_nack(method.delivery_tag, multiple=True, requeue=True)
            elif len(seen) > 3:
                channel.basic_ack(method.delivery_tag)
            if len(seen) == 6:
                break
        channel.cancel()
        channel.queue_delete(queue)
        return seen


def test_a_consumers_nack_multiple_requeues_all_redelivered(parity):
    assert parity.assert_same(consumer_requeue) == [
        (b"m0", False), (b"m1", False), (b"m2", False), (b"m0", True), (b"m1", True), (b"m2", True)]


BIG = 22_000_000


def big_message(peer: Peer) -> list:
    """RabbitMQ 3.10 takes messages up to max_message_size, 128 MiB by default: a 22 MB
    publish is confirmed and comes back whole."""
    body = bytes(range(256)) * (BIG // 256) + b"x" * (BIG % 256)
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        queue = peer.name()
        channel.queue_declare(queue)
        try:
            channel.basic_publish("", queue, body)
        except pika.exceptions.ChannelClosedByBroker as e:
            return [("publish refused", closed(e))]
        got = get(channel, queue, timeout=30)
        channel.queue_delete(queue)
        assert got is not None
        return [len(got[2]), hashlib.sha256(got[2]).hexdigest() == hashlib.sha256(body).hexdigest()]


def test_a_22_mb_message_is_taken_and_comes_back_whole(parity):
    assert parity.assert_same(big_message) == [BIG, True]


def cancel_keeps_unacked(peer: Peer) -> list:
    """basic.cancel stops deliveries but leaves the consumer's unacknowledged ones on its
    channel (RabbitMQ): another consumer does not get them, and the late ack settles them.
    Celery's warm shutdown relies on it (cancel, finish the running tasks, ack, close)."""
    with connection(peer) as conn:
        channel = conn.channel()
        channel.confirm_delivery()
        queue = peer.name()
        channel.queue_declare(queue)
        for i in range(2):
            channel.basic_publish("", queue, b"m%d" % i)
        channel.basic_qos(prefetch_count=1)
        delivered: list = []
        tag = channel.basic_consume(queue, lambda _ch, method, _p, body: delivered.append((method.delivery_tag, body)))
        wait_for(conn, lambda: delivered)
        channel.basic_cancel(tag)
        other = conn.channel()
        observed = [[body for _, body in delivered], drain(other, queue)]
        channel.basic_ack(delivered[0][0])
        other.queue_declare(queue, passive=True)  # a round trip after the ack
        observed += [drain(other, queue), channel.is_open]
        channel.queue_delete(queue)
        return observed


def test_a_cancelled_consumers_unacked_deliveries_stay_with_its_channel(parity):
    assert parity.assert_same(cancel_keeps_unacked) == [[b"m0"], [b"m1"], [], True]
