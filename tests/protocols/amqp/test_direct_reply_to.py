"""Direct reply-to (amq.rabbitmq.reply-to) with pika: RPC replies reach the requesting
channel without a reply queue, a reply to a channel that is gone is dropped, and the
misuses RabbitMQ refuses are refused with its 406s; keyed publishes in one read (the
codec's varied runs) get the reply name and the expiration check too."""

from __future__ import annotations

import time

import pika
import pytest
from pamqp import commands, frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader
from pika.exceptions import ChannelClosedByBroker

from tests.protocols.amqp.raw_client import RawAmqp

TIMEOUT = 10.0
PSEUDO = "amq.rabbitmq.reply-to"


def _connect(port: int) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))


def _wait(conn: pika.BlockingConnection, done) -> bool:
    deadline = time.monotonic() + TIMEOUT
    while not done() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    return bool(done())


def _get(channel, queue: str):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        if method is not None:
            return method, properties, body
        channel.connection.sleep(0.02)
    raise AssertionError(f"nothing in {queue}")


def test_a_request_is_answered_through_direct_reply_to(amqp_port):
    with _connect(amqp_port) as client, _connect(amqp_port) as server:
        requester = client.channel()
        requester.queue_declare("rpc-requests")
        replies: list = []
        requester.basic_consume(PSEUDO, lambda _ch, method, props, body: replies.append((method, props, body)),
                                auto_ack=True)
        assert requester.queue_declare(PSEUDO, passive=True).method.message_count == 0
        for i in range(3):
            requester.basic_publish("", "rpc-requests", b"q%d" % i,
                                    pika.BasicProperties(reply_to=PSEUDO, correlation_id=str(i)))
        responder = server.channel()
        responder.confirm_delivery()
        reply_tos = set()
        for _ in range(3):
            _, props, body = _get(responder, "rpc-requests")
            reply_tos.add(props.reply_to)
            assert props.reply_to.startswith(PSEUDO + ".") and len(props.reply_to) > len(PSEUDO) + 8
            declared = responder.queue_declare(props.reply_to, passive=True).method
            assert (declared.message_count, declared.consumer_count) == (0, 1)
            responder.basic_publish("", props.reply_to, b"re-" + body,
                                    pika.BasicProperties(correlation_id=props.correlation_id))
        assert _wait(client, lambda: len(replies) == 3)
        assert [(p.correlation_id, b) for _, p, b in replies] == [("0", b"re-q0"), ("1", b"re-q1"), ("2", b"re-q2")]
        assert [m.delivery_tag for m, _, _ in replies] == [1, 2, 3]
        assert len(reply_tos) == 1  # one name per channel
        assert {(m.exchange, m.routing_key) for m, _, _ in replies} == {("", reply_tos.pop())}
        requester.queue_delete("rpc-requests")


def test_a_reply_to_a_closed_channel_is_dropped(amqp_port):
    with _connect(amqp_port) as client, _connect(amqp_port) as server:
        gone = client.channel()
        gone.queue_declare("rpc-dropped")
        gone.basic_consume(PSEUDO, lambda *_: None, auto_ack=True)
        gone.basic_publish("", "rpc-dropped", b"q", pika.BasicProperties(reply_to=PSEUDO))
        responder = server.channel()
        responder.confirm_delivery()
        _, props, _ = _get(responder, "rpc-dropped")
        gone.close()
        # dropped, without harm: confirmed, the responder's channel and connection stay open
        responder.basic_publish("", props.reply_to, b"late")
        with pytest.raises(ChannelClosedByBroker) as refused:
            responder.queue_declare(props.reply_to, passive=True)
        assert refused.value.reply_code == 404
        assert server.is_open
        other = server.channel()
        other.queue_delete("rpc-dropped")
        # the channel that comes next with the same number gets nothing of it
        again = client.channel()
        got: list = []
        again.basic_consume(PSEUDO, lambda _ch, _m, _p, body: got.append(body), auto_ack=True)
        other.basic_publish("", props.reply_to, b"late again")
        client.process_data_events(time_limit=0.2)
        assert got == []


def test_consuming_with_acks_is_refused_with_406(amqp_port):
    with _connect(amqp_port) as conn:
        channel = conn.channel()
        with pytest.raises(ChannelClosedByBroker) as refused:
            channel.basic_consume(PSEUDO, lambda *_: None, auto_ack=False)
        assert refused.value.args == (406, "PRECONDITION_FAILED - reply consumer cannot acknowledge")
        assert conn.is_open


def test_publishing_with_direct_reply_to_without_consuming_is_refused_with_406(amqp_port):
    with _connect(amqp_port) as conn:
        channel = conn.channel()
        channel.queue_declare("rpc-no-consumer")
        channel.confirm_delivery()
        with pytest.raises(ChannelClosedByBroker) as refused:
            channel.basic_publish("", "rpc-no-consumer", b"q", pika.BasicProperties(reply_to=PSEUDO))
        assert refused.value.args == (406, "PRECONDITION_FAILED - fast reply consumer does not exist")
        assert conn.is_open
        other = conn.channel()
        assert other.queue_declare("rpc-no-consumer", passive=True).method.message_count == 0
        other.queue_delete("rpc-no-consumer")


def _keyed(routing_key: str, i: int, **properties) -> bytes:
    """One publish of a keyed publisher (a header of its own each: the codec hands a read of
    them over as one varied run) on channel 1."""
    props = commands.Basic.Properties(headers={"KEYS": "k%d" % i}, **properties)
    body = b"r%d" % i
    return (frame.marshal(commands.Basic.Publish(exchange="", routing_key=routing_key), 1)
            + frame.marshal(ContentHeader(body_size=len(body), properties=props), 1)
            + frame.marshal(ContentBody(body), 1))


def _raw_channel(port: int) -> RawAmqp:
    raw = RawAmqp(port)
    raw.send(1, commands.Channel.Open())
    assert isinstance(raw.read_frame()[1], commands.Channel.OpenOk)
    raw.send(1, commands.Confirm.Select())
    assert isinstance(raw.read_frame()[1], commands.Confirm.SelectOk)
    return raw


def test_keyed_requests_in_one_read_get_the_channels_reply_name(amqp_port):
    with _connect(amqp_port) as conn:
        conn.channel().queue_declare("rpc-keyed")
    raw = _raw_channel(amqp_port)
    raw.send(1, commands.Basic.Consume(queue=PSEUDO, consumer_tag="replies", no_ack=True))
    assert isinstance(raw.read_frame()[1], commands.Basic.ConsumeOk)
    raw.send_raw(b"".join(_keyed("rpc-keyed", i, reply_to=PSEUDO) for i in range(10)))  # one write
    acked = 0
    deadline = time.monotonic() + TIMEOUT
    while acked < 10 and time.monotonic() < deadline:
        _, value = raw.read_frame()
        assert isinstance(value, commands.Basic.Ack), value
        acked = value.delivery_tag
    with _connect(amqp_port) as conn:
        channel = conn.channel()
        reply_tos = {_get(channel, "rpc-keyed")[1].reply_to for _ in range(10)}
        assert len(reply_tos) == 1 and reply_tos.pop().startswith(PSEUDO + ".")
        channel.queue_delete("rpc-keyed")
    raw.close()


def test_an_invalid_expiration_among_keyed_publishes_closes_the_channel(amqp_port):
    with _connect(amqp_port) as conn:
        conn.channel().queue_declare("keyed-expiration")
    raw = _raw_channel(amqp_port)
    raw.send_raw(b"".join(_keyed("keyed-expiration", i, expiration="abc" if i == 3 else "60000")
                          for i in range(6)))
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        _, value = raw.read_frame()
        if isinstance(value, commands.Channel.Close):
            assert (value.reply_code, value.reply_text) == (
                406, "PRECONDITION_FAILED - invalid expiration 'abc': no_integer")
            break
        assert isinstance(value, commands.Basic.Ack), value
    else:
        raise AssertionError("no channel.close")
    raw.close()
    with _connect(amqp_port) as conn:
        channel = conn.channel()
        assert channel.queue_declare("keyed-expiration", passive=True).method.message_count <= 3
        channel.queue_delete("keyed-expiration")
