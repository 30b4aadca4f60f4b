"""Publishes that arrive in one read are stored in runs (one append per run, a plain record
per message): confirmed per publish, delivered per message with their own properties and
nothing added, while a publish that needs its own treatment (a delay, a DEDUP_KEY) is
stored on its own. Where a run goes is worked out once and again after any declaration
changes."""

from __future__ import annotations

import time

import pika
from pamqp import commands, frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from tests.protocols.amqp.raw_client import RawAmqp

TIMEOUT_S = 20


def _publish(routing_key: str, body: bytes, headers: dict | None = None, *, exchange: str = "",
             mandatory: bool = False) -> bytes:
    props = commands.Basic.Properties(content_type="text/plain", delivery_mode=2, headers=headers)
    return (frame.marshal(commands.Basic.Publish(exchange=exchange, routing_key=routing_key,
                                                 mandatory=mandatory), 1)
            + frame.marshal(ContentHeader(body_size=len(body), properties=props), 1)
            + frame.marshal(ContentBody(body), 1))


def _channel(port: int, *, confirm: bool = True) -> RawAmqp:
    """A raw connection with channel 1 open (in confirm mode unless told otherwise)."""
    raw = RawAmqp(port)
    raw.send(1, commands.Channel.Open())
    assert isinstance(raw.read_frame()[1], commands.Channel.OpenOk)
    if confirm:
        raw.send(1, commands.Confirm.Select())
        assert isinstance(raw.read_frame()[1], commands.Confirm.SelectOk)
    return raw


def test_a_pipelined_read_is_stored_in_runs_and_read_back_per_message(amqp_broker):
    port = amqp_broker.endpoint("amqp")[1]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        conn.channel().queue_declare("gq", durable=True)
    raw = _channel(port)
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


def _confirmed(raw: RawAmqp, upto: int) -> list:
    """The frames read until publish ``upto`` is acked (basic.return and its content included)."""
    seen, acked = [], 0
    deadline = time.monotonic() + TIMEOUT_S
    while acked < upto and time.monotonic() < deadline:
        _, value = raw.read_frame()
        seen.append(value)
        if isinstance(value, commands.Basic.Ack):
            acked = value.delivery_tag if value.multiple else max(acked, value.delivery_tag)
    assert acked == upto
    return seen


def test_a_run_goes_where_the_declarations_say_when_it_comes(amqp_broker):
    """Alike publishes in one read are one run: to a queue not declared yet they are dropped
    (and confirmed, as RabbitMQ does), to an exchange with no binding they come back
    (mandatory); once the queue and the binding exist, the same publishes on the same
    connection reach the queue, in order."""
    port = amqp_broker.endpoint("amqp")[1]
    raw = _channel(port)
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        conn.channel().exchange_declare("late-x", "direct")

    def burst(start: int) -> bytes:
        return (b"".join(_publish("late-q", b"d%d" % i) for i in range(start, start + 30))
                + b"".join(_publish("k", b"x%d" % i, exchange="late-x", mandatory=True)
                           for i in range(start, start + 30)))
    raw.send_raw(burst(0))
    returned = [v for v in _confirmed(raw, 60) if isinstance(v, commands.Basic.Return)]
    assert len(returned) == 30
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        ch.queue_declare("late-q")
        ch.queue_declare("late-xq")
        ch.queue_bind("late-xq", "late-x", "k")
    raw.send_raw(burst(30))
    assert not [v for v in _confirmed(raw, 120) if isinstance(v, commands.Basic.Return)]
    raw.close()
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        for queue, prefix in (("late-q", b"d"), ("late-xq", b"x")):
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 30 and time.monotonic() < deadline:
                method, _, body = ch.basic_get(queue, auto_ack=True)
                if method is None:
                    time.sleep(0.05)
                    continue
                got.append(body)
            assert got == [prefix + b"%d" % i for i in range(30, 60)]
            assert ch.basic_get(queue, auto_ack=True)[0] is None


def test_a_run_larger_than_a_commit_log_segment_is_stored_whole_and_in_order(small_config):
    """A read of alike publishes holding more bytes than a segment (64 KiB here) is still
    confirmed in full and read back in publish order across the segments."""
    import dataclasses

    from tests.protocols.amqp.conftest import amqp_config
    from tests.support.live_broker import start_live_broker
    live = start_live_broker(dataclasses.replace(amqp_config(small_config), mapped_file_size_commit_log=64 * 1024))
    try:
        port = live.endpoint("amqp")[1]
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
            conn.channel().queue_declare("big-run")
        raw = _channel(port)
        raw.send_raw(b"".join(_publish("big-run", b"%04d" % i + b"." * 896) for i in range(150)))
        _confirmed(raw, 150)
        raw.close()
        got = []
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
            ch = conn.channel()
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 150 and time.monotonic() < deadline:
                method, _, body = ch.basic_get("big-run", auto_ack=True)
                if method is None:
                    time.sleep(0.05)
                    continue
                got.append(body[:4])
        assert got == [b"%04d" % i for i in range(150)]
    finally:
        live.stop()


def test_under_sync_flush_confirms_follow_the_fsync_and_plain_publishes_ask_for_none(small_config):
    """SYNC_FLUSH: a run's confirms leave once an fsync covers it (one for the run); a
    channel without confirms starts no fsync (the next confirm's, or the periodic flush,
    covers its publishes), as RocketMQ's sends without WAIT."""
    import dataclasses

    from tests.protocols.amqp.conftest import amqp_config
    from tests.support.live_broker import start_live_broker

    live = start_live_broker(amqp_config(dataclasses.replace(
        small_config, flush_disk_type="SYNC_FLUSH", flush_interval_commit_log=60_000)))
    store = live.server.broker.store

    def state() -> tuple[int, int, int]:
        return store.flush_service.flushed_offset, store.commitlog.max_offset, store.flush_service.sync_count
    try:
        port = live.endpoint("amqp")[1]
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
            conn.channel().queue_declare("sq", durable=True)
        plain = _channel(port, confirm=False)
        _, end0, syncs0 = live.call(state)
        plain.send_raw(b"".join(_publish("sq", b"plain%d" % i) for i in range(30)))
        deadline = time.monotonic() + TIMEOUT_S
        while live.call(state)[1] - end0 < 30 * 100 and time.monotonic() < deadline:
            time.sleep(0.02)  # (each record is over 100 bytes)
        time.sleep(0.3)  # a sync started for them would have ended by now
        flushed, end, syncs = live.call(state)
        assert end > end0 and flushed < end and syncs == syncs0  # stored, no fsync asked for
        confirmed = _channel(port)
        confirmed.send_raw(b"".join(_publish("sq", b"c%d" % i) for i in range(20)))
        acked = 0
        while acked < 20:
            _, method = confirmed.read_frame()
            assert isinstance(method, commands.Basic.Ack), method
            acked = method.delivery_tag if method.multiple else max(acked, method.delivery_tag)
            flushed, end, _ = live.call(state)
            assert flushed >= end  # nothing else was written meanwhile
        plain.close()
        confirmed.close()
    finally:
        live.stop()


def _acks(raw: RawAmqp, want: dict[int, int]) -> dict[int, int]:
    """Read until each channel's publishes up to ``want[channel]`` are acked: what is acked."""
    acked = dict.fromkeys(want, 0)
    deadline = time.monotonic() + TIMEOUT_S
    while acked != want and time.monotonic() < deadline:
        channel, value = raw.read_frame()
        if isinstance(value, commands.Basic.Ack):
            acked[channel] = value.delivery_tag if value.multiple else max(acked[channel], value.delivery_tag)
        else:
            assert isinstance(value, (commands.Basic.Return, ContentHeader, ContentBody)), value
    return acked


def test_keyed_publishes_of_one_read_each_keep_their_headers_and_their_confirm_numbers(amqp_broker):
    """A keyed publisher's read (each publish its own header, two channels interleaved)
    is stored as it came: each channel's confirms count its own publishes, and each
    message is read back with its own headers, whichever way it was stored (typed and
    delay headers, a mandatory publish nobody takes in the middle)."""
    port = amqp_broker.endpoint("amqp")[1]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        conn.channel().queue_declare("keyed", durable=True)
    raw = _channel(port)
    raw.send(2, commands.Channel.Open())
    assert isinstance(raw.read_frame()[1], commands.Channel.OpenOk)
    raw.send(2, commands.Confirm.Select())
    assert isinstance(raw.read_frame()[1], commands.Confirm.SelectOk)

    def on(channel: int, data: bytes) -> bytes:  # _publish's frames moved to another channel
        out, at = b"", 0
        while at < len(data):
            size = int.from_bytes(data[at + 3:at + 7], "big")
            out += data[at:at + 1] + channel.to_bytes(2, "big") + data[at + 3:at + 8 + size]
            at += 8 + size
        return out
    data, expected = b"", {}
    for i in range(60):
        headers: dict = {"KEYS": "key-%d" % i, "n": "%d" % i}
        if i == 17:
            headers["typed"] = 17
        if i == 33:
            headers["x-delay"] = 200
        body = b"k%d" % i
        expected[body] = headers
        frames = _publish("keyed", body, headers)
        data += on(2, frames) if i % 3 == 0 else frames
        if i == 40:
            data += _publish("nobody", b"returned", {"KEYS": "r"}, mandatory=True)
    raw.send_raw(data)  # one write
    assert _acks(raw, {1: 41, 2: 20}) == {1: 41, 2: 20}
    raw.close()
    got: dict[bytes, dict] = {}
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < len(expected) and time.monotonic() < deadline:
            method, props, body = ch.basic_get("keyed", auto_ack=True)
            if method is None:
                time.sleep(0.05)
                continue
            got[body] = props.headers
    assert set(got) == set(expected)
    for body, headers in expected.items():
        headers = {k: str(v) for k, v in headers.items() if k not in ("KEYS", "x-delay")}
        assert {k: v for k, v in got[body].items() if k not in ("KEYS", "x-delay", "typed")} == \
            {k: v for k, v in headers.items() if k != "typed"}, body
    broker = amqp_broker.server.broker
    deadline = time.monotonic() + TIMEOUT_S
    while not (found := amqp_broker.run(lambda: broker.query_by_key("keyed", "key-5"))) \
            and time.monotonic() < deadline:
        time.sleep(0.05)  # the index is built behind the queues
    assert [m.body for m in found] == [b"k5"]  # KEYS as the core indexes it


def test_a_malformed_content_header_among_keyed_publishes_closes_the_connection(amqp_broker):
    """The keyed publishes before it are stored; the bad one is a 502 syntax error."""
    port = amqp_broker.endpoint("amqp")[1]
    raw = _channel(port)
    good = [_publish("nowhere", b"g%d" % i, {"KEYS": "k%d" % i}) for i in range(3)]
    bad = bytearray(_publish("nowhere", b"bad", {"KEYS": "kX"}))
    at = bad.index(b"KEYS") + 4
    bad[at] = ord("?")  # an unknown field type
    raw.send_raw(b"".join(good) + bytes(bad))
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        _, value = raw.read_frame()
        if isinstance(value, commands.Connection.Close):
            assert value.reply_code == 502, value
            break
        assert isinstance(value, commands.Basic.Ack), value
    else:
        raise AssertionError("no connection.close")
    raw.close()


def test_keyed_typed_publishes_with_an_expiration_of_their_own_expire(amqp_broker):
    """A keyed publisher's typed publishes (a key and a number each) in one read with a
    per-message expiration are looked at by the queue's limits like any other publish: the
    short-lived ones go, the long-lived ones stay."""
    port = amqp_broker.endpoint("amqp")[1]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        conn.channel().queue_declare("keyed-ttl")
    raw = _channel(port)

    def publish(i: int, expiration: str) -> bytes:
        props = commands.Basic.Properties(expiration=expiration, headers={"KEYS": "k%d" % i, "n": i})
        body = b"t%d" % i
        return (frame.marshal(commands.Basic.Publish(exchange="", routing_key="keyed-ttl"), 1)
                + frame.marshal(ContentHeader(body_size=len(body), properties=props), 1)
                + frame.marshal(ContentBody(body), 1))
    raw.send_raw(b"".join(publish(i, "50" if i % 2 else "600000") for i in range(20)))  # one write
    assert _acks(raw, {1: 20}) == {1: 20}
    expired_at = time.monotonic() + 0.05
    raw.close()
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        while time.monotonic() < expired_at + 0.1:  # the short TTL is what is tested: let it pass
            time.sleep(0.01)
        got = []
        while (message := ch.basic_get("keyed-ttl", auto_ack=True))[0] is not None:
            got.append(message[2])
    assert sorted(got) == sorted(b"t%d" % i for i in range(0, 20, 2))
