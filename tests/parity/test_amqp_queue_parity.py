"""AMQP queue semantics side by side with RabbitMQ 3.10 (issue [rabbitmq-parity]): TTL and
dead-lettering with x-death, length limits and their overflow modes, message counts,
priorities, exchange-to-exchange bindings, the server's basic.cancel, basic.return and
channel-level errors. Each script runs on both brokers (tests/parity/harness.py)."""

from __future__ import annotations

import asyncio
import time

import aio_pika
import pika
import pytest
from aio_pika.patterns import RPC, JsonRPC
from pika.exceptions import ChannelClosedByBroker, NackError

from .harness import Peer, typed

TIMEOUT_S = 10.0


def _connect(peer: Peer) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(peer.url))


def _get(channel, queue: str, timeout_s: float = TIMEOUT_S):
    """basic.get until a message comes (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        if method is not None or time.monotonic() > deadline:
            return method, properties, body
        time.sleep(0.02)


def _get_unacked(channel, queue: str):
    """basic.get (to be acknowledged) until a message comes (bounded)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        method, properties, body = channel.basic_get(queue)
        if method is not None or time.monotonic() > deadline:
            return method, properties, body
        time.sleep(0.02)


def _count(channel, queue: str) -> int:
    return channel.queue_declare(queue, passive=True).method.message_count


def _count_becomes(channel, queue: str, wanted: int, timeout_s: float = TIMEOUT_S) -> int:
    """The queue's message count once it is ``wanted`` (or the last seen, after the bound)."""
    deadline = time.monotonic() + timeout_s
    while True:
        count = _count(channel, queue)
        if count == wanted or time.monotonic() > deadline:
            return count
        time.sleep(0.02)


def _deaths(headers: dict | None) -> list:
    """x-death and x-first-death-* as typed values; each death's time by its type only."""
    headers = headers or {}
    deaths = headers.get("x-death")
    if isinstance(deaths, list):
        deaths = [typed({k: (type(v).__name__ if k == "time" else v) for k, v in d.items()}) for d in deaths]
    else:
        deaths = typed(deaths)
    return [deaths] + [typed(headers.get(k)) for k in
                       ("x-first-death-reason", "x-first-death-queue", "x-first-death-exchange",
                        "x-last-death-reason")]


def expiry_without_consumer(peer: Peer) -> list:
    """A queue with x-message-ttl nobody consumes: its messages reach the dead-letter
    exchange on time, with x-death, and leave the queue's count."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        dlx, sink, wait = peer.name("dlx"), peer.name("sink"), peer.name("wait")
        channel.exchange_declare(dlx, "fanout")
        channel.queue_declare(sink)
        channel.queue_bind(sink, dlx)
        channel.queue_declare(wait, arguments={"x-message-ttl": 200, "x-dead-letter-exchange": dlx})
        for i in range(3):
            channel.basic_publish("", wait, b"m%d" % i, pika.BasicProperties(
                headers={"n": i, "ok": True, "tags": ["a", 1]}))
        observed: list = [_count_becomes(channel, sink, 3), _count(channel, wait)]
        for _ in range(3):
            method, properties, body = _get(channel, sink)
            observed.append((body, method.exchange, method.routing_key, properties.expiration,
                             typed({k: properties.headers.get(k) for k in ("n", "ok", "tags")}),
                             _deaths(properties.headers)))
        for name in (sink, wait):
            channel.queue_delete(name)
        channel.exchange_delete(dlx)
        return observed


def per_message_expiration_from_the_head(peer: Peer) -> list:
    """A message's own expiration: it leaves from the head only (a long-lived message
    first keeps a short-lived one behind it), and the copy keeps it as original-expiration."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        dlx, sink, queue = peer.name("dlx"), peer.name("sink"), peer.name("q")
        channel.exchange_declare(dlx, "fanout")
        channel.queue_declare(sink)
        channel.queue_bind(sink, dlx)
        channel.queue_declare(queue, arguments={"x-dead-letter-exchange": dlx})
        channel.basic_publish("", queue, b"short", pika.BasicProperties(expiration="100"))
        channel.basic_publish("", queue, b"long", pika.BasicProperties(expiration="60000"))
        channel.basic_publish("", queue, b"behind", pika.BasicProperties(expiration="100"))
        observed: list = [_count_becomes(channel, sink, 1)]
        time.sleep(0.3)  # "behind" is past its time, but not at the head: it stays
        observed.append(_count(channel, queue))
        method, properties, body = _get(channel, sink)
        observed.append((body, properties.expiration, _deaths(properties.headers)))
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        observed.append((body, properties.expiration))
        observed.append(channel.basic_get(queue, auto_ack=True)[2])  # "behind" expired at the head
        observed.append(_count_becomes(channel, sink, 1))
        for name in (sink, queue):
            channel.queue_delete(name)
        channel.exchange_delete(dlx)
        return observed


def ttl_zero(peer: Peer) -> list:
    """x-message-ttl 0: delivered to a waiting consumer, else dead-lettered at once."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        dlx, sink, queue = peer.name("dlx"), peer.name("sink"), peer.name("now")
        channel.exchange_declare(dlx, "fanout")
        channel.queue_declare(sink)
        channel.queue_bind(sink, dlx)
        channel.queue_declare(queue, arguments={"x-message-ttl": 0, "x-dead-letter-exchange": dlx})
        consumer = connection.channel()
        got: list = []
        tag = consumer.basic_consume(queue, lambda ch, method, props, body: got.append(body), auto_ack=True)
        channel.basic_publish("", queue, b"taken")
        deadline = time.monotonic() + TIMEOUT_S
        while not got and time.monotonic() < deadline:
            connection.process_data_events(0.02)
        consumer.basic_cancel(tag)
        channel.basic_publish("", queue, b"nobody")
        observed = [got, _count_becomes(channel, sink, 1), _get(channel, sink)[2], _count(channel, queue)]
        for name in (sink, queue):
            channel.queue_delete(name)
        channel.exchange_delete(dlx)
        return observed


def dead_letter_retry_rounds(peer: Peer) -> list:
    """The delayed-retry pattern: a rejected job waits in a TTL queue that dead-letters it
    back; x-death counts each round per queue and reason."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        work_x, wait_x, work, wait = (peer.name("work-x"), peer.name("wait-x"), peer.name("work"),
                                      peer.name("wait"))
        channel.exchange_declare(work_x, "direct")
        channel.exchange_declare(wait_x, "direct")
        channel.queue_declare(work, arguments={"x-dead-letter-exchange": wait_x})
        channel.queue_bind(work, work_x, "job")
        channel.queue_declare(wait, arguments={"x-message-ttl": 100, "x-dead-letter-exchange": work_x})
        channel.queue_bind(wait, wait_x, "job")
        channel.basic_publish(work_x, "job", b"job", pika.BasicProperties(headers={"k": "v"}))
        observed = []
        for _ in range(3):
            method, properties, body = None, None, None
            deadline = time.monotonic() + TIMEOUT_S
            while method is None and time.monotonic() < deadline:
                method, properties, body = channel.basic_get(work)
                time.sleep(0.02)
            observed.append((body, method.exchange, method.routing_key, method.redelivered,
                             _deaths(properties.headers)))
            channel.basic_reject(method.delivery_tag, requeue=False)
        for name in (work, wait):
            channel.queue_delete(name)
        for name in (work_x, wait_x):
            channel.exchange_delete(name)
        return observed


def overflow_modes(peer: Peer) -> list:
    """x-max-length with drop-head (the head dead-lettered, reason maxlen), reject-publish
    (the publish nacked) and reject-publish-dlx (nacked and dead-lettered)."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        dlx, sink = peer.name("dlx"), peer.name("sink")
        channel.exchange_declare(dlx, "fanout")
        channel.queue_declare(sink)
        channel.queue_bind(sink, dlx)
        observed: list = []
        queues = []
        for mode in ("drop-head", "reject-publish", "reject-publish-dlx"):
            queue = peer.name(mode)
            queues.append(queue)
            channel.queue_declare(queue, arguments={"x-max-length": 2, "x-overflow": mode,
                                                    "x-dead-letter-exchange": dlx})
            for i in range(3):
                try:
                    channel.basic_publish("", queue, b"%s-%d" % (mode.encode(), i))
                    observed.append((mode, i, "ack"))
                except NackError:
                    observed.append((mode, i, "nack"))
            observed.append((mode, _count(channel, queue)))
            observed.append([channel.basic_get(queue, auto_ack=True)[2] for _ in range(3)])
        observed.append(_count_becomes(channel, sink, 2))
        for _ in range(2):
            method, properties, body = _get(channel, sink)
            observed.append((body, method.routing_key, _deaths(properties.headers)))
        unconfirmed = connection.channel()  # no confirms: a refused publish is dropped
        queue = peer.name("plain")
        queues.append(queue)
        unconfirmed.queue_declare(queue, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
        for body in (b"a", b"b"):
            unconfirmed.basic_publish("", queue, body)
        observed.append([_get(unconfirmed, queue, 1.0)[2], unconfirmed.basic_get(queue)[2]])
        for name in [sink, *queues]:
            channel.queue_delete(name)
        channel.exchange_delete(dlx)
        return observed


def max_length_bytes(peer: Peer) -> list:
    """x-max-length-bytes counts the bodies of ready messages: drop-head and reject-publish."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        observed: list = []
        for mode in ("drop-head", "reject-publish"):
            queue = peer.name(mode)
            channel.queue_declare(queue, arguments={"x-max-length-bytes": 10, "x-overflow": mode})
            for body in (b"aaaa", b"bbbb", b"cc", b"dddd", b"e"):
                try:
                    channel.basic_publish("", queue, body)
                    observed.append((mode, body, "ack"))
                except NackError:
                    observed.append((mode, body, "nack"))
            observed.append(_count(channel, queue))
            observed.append([channel.basic_get(queue, auto_ack=True)[2] for _ in range(5)])
            channel.queue_delete(queue)
        return observed


def unused_queue_expires(peer: Peer) -> list:
    """x-expires: a queue unused for that long is deleted; a consumer keeps it."""
    with _connect(peer) as connection:
        channel = connection.channel()
        idle, held = peer.name("idle"), peer.name("held")
        for name in (idle, held):
            channel.queue_declare(name, arguments={"x-expires": 300})
        channel.basic_consume(held, lambda *a: None)
        # the queue must stay unused, so nothing may look at it until then (a passive
        # declare may renew the lease): 300 ms, and up to a second of Rocketport's sweep
        time.sleep(1.5)
        gone: object = "there"
        try:
            connection.channel().queue_declare(idle, passive=True)
        except ChannelClosedByBroker as e:
            gone = e.reply_code
        observed: list = [gone]
        observed.append(channel.queue_declare(held, passive=True).method.consumer_count)
        channel.queue_delete(held)
        return observed


def default_exchange_dead_letter(peer: Peer) -> list:
    """x-dead-letter-exchange "" with a routing key naming a queue (a common retry setup),
    and a dead-letter exchange that does not exist (the message is dropped)."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        target, source, lost = peer.name("target"), peer.name("source"), peer.name("lost")
        channel.queue_declare(target)
        channel.queue_declare(source, arguments={"x-message-ttl": 50, "x-dead-letter-exchange": "",
                                                 "x-dead-letter-routing-key": target})
        channel.queue_declare(lost, arguments={"x-message-ttl": 50, "x-dead-letter-exchange": peer.name("nox")})
        channel.basic_publish("", source, b"retry-me")
        channel.basic_publish("", lost, b"gone")
        method, properties, body = _get(channel, target)
        observed = [body, method.exchange, method.routing_key, _deaths(properties.headers),
                    _count_becomes(channel, lost, 0)]
        for name in (target, source, lost):
            channel.queue_delete(name)
        return observed


def dead_letter_cycle(peer: Peer) -> list:
    """A TTL queue dead-lettering into a fanout exchange it is bound to itself: the copy
    reaches the other queue once and is dropped at the cycling one (RabbitMQ's cycle
    detection), however long one waits."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        loop_x, looping, sink = peer.name("loop-x"), peer.name("looping"), peer.name("sink")
        channel.exchange_declare(loop_x, "fanout")
        channel.queue_declare(looping, arguments={"x-message-ttl": 50, "x-dead-letter-exchange": loop_x})
        channel.queue_declare(sink)
        channel.queue_bind(looping, loop_x)
        channel.queue_bind(sink, loop_x)
        channel.basic_publish("", looping, b"round")
        observed: list = [_count_becomes(channel, sink, 1)]
        time.sleep(0.5)  # ten TTLs: a loop would have put more copies in the sink by now
        observed += [_count(channel, sink), _count_becomes(channel, looping, 0)]
        for name in (looping, sink):
            channel.queue_delete(name)
        channel.exchange_delete(loop_x)
        return observed


def exclusivity(peer: Peer) -> list:
    """An exclusive queue from another connection (405), an exclusive consumer (403), and
    an auto-delete queue gone with its last consumer."""
    observed: list = []
    with _connect(peer) as owner, _connect(peer) as other:
        channel = owner.channel()
        mine, shared, auto = peer.name("mine"), peer.name("shared"), peer.name("auto")
        channel.queue_declare(mine, exclusive=True)
        channel.queue_declare(shared)
        channel.basic_consume(shared, lambda *a: None, exclusive=True)
        for attempt in (lambda ch: ch.queue_declare(mine, passive=True),
                        lambda ch: ch.basic_consume(mine, lambda *a: None),
                        lambda ch: ch.basic_consume(shared, lambda *a: None)):
            try:
                attempt(other.channel())
                observed.append("ok")
            except ChannelClosedByBroker as e:
                observed.append(e.reply_code)
        channel.queue_declare(auto, auto_delete=True)
        tag = channel.basic_consume(auto, lambda *a: None)
        channel.basic_cancel(tag)
        try:
            other.channel().queue_declare(auto, passive=True)
            observed.append("still there")
        except ChannelClosedByBroker as e:
            observed.append(e.reply_code)
        channel.queue_delete(shared)
    return observed


def counts(peer: Peer) -> list:
    """message_count in declare-ok, get-ok and purge-ok, and delete-ok."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        queue = peer.name()
        observed = [channel.queue_declare(queue).method.message_count]
        for i in range(5):
            channel.basic_publish("", queue, b"%d" % i)
        observed.append(_count(channel, queue))
        method, _, body = channel.basic_get(queue)
        observed.append((body, method.message_count))
        observed.append(channel.queue_purge(queue).method.message_count)  # the unacked one stays
        observed.append(_count(channel, queue))
        channel.basic_reject(method.delivery_tag, requeue=True)
        observed.append(_count_becomes(channel, queue, 1))
        observed.append(channel.queue_delete(queue).method.message_count)
        return observed


def queue_types(peer: Peer) -> list:
    """x-queue-type: a quorum queue's rules (durable, no owner, no auto-delete, no
    priorities), a delivery limit only on a quorum queue, an unknown type; and a quorum
    queue's delivery limit dropping a message returned too often."""
    with _connect(peer) as connection:
        observed: list = []
        name = peer.name()
        for flags, arguments in ((dict(durable=False), {"x-queue-type": "quorum"}),
                                 (dict(durable=True, exclusive=True), {"x-queue-type": "quorum"}),
                                 (dict(durable=True, auto_delete=True), {"x-queue-type": "quorum"}),
                                 (dict(durable=True), {"x-queue-type": "quorum", "x-max-priority": 5}),
                                 (dict(durable=True), {"x-delivery-limit": 1}),
                                 (dict(durable=True), {"x-queue-type": "bogus"})):
            try:
                connection.channel().queue_declare(name, arguments=arguments, **flags)
                observed.append("ok")
            except ChannelClosedByBroker as e:
                observed.append((e.reply_code, e.reply_text))
        channel = connection.channel()
        channel.confirm_delivery()
        channel.queue_declare(name, durable=True, arguments={"x-queue-type": "quorum", "x-delivery-limit": 1})
        channel.basic_publish("", name, b"flaky")
        for _ in range(2):  # delivered, returned once (within the limit), delivered, returned again
            method, properties, body = _get_unacked(channel, name)
            observed.append((body, method.redelivered, typed((properties.headers or {}).get("x-delivery-count"))))
            channel.basic_nack(method.delivery_tag, requeue=True)
        observed.append(channel.basic_get(name)[2])  # over the limit: dropped
        channel.queue_delete(name)
        return [o.replace(peer.prefix, "P") if isinstance(o, str) else
                (o[0], o[1].replace(peer.prefix, "P")) if isinstance(o, tuple) and isinstance(o[1], str) else o
                for o in observed]


def channel_errors(peer: Peer) -> list:
    """Channel errors close the channel only: 404 on a missing queue or exchange, 406 on a
    redeclare with other arguments; the connection goes on."""
    with _connect(peer) as connection:
        observed = []
        queue = peer.name()
        channel = connection.channel()
        channel.queue_declare(queue, arguments={"x-message-ttl": 1000})
        for attempt in (lambda ch: ch.queue_declare(peer.name("missing"), passive=True),
                        lambda ch: ch.basic_get(peer.name("missing")),
                        lambda ch: ch.exchange_declare(peer.name("nox"), passive=True),
                        lambda ch: ch.queue_bind(queue, peer.name("nox")),
                        lambda ch: ch.queue_declare(queue, arguments={"x-message-ttl": 2000}),
                        lambda ch: ch.queue_declare(queue),
                        lambda ch: ch.queue_declare(queue, arguments={"x-overflow": "bogus"}),
                        lambda ch: ch.queue_unbind(peer.name("missing"), "amq.direct", "k")):
            ch = connection.channel()
            try:
                attempt(ch)
                observed.append("ok")
            except ChannelClosedByBroker as e:
                observed.append((e.reply_code, e.reply_text.split(" - ")[0]))
            observed.append(connection.is_open)
        connection.channel().queue_delete(queue)
        return observed


def priorities(peer: Peer) -> list:
    """x-max-priority: higher priority first among ready messages; above the maximum
    counts as the maximum; none as 0."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        queue = peer.name()
        channel.queue_declare(queue, arguments={"x-max-priority": 5})
        for body, priority in ((b"p0", None), (b"p3", 3), (b"p9", 9), (b"p1", 1), (b"p3b", 3), (b"p5", 5)):
            channel.basic_publish("", queue, body, pika.BasicProperties(priority=priority))
        observed: list = [_count_becomes(channel, queue, 6)]
        observed.append([channel.basic_get(queue, auto_ack=True)[2] for _ in range(7)])
        channel.queue_delete(queue)
        return observed


def exchange_to_exchange(peer: Peer) -> list:
    """exchange.bind: a queue bound to the destination gets what the source routes to it."""
    with _connect(peer) as connection:
        channel = connection.channel()
        channel.confirm_delivery()
        source, destination, queue = peer.name("src"), peer.name("dst"), peer.name()
        channel.exchange_declare(source, "topic")
        channel.exchange_declare(destination, "direct")
        channel.exchange_bind(destination, source, "a.*")
        channel.queue_declare(queue)
        channel.queue_bind(queue, destination, "a.b")
        for key in ("a.b", "a.c", "x.b"):
            channel.basic_publish(source, key, key.encode())
        observed = [_count_becomes(channel, queue, 1), _get(channel, queue)[2]]
        channel.exchange_unbind(destination, source, "a.*")
        channel.basic_publish(source, "a.b", b"after")
        observed.append(_count(channel, queue))
        channel.queue_delete(queue)
        channel.exchange_delete(source)
        channel.exchange_delete(destination)
        return observed


def mandatory_and_cancel_notify(peer: Peer) -> list:
    """basic.return for a mandatory publish no queue takes; the server's basic.cancel to a
    consumer of a deleted queue (pika announces consumer_cancel_notify)."""
    with _connect(peer) as connection:
        channel = connection.channel()  # no confirms: pika hands a return to its callback
        exchange, queue = peer.name("x"), peer.name()
        channel.exchange_declare(exchange, "direct")
        returned = []
        channel.add_on_return_callback(lambda ch, method, props, body: returned.append(
            (method.reply_code, method.reply_text, method.exchange, method.routing_key, body)))
        channel.basic_publish(exchange, "nowhere", b"lost", mandatory=True)
        channel.basic_publish(exchange, "nowhere", b"dropped")  # not mandatory: no return
        deadline = time.monotonic() + TIMEOUT_S
        while not returned and time.monotonic() < deadline:
            connection.process_data_events(0.05)
        connection.process_data_events(0.2)
        observed: list = [returned]
        channel.queue_declare(queue)
        cancelled = []
        channel.add_on_cancel_callback(lambda frame: cancelled.append(type(frame.method).__name__))
        channel.basic_consume(queue, lambda *a: None)
        other = connection.channel()
        other.queue_delete(queue)
        deadline = time.monotonic() + TIMEOUT_S
        while not cancelled and time.monotonic() < deadline:
            connection.process_data_events(0.05)
        observed.append(cancelled)
        observed.append(channel.is_open)
        channel.exchange_delete(exchange)
        return observed


def rpc_patterns(peer: Peer) -> list:
    """aio-pika's RPC and JsonRPC: a call, a call whose expiration dead-letters it back
    through rpc.dlx as a timeout, a call to no queue returned (mandatory), and close."""
    async def main() -> list:
        observed: list = []
        connection = await aio_pika.connect(peer.url)
        async with connection:
            for pattern in (RPC, JsonRPC):
                channel = await connection.channel()
                rpc = await pattern.create(channel)
                method = peer.name(pattern.__name__)

                async def multiply(*, x: int, y: int) -> int:
                    return x * y
                await rpc.register(method + ".multiply", multiply, auto_delete=True)
                observed.append(await asyncio.wait_for(rpc.call(method + ".multiply", kwargs={"x": 6, "y": 7}),
                                                       TIMEOUT_S))
                await channel.declare_queue(method + ".stalled", arguments={"x-dead-letter-exchange": RPC.DLX_NAME})
                for name, expiration in ((".stalled", 0.2), (".nowhere", None)):
                    try:
                        await asyncio.wait_for(rpc.call(method + name, kwargs={}, expiration=expiration), TIMEOUT_S)
                    except Exception as e:  # noqa: BLE001 - what the caller sees is the observation
                        observed.append(type(e).__name__)
                await rpc.close()
                cleanup = await connection.channel()
                await cleanup.queue_delete(method + ".stalled")
                await cleanup.queue_delete(method + ".multiply")
        return observed
    return asyncio.run(main())


@pytest.mark.parametrize("script", [expiry_without_consumer, per_message_expiration_from_the_head, ttl_zero,
                                    dead_letter_retry_rounds, default_exchange_dead_letter, dead_letter_cycle,
                                    overflow_modes,
                                    max_length_bytes, counts, exclusivity,
                                    unused_queue_expires, queue_types, channel_errors,
                                    priorities, exchange_to_exchange, mandatory_and_cancel_notify, rpc_patterns],
                         ids=lambda s: s.__name__)
def test_queue_semantics_as_rabbitmq(parity, script):
    parity.assert_same(script)
