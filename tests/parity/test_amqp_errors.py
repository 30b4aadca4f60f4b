"""AMQP errors and notifications against RabbitMQ 3.10: what a client is told when a publish
has nowhere to go, a queue is missing or declared differently, its queue is deleted under
it, or its login is wrong; and that a channel error leaves the connection open."""

from __future__ import annotations

import amqp
import amqp.exceptions
import pika
import pika.exceptions

from .amqp_client import closed, connection, drain, wait_for
from .harness import Peer


def mandatory_returns(peer: Peer) -> list:
    """RabbitMQ returns a mandatory publish no queue takes (basic.return 312 NO_ROUTE, with
    the body), before its confirm; a publish that is not mandatory is dropped silently."""
    with connection(peer) as conn:
        channel = conn.channel()
        returned: list = []
        channel.add_on_return_callback(lambda _ch, method, properties, body: returned.append(
            ("return", method.reply_code, method.reply_text, method.exchange == "", method.routing_key
             == peer.name("nowhere"), body, properties.headers)))
        exchange = peer.name("x")
        channel.exchange_declare(exchange, "direct")
        channel.basic_publish(exchange, peer.name("nowhere"), b"to-exchange", mandatory=True,
                              properties=pika.BasicProperties(headers={"h": "v"}))
        channel.basic_publish("", peer.name("nowhere"), b"to-default", mandatory=True)
        channel.basic_publish(exchange, peer.name("nowhere"), b"not-mandatory")
        wait_for(conn, lambda: len(returned) >= 2)
        channel.exchange_declare(exchange, "direct", passive=True)  # a round trip: later returns are in
        conn.process_data_events(time_limit=0)
        observed = list(returned)
        confirming = conn.channel()
        confirming.confirm_delivery()
        try:
            confirming.basic_publish(exchange, peer.name("nowhere"), b"confirmed", mandatory=True)
            observed.append("published")
        except pika.exceptions.UnroutableError as e:
            observed.append(("unroutable", [(m.method.reply_code, m.body) for m in e.messages]))
        channel.exchange_delete(exchange)
        return observed


def test_a_mandatory_publish_no_queue_takes_is_returned(parity):
    assert parity.assert_same(mandatory_returns) == [
        ("return", 312, "NO_ROUTE", False, True, b"to-exchange", {"h": "v"}),
        ("return", 312, "NO_ROUTE", True, True, b"to-default", None),
        ("unroutable", [(312, b"confirmed")])]


def missing_things(peer: Peer) -> list:
    """RabbitMQ answers a missing queue or exchange with 404 NOT_FOUND on that channel only:
    the connection and its other channels go on."""
    missing_queue, missing_exchange = peer.name("missing-q"), peer.name("missing-x")
    attempts = [
        ("declare passive", lambda ch: ch.queue_declare(missing_queue, passive=True)),
        ("consume", lambda ch: ch.basic_consume(missing_queue, lambda *a: None)),
        ("get", lambda ch: ch.basic_get(missing_queue)),
        ("purge", lambda ch: ch.queue_purge(missing_queue)),
        ("bind to a missing exchange", lambda ch: (ch.queue_declare(peer.name("q"), auto_delete=True),
                                                  ch.queue_bind(peer.name("q"), missing_exchange))),
        ("exchange passive", lambda ch: ch.exchange_declare(missing_exchange, passive=True)),
        ("publish to a missing exchange", _publish_confirmed(missing_exchange)),
    ]
    observed = []
    with connection(peer) as conn:
        survivor = conn.channel()
        for what, attempt in attempts:
            channel = conn.channel()
            try:
                attempt(channel)
                observed.append((what, "no error"))
            except pika.exceptions.ChannelClosedByBroker as e:
                observed.append((what, closed(e), channel.is_closed))
        survivor.queue_declare(peer.name("after"), auto_delete=True)
        observed.append(("connection open", conn.is_open, survivor.is_open))
    return observed


def _publish_confirmed(exchange: str):
    def publish(channel) -> None:
        channel.confirm_delivery()
        channel.basic_publish(exchange, "k", b"x")
    return publish


def test_a_missing_queue_or_exchange_closes_only_the_channel(parity):
    observed = parity.assert_same(missing_things)
    assert observed[-1] == ("connection open", True, True)


def inequivalent_redeclare(peer: Peer) -> list:
    """RabbitMQ refuses a redeclare that differs from the queue or exchange as declared
    (arguments, durable, type) with 406 PRECONDITION_FAILED, and takes an equal one or a
    passive one (whose arguments are not compared)."""
    queue, exchange = peer.name("q"), peer.name("x")
    attempts = [
        ("same", lambda ch: ch.queue_declare(queue, arguments={"x-message-ttl": 60000})),
        ("passive", lambda ch: ch.queue_declare(queue, passive=True)),
        ("other ttl", lambda ch: ch.queue_declare(queue, arguments={"x-message-ttl": 1000})),
        ("no ttl", lambda ch: ch.queue_declare(queue)),
        ("durable", lambda ch: ch.queue_declare(queue, durable=True, arguments={"x-message-ttl": 60000})),
        ("other dlx", lambda ch: ch.queue_declare(queue, arguments={"x-message-ttl": 60000,
                                                                    "x-dead-letter-exchange": "dlx"})),
        ("exchange same", lambda ch: ch.exchange_declare(exchange, "direct")),
        ("exchange type", lambda ch: ch.exchange_declare(exchange, "fanout")),
        ("exchange durable", lambda ch: ch.exchange_declare(exchange, "direct", durable=True)),
    ]
    observed = []
    with connection(peer) as conn:
        setup = conn.channel()
        setup.queue_declare(queue, arguments={"x-message-ttl": 60000})
        setup.exchange_declare(exchange, "direct")
        for what, attempt in attempts:
            channel = conn.channel()
            try:
                attempt(channel)
                observed.append((what, "ok"))
            except pika.exceptions.ChannelClosedByBroker as e:
                observed.append((what, closed(e)))
        setup.queue_delete(queue)
        setup.exchange_delete(exchange)
        observed.append(("connection open", conn.is_open))
    return observed


def test_a_redeclare_with_other_arguments_is_refused_with_406(parity):
    parity.assert_same(inequivalent_redeclare)


def cancel_on_delete(peer: Peer) -> list:
    """RabbitMQ tells a consumer (consumer_cancel_notify) that its queue was deleted with a
    basic.cancel from the server; the channel stays open."""
    with connection(peer) as conn:
        channel = conn.channel()
        queue = peer.name()
        channel.queue_declare(queue)
        cancelled: list = []
        channel.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        channel.basic_consume(queue, lambda *a: None, consumer_tag="ctag-1")
        conn.channel().queue_delete(queue)
        wait_for(conn, lambda: cancelled)
        channel.queue_declare(peer.name("after"), auto_delete=True)
        return [cancelled, channel.is_open, conn.is_open]


def test_deleting_a_queue_cancels_its_consumers(parity):
    assert parity.assert_same(cancel_on_delete) == [["ctag-1"], True, True]


WRONG = [("guest", "wrong"), ("nobody", "guest")]


def pika_wrong_credentials(peer: Peer) -> list:
    """RabbitMQ refuses a wrong password or an unknown user: connection.close 403
    ACCESS_REFUSED after start-ok (pika raises ProbableAuthenticationError)."""
    observed = []
    for user, password in WRONG:
        parameters = pika.URLParameters(f"amqp://{user}:{password}@{peer.host}:{peer.amqp_port}/%2F")
        parameters.connection_attempts = 1
        try:
            pika.BlockingConnection(parameters).close()
            observed.append((user, "connected"))
        except pika.exceptions.AMQPConnectionError as e:
            observed.append((user, type(e).__name__, "(403) 'ACCESS_REFUSED - " in str(e)))
    return observed


def py_amqp_wrong_credentials(peer: Peer) -> list:
    """The same through py-amqp (Celery's and kombu's client): AccessRefused, 403."""
    observed = []
    for user, password in WRONG:
        conn = amqp.Connection(f"{peer.host}:{peer.amqp_port}", userid=user, password=password,
                               connect_timeout=10)
        try:
            conn.connect()
            observed.append((user, "connected"))
        except amqp.exceptions.AMQPError as e:
            observed.append((user, type(e).__name__, e.reply_code, str(e.reply_text)))
        finally:
            conn.collect()
    return observed


def test_pika_with_wrong_credentials_is_refused_with_403(parity):
    assert parity.assert_same(pika_wrong_credentials) == [
        ("guest", "ProbableAuthenticationError", True), ("nobody", "ProbableAuthenticationError", True)]


def test_py_amqp_with_wrong_credentials_is_refused_with_403(parity):
    refused = "ACCESS_REFUSED - Login was refused using authentication mechanism AMQPLAIN. For details see the broker logfile."
    assert parity.assert_same(py_amqp_wrong_credentials) == [
        ("guest", "AccessRefused", 403, refused), ("nobody", "AccessRefused", 403, refused)]


def invalid_expiration(peer: Peer) -> list:
    """A per-message expiration that is no non-negative integer: RabbitMQ closes the channel
    (406 PRECONDITION_FAILED, saying why in Erlang's words), not the connection; a valid
    one on the next channel is stored."""
    queue = peer.name()
    observed: list = []
    with connection(peer) as conn:
        setup = conn.channel()
        setup.queue_declare(queue)
        for value in ("abc", "-5", "1.5", ""):
            channel = conn.channel()
            channel.confirm_delivery()
            try:
                channel.basic_publish("", queue, b"m", pika.BasicProperties(expiration=value))
                observed.append((value, "published"))
            except pika.exceptions.ChannelClosedByBroker as e:
                observed.append((value, e.args[0], e.args[1], conn.is_open))
        channel = conn.channel()
        channel.confirm_delivery()
        channel.basic_publish("", queue, b"ok", pika.BasicProperties(expiration="60000"))
        observed.append([body for body in drain(channel, queue)])
        channel.queue_delete(queue)
    return observed


def test_an_invalid_expiration_closes_the_channel_with_406(parity):
    observed = parity.assert_same(invalid_expiration)
    assert observed[0] == ("abc", 406, "PRECONDITION_FAILED - invalid expiration 'abc': no_integer", True)
    assert observed[-1] == [b"ok"]
