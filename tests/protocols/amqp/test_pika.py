"""pika against the AMQP front-end: what RabbitMQ users' programs do, unchanged but the port."""

from __future__ import annotations

import socket
import threading
import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker, UnroutableError

TIMEOUT = 10.0


def _connect(port: int, **kwargs) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, **kwargs))


def _drain(channel, queue: str, count: int, *, ack: bool = True) -> list[tuple]:
    """Consume ``count`` messages (bounded by TIMEOUT): (method, properties, body) each."""
    got = []
    deadline = time.monotonic() + TIMEOUT
    for method, props, body in channel.consume(queue, inactivity_timeout=1.0):
        if method is not None:
            got.append((method, props, body))
            if ack:
                channel.basic_ack(method.delivery_tag)
        if len(got) >= count or time.monotonic() > deadline:
            break
    channel.cancel()
    return got


def test_direct_exchange_routes_by_key_with_properties_and_headers(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("orders", "direct", durable=True)
        q = ch.queue_declare("", exclusive=True).method.queue
        assert q.startswith("amq.gen-")
        ch.queue_bind(q, "orders", "eu")
        props = pika.BasicProperties(content_type="application/json", delivery_mode=2, priority=3,
                                     correlation_id="c-1", reply_to="replies", message_id="m-1",
                                     timestamp=1_700_000_000, type="order.created", app_id="shop",
                                     headers={"region": "eu", "attempt": 2})
        for i in range(3):
            ch.basic_publish("orders", "eu", b"eu-%d" % i, props)
        ch.basic_publish("orders", "us", b"us-0", props)  # bound to nothing: never delivered
        got = _drain(ch, q, 3)
        assert [b for _, _, b in got] == [b"eu-0", b"eu-1", b"eu-2"]
        method, p, _ = got[0]
        assert method.exchange == "orders" and method.routing_key == "eu" and not method.redelivered
        assert (p.content_type, p.delivery_mode, p.priority, p.correlation_id, p.reply_to, p.message_id,
                p.timestamp, p.type, p.app_id) == ("application/json", 2, 3, "c-1", "replies", "m-1",
                                                   1_700_000_000, "order.created", "shop")
        assert p.headers == {"region": "eu", "attempt": 2}  # as published, types included
        assert ch.queue_declare(q, passive=True).method.message_count == 0


@pytest.mark.parametrize("kind,bind_key,bind_args,publishes,expected", [
    ("fanout", "", None, [("a", {}), ("b", {})], ["a", "b"]),
    ("topic", "stock.*.nyse", None, [("stock.ibm.nyse", {}), ("stock.ibm.lse", {}), ("stock.nyse", {})],
     ["stock.ibm.nyse"]),
    ("topic", "audit.#", None, [("audit", {}), ("audit.a.b", {}), ("auditx.a", {})], ["audit", "audit.a.b"]),
    ("headers", "", {"x-match": "all", "format": "pdf", "type": "report"},
     [("1", {"format": "pdf", "type": "report"}), ("2", {"format": "pdf"}), ("3", {"type": "report"})], ["1"]),
    ("headers", "", {"x-match": "any", "format": "pdf", "type": "report"},
     [("1", {"format": "pdf"}), ("2", {"format": "zip"}), ("3", {"type": "report"})], ["1", "3"]),
])
def test_exchange_types_route_as_rabbitmq(amqp_port, kind, bind_key, bind_args, publishes, expected):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare(f"x-{kind}", kind)
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(q, f"x-{kind}", bind_key, arguments=bind_args)
        for key, headers in publishes:
            ch.basic_publish(f"x-{kind}", key, key.encode(), pika.BasicProperties(headers=headers))
        got = _drain(ch, q, len(expected))
        assert [b.decode() for _, _, b in got] == expected
        time.sleep(0.3)
        assert ch.basic_get(q, auto_ack=True) == (None, None, None), "nothing else was routed"


def test_default_exchange_routes_to_the_queue_of_the_key_and_a_queue_sees_only_later_messages(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("late", "fanout")
        ch.basic_publish("late", "", b"before the queue")
        ch.queue_declare("work", durable=True)
        ch.queue_bind("work", "late")
        ch.basic_publish("", "work", b"direct to work")
        ch.basic_publish("late", "", b"after the bind")
        got = _drain(ch, "work", 2)
        assert sorted(b for _, _, b in got) == [b"after the bind", b"direct to work"]
        m = next(m for m, _, b in got if b == b"direct to work")
        assert m.exchange == "" and m.routing_key == "work"


def test_competing_consumers_share_round_robin_and_prefetch_bounds_unacked(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("tasks")
        for i in range(20):
            ch.basic_publish("", "tasks", b"%d" % i)
        a, b = conn.channel(), conn.channel()
        a.basic_qos(prefetch_count=2)
        b.basic_qos(prefetch_count=2)
        seen = {"a": [], "b": []}
        a.basic_consume("tasks", lambda c, m, p, body: seen["a"].append((m.delivery_tag, body)))
        b.basic_consume("tasks", lambda c, m, p, body: seen["b"].append((m.delivery_tag, body)))
        settle = time.monotonic() + 1.0
        while time.monotonic() < settle:
            conn.process_data_events(time_limit=0.1)
        assert (len(seen["a"]), len(seen["b"])) == (2, 2), "prefetch 2 each, nothing acked yet"
        deadline = time.monotonic() + TIMEOUT
        acked = {"a": 0, "b": 0}
        while len(seen["a"]) + len(seen["b"]) < 20 and time.monotonic() < deadline:
            for name, channel in (("a", a), ("b", b)):
                if seen[name] and seen[name][-1][0] > acked[name]:
                    acked[name] = seen[name][-1][0]
                    channel.basic_ack(acked[name], multiple=True)
            conn.process_data_events(time_limit=0.2)
        bodies = sorted(int(body) for _, body in seen["a"] + seen["b"])
        assert bodies == list(range(20))
        assert seen["a"] and seen["b"]


def test_nack_requeue_redelivers_and_reject_without_requeue_drops(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("retry-me")
        ch.basic_publish("", "retry-me", b"one")
        method, _, body = _get(ch, "retry-me")
        assert body == b"one" and not method.redelivered
        ch.basic_nack(method.delivery_tag, requeue=True)
        method, _, body = _get(ch, "retry-me")
        assert body == b"one" and method.redelivered
        ch.basic_reject(method.delivery_tag, requeue=False)
        ch.basic_publish("", "retry-me", b"two")  # the barrier: a requeued "one" would come first
        method, _, body = _get(ch, "retry-me")
        assert body == b"two" and not method.redelivered


def _get(ch, queue: str):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        method, props, body = ch.basic_get(queue)
        if method is not None:
            return method, props, body
        time.sleep(0.05)
    raise AssertionError(f"no message in {queue} within {TIMEOUT} s")


def test_unacked_messages_of_a_closed_channel_are_redelivered(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("held")
        for i in range(3):
            ch.basic_publish("", "held", b"%d" % i)
        holder = conn.channel()
        got = _drain(holder, "held", 3, ack=False)
        assert len(got) == 3
        holder.close()
        again = _drain(ch, "held", 3)
        assert sorted(b for _, _, b in again) == [b"0", b"1", b"2"]
        assert all(m.redelivered for m, _, _ in again)


def test_mandatory_publish_without_a_route_is_returned(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("nowhere", "direct")
        with pytest.raises(UnroutableError):
            ch.basic_publish("nowhere", "nobody", b"x", mandatory=True)
        ch.basic_publish("nowhere", "nobody", b"y")  # not mandatory: confirmed, dropped


def test_tx_commit_publishes_and_rollback_discards(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.queue_declare("txq")
        ch.tx_select()
        ch.basic_publish("", "txq", b"rolled back")
        ch.tx_rollback()
        ch.basic_publish("", "txq", b"committed")
        ch.tx_commit()
        method, _, body = _get(ch, "txq")
        assert body == b"committed"
        ch.basic_ack(method.delivery_tag)
        ch.tx_rollback()  # the ack is undone: the message is still unacked on this channel
        ch.basic_ack(method.delivery_tag)
        ch.tx_commit()
        time.sleep(0.3)
        assert ch.basic_get("txq") == (None, None, None)


def test_rpc_with_exclusive_reply_queue_and_correlation_id(amqp_port):
    with _connect(amqp_port) as server_conn, _connect(amqp_port) as client_conn:
        server = server_conn.channel()
        server.queue_declare("rpc")

        def serve(ch, method, props, body):
            ch.basic_publish("", props.reply_to, body.upper(),
                             pika.BasicProperties(correlation_id=props.correlation_id))
            ch.basic_ack(method.delivery_tag)
        server.basic_consume("rpc", serve)
        client = client_conn.channel()
        reply_queue = client.queue_declare("", exclusive=True).method.queue
        client.basic_publish("", "rpc", b"ping", pika.BasicProperties(reply_to=reply_queue, correlation_id="42"))
        answer = None
        deadline = time.monotonic() + TIMEOUT
        while answer is None and time.monotonic() < deadline:
            server_conn.process_data_events(time_limit=0.1)
            method, props, body = client.basic_get(reply_queue, auto_ack=True)
            if method is not None:
                answer = (props.correlation_id, body)
        assert answer == ("42", b"PING")
        # another connection may not use the exclusive queue
        other = server_conn.channel()
        with pytest.raises(ChannelClosedByBroker) as refused:
            other.basic_consume(reply_queue, lambda *a: None)
        assert refused.value.reply_code == 405


def test_channel_errors_close_only_their_channel(amqp_port):
    with _connect(amqp_port) as conn:
        bad = conn.channel()
        with pytest.raises(ChannelClosedByBroker) as missing:
            bad.queue_declare("does-not-exist", passive=True)
        assert missing.value.reply_code == 404
        bad = conn.channel()
        bad.exchange_declare("typed", "direct")
        with pytest.raises(ChannelClosedByBroker) as mismatch:
            bad.exchange_declare("typed", "fanout")
        assert mismatch.value.reply_code == 406
        bad = conn.channel()
        with pytest.raises(ChannelClosedByBroker) as reserved:
            bad.exchange_declare("amq.mine", "direct")
        assert reserved.value.reply_code == 403
        bad = conn.channel()
        with pytest.raises(ChannelClosedByBroker) as no_exchange:
            bad.basic_publish("no-such-exchange", "k", b"x")
            bad.queue_declare("", exclusive=True)  # the error arrives by the next round trip
        assert no_exchange.value.reply_code == 404
        ok = conn.channel()
        ok.queue_declare("still-fine")
        ok.basic_publish("", "still-fine", b"fine")
        assert _get(ok, "still-fine")[2] == b"fine"


def test_a_large_body_crosses_frame_max_both_ways(amqp_port):
    body = bytes(range(256)) * 4096  # 1 MiB
    with _connect(amqp_port, frame_max=131072) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("big")
        ch.basic_publish("", "big", body)
        assert _get(ch, "big")[2] == body


def test_queue_purge_and_delete_with_cancel_notify(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("purged")
        for i in range(5):
            ch.basic_publish("", "purged", b"%d" % i)
        assert ch.queue_purge("purged").method.message_count == 5
        assert ch.basic_get("purged") == (None, None, None)
        ch.queue_declare("deleted")
        cancelled = threading.Event()
        consumer = conn.channel()
        consumer.add_on_cancel_callback(lambda frame: cancelled.set())
        consumer.basic_consume("deleted", lambda *a: None)
        with pytest.raises(ChannelClosedByBroker) as in_use:
            conn.channel().queue_delete("deleted", if_unused=True)
        assert in_use.value.reply_code == 406
        ch.queue_delete("deleted")
        deadline = time.monotonic() + TIMEOUT
        while not cancelled.is_set() and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        assert cancelled.is_set()


def test_select_connection_publishes_with_confirms_and_consumes(amqp_port):
    params = pika.ConnectionParameters("127.0.0.1", amqp_port)
    received: list[bytes] = []
    confirms: list[int] = []
    state: dict = {}

    def on_open(conn):
        conn.channel(on_open_callback=on_channel)

    def on_channel(ch):
        state["ch"] = ch
        ch.confirm_delivery(lambda frame: confirms.append(frame.method.delivery_tag))
        ch.queue_declare("select-q", callback=on_declared)

    def on_declared(_):
        ch = state["ch"]
        ch.basic_consume("select-q", on_message)
        for i in range(10):
            ch.basic_publish("", "select-q", b"%d" % i)

    def on_message(ch, method, props, body):
        received.append(body)
        ch.basic_ack(method.delivery_tag)
        if len(received) == 10:
            state["conn"].close()

    conn = pika.SelectConnection(params, on_open_callback=on_open,
                                 on_open_error_callback=lambda c, e: c.ioloop.stop(),
                                 on_close_callback=lambda c, e: c.ioloop.stop())
    state["conn"] = conn
    timer = threading.Timer(TIMEOUT, lambda: conn.ioloop.add_callback_threadsafe(conn.ioloop.stop))
    timer.start()
    try:
        conn.ioloop.start()
    finally:
        timer.cancel()
    assert received == [b"%d" % i for i in range(10)]
    assert confirms and max(confirms) == 10


def test_wrong_protocol_header_gets_ours_and_a_close(amqp_port):
    with socket.create_connection(("127.0.0.1", amqp_port), timeout=TIMEOUT) as s:
        s.sendall(b"AMQP\x01\x01\x00\x0a")
        assert s.recv(8) == b"AMQP\x00\x00\x09\x01"
        assert s.recv(8) == b""


def test_unknown_vhost_is_refused(amqp_port):
    with pytest.raises(Exception) as refused:
        _connect(amqp_port, virtual_host="elsewhere")
    assert "530" in repr(refused.value) or "NOT_ALLOWED" in repr(refused.value)


def test_frame_errors_close_the_connection_with_the_protocol_code(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        # a body frame with no publish before it: 505 UNEXPECTED_FRAME
        conn._impl._transport._sock.sendall(b"\x03\x00\x01\x00\x00\x00\x01x\xce")
        with pytest.raises(ConnectionClosedByBroker) as closed:
            ch.queue_declare("", exclusive=True)
        assert closed.value.reply_code == 505
    with _connect(amqp_port) as conn:  # the broker and other connections are fine
        conn.channel().queue_declare("after-error")


def test_an_exchange_and_a_queue_may_share_a_name_as_kombu_and_celery_declare_them(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("celery", "direct")
        ch.queue_declare("celery")
        ch.queue_bind("celery", "celery", "celery")
        ch.queue_declare("spy")
        ch.queue_bind("spy", "celery", "celery")
        ch.basic_publish("celery", "celery", b"via the exchange")
        ch.basic_publish("celery", "other", b"routed nowhere")
        ch.basic_publish("", "celery", b"via the default exchange")
        got = _drain(ch, "celery", 2)
        assert sorted((m.exchange, b) for m, _, b in got) == [("", b"via the default exchange"),
                                                             ("celery", b"via the exchange")]
        spied = _drain(ch, "spy", 1)
        assert [b for _, _, b in spied] == [b"via the exchange"]
        # the barrier: one more through the exchange, stored after the others in the same topic
        ch.basic_publish("celery", "celery", b"barrier")
        assert [b for _, _, b in _drain(ch, "spy", 1)] == [b"barrier"], \
            "the default exchange's publish is the queue's alone"
        assert [b for _, _, b in _drain(ch, "celery", 1)] == [b"barrier"]


def test_names_outside_the_topic_alphabet_map_to_escaped_topics(amqp_port):
    """Celery's remote-control queues are named like ``celery@host.celery.pidbox``."""
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("celery.pidbox", "fanout")
        ch.queue_declare("celery@worker-1.celery.pidbox", auto_delete=True)
        ch.queue_bind("celery@worker-1.celery.pidbox", "celery.pidbox")
        ch.exchange_declare("odd:exchange", "direct")
        ch.queue_bind("celery@worker-1.celery.pidbox", "odd:exchange", "k")
        ch.basic_publish("celery.pidbox", "", b"ping")
        ch.basic_publish("odd:exchange", "k", b"pong")
        ch.basic_publish("", "celery@worker-1.celery.pidbox", b"direct")
        got = _drain(ch, "celery@worker-1.celery.pidbox", 3)
        assert sorted((m.exchange, b) for m, _, b in got) == [
            ("", b"direct"), ("celery.pidbox", b"ping"), ("odd:exchange", b"pong")]


def test_exchange_to_exchange_bindings_route_through_both_exchanges(amqp_port):
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("upstream", "topic")
        ch.exchange_declare("downstream", "direct")
        ch.exchange_bind("downstream", "upstream", "orders.#")
        ch.queue_declare("e2e-q")
        ch.queue_bind("e2e-q", "downstream", "orders.eu")
        ch.basic_publish("upstream", "orders.eu", b"through both")
        ch.basic_publish("upstream", "orders.us", b"downstream does not route it")
        ch.basic_publish("upstream", "refunds.eu", b"upstream does not route it")
        ch.basic_publish("downstream", "orders.eu", b"straight to downstream")
        with pytest.raises(UnroutableError):
            ch.basic_publish("upstream", "orders.us", b"mandatory", mandatory=True)
        got = _drain(ch, "e2e-q", 2)
        assert sorted(b for _, _, b in got) == [b"straight to downstream", b"through both"]
        ch.exchange_unbind("downstream", "upstream", "orders.#")
        ch.basic_publish("upstream", "orders.eu", b"after the unbind")
        time.sleep(0.3)
        assert ch.basic_get("e2e-q") == (None, None, None)


def test_a_consumer_names_the_exchange_as_declared_when_the_delivery_comes(amqp_port):
    """The same stored properties name another exchange once the queue's name is an
    exchange's too: what a consumer remembers of earlier deliveries does not outlive a
    declaration."""
    with _connect(amqp_port) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("dual")
        got: list[tuple[str, bytes]] = []
        ch.basic_consume("dual", lambda _ch, method, _props, body: got.append((method.exchange, body)),
                         auto_ack=True)

        def wait_for(count: int) -> None:
            deadline = time.monotonic() + TIMEOUT
            while len(got) < count and time.monotonic() < deadline:
                conn.process_data_events(time_limit=0.1)
        ch.basic_publish("", "dual", b"first")
        wait_for(1)
        ch.exchange_declare("dual", "fanout")
        ch.queue_bind("dual", "dual")
        ch.basic_publish("dual", "dual", b"second")  # stored with the first's properties
        wait_for(2)
        assert got == [("", b"first"), ("dual", b"second")]
