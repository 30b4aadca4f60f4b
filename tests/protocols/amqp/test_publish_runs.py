"""Publishes that arrive in one read are stored in runs (one append per run, a plain record
per message): confirmed per publish, delivered per message with their own properties and
nothing added, while a publish that needs its own treatment (a delay, a DEDUP_KEY) is
stored on its own."""

from __future__ import annotations

import time

import pika
from pamqp import commands, frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from tests.protocols.amqp.raw_client import RawAmqp

TIMEOUT_S = 20


def _publish(routing_key: str, body: bytes, headers: dict | None = None) -> bytes:
    props = commands.Basic.Properties(content_type="text/plain", delivery_mode=2, headers=headers)
    return (frame.marshal(commands.Basic.Publish(exchange="", routing_key=routing_key), 1)
            + frame.marshal(ContentHeader(body_size=len(body), properties=props), 1)
            + frame.marshal(ContentBody(body), 1))


def test_a_pipelined_read_is_stored_in_runs_and_read_back_per_message(amqp_broker):
    port = amqp_broker.endpoint("amqp")[1]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        conn.channel().queue_declare("gq", durable=True)
    raw = RawAmqp(port)
    raw.send(1, commands.Channel.Open())
    assert isinstance(raw.read_frame()[1], commands.Channel.OpenOk)
    raw.send(1, commands.Confirm.Select())
    assert isinstance(raw.read_frame()[1], commands.Confirm.SelectOk)
    sends = [(b"p%d" % i, {"n": str(i)}) for i in range(40)]
    sends[10] = (b"dedup", {"DEDUP_KEY": "once"})
    sends[20] = (b"later", {"x-delay": 300})
    raw.send_raw(b"".join(_publish("gq", body, headers) for body, headers in sends))  # one write
    acked = 0
    deadline = time.monotonic() + TIMEOUT_S
    while acked < len(sends) and time.monotonic() < deadline:
        _, method = raw.read_frame()
        assert isinstance(method, commands.Basic.Ack), method
        acked = method.delivery_tag if method.multiple else max(acked, method.delivery_tag)
    raw.close()
    assert acked == len(sends)

    broker = amqp_broker.server.broker
    stored = amqp_broker.run(lambda: [seg.is_inner_batch for q in range(broker.topics.get("gq").read_queue_nums)
                                      for seg in broker.get_messages("gq", q, 0, 64).segments])
    assert stored and not any(stored)  # plain records, the cheapest to read

    got: dict[bytes, tuple] = {}
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(sends) and time.monotonic() < deadline:
            method, props, body = ch.basic_get("gq", auto_ack=True)
            if method is None:
                time.sleep(0.05)
                continue
            got[body] = (method.routing_key, method.exchange, props.content_type, props.delivery_mode, props.headers)
    assert set(got) == {body for body, _ in sends}
    assert got[b"p3"] == ("gq", "", "text/plain", 2, {"n": "3"})  # no tag header, no UNIQ_KEY
    assert got[b"dedup"][4] == {"DEDUP_KEY": "once"}
    assert got[b"later"][:4] == ("gq", "", "text/plain", 2)
