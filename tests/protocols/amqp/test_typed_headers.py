"""Typed AMQP headers: a header table comes back to an AMQP consumer with the types and
values it was published with (every 0-9-1 field type and RabbitMQ's), while STOMP, Kafka
and SQL92 filters read each header as text, and a Kafka header's bytes reach AMQP as a
byte array and STOMP in base64 (docs/architecture.md's cross-protocol table)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import struct
import time
from collections.abc import Iterator

import pika
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pamqp import commands, decode, encode, frame
from pamqp.body import ContentBody

from rocketport.core.config import ProtocolConfig
from tests.protocols.amqp.raw_client import RawAmqp
from tests.protocols.amqp.test_pika import _drain
from tests.protocols.stomp.stomp_support import connect as stomp_connect
from tests.support.live_broker import LiveBroker, start_live_broker

TIMEOUT_S = 20


@pytest.fixture
def broker(small_config) -> Iterator[LiveBroker]:
    """AMQP, STOMP and Kafka on one store."""
    live = start_live_broker(dataclasses.replace(
        small_config, listen_port=0, namesrv=ProtocolConfig(True, 0), kafka=ProtocolConfig(True, 0),
        amqp=ProtocolConfig(True, 0), stomp=ProtocolConfig(True, 0), mapped_file_size_commit_log=8 << 20))
    try:
        yield live
    finally:
        live.stop()


def _lstr(raw: bytes) -> bytes:
    return struct.pack(">I", len(raw)) + raw


def _entry(name: bytes, kind: bytes, value: bytes) -> bytes:
    return bytes((len(name),)) + name + kind + value


def _table(*entries: bytes) -> bytes:
    return _lstr(b"".join(entries))


# one of every field type RabbitMQ reads and writes (its 0-9-1 errata: 's' is a signed
# 16-bit integer, 'i' an unsigned 32-bit one), nested tables and arrays included
EVERY_TYPE = _table(
    _entry(b"bool", b"t", b"\x01"),
    _entry(b"int8", b"b", struct.pack(">b", -5)),
    _entry(b"uint8", b"B", struct.pack(">B", 250)),
    _entry(b"int16", b"s", struct.pack(">h", -300)),
    _entry(b"uint16", b"u", struct.pack(">H", 65000)),
    _entry(b"int32", b"I", struct.pack(">i", -70000)),
    _entry(b"uint32", b"i", struct.pack(">I", 4_000_000_000)),
    _entry(b"int64", b"l", struct.pack(">q", -(2 ** 40))),
    _entry(b"float", b"f", struct.pack(">f", 1.5)),
    _entry(b"double", b"d", struct.pack(">d", 2.25)),
    _entry(b"decimal", b"D", struct.pack(">Bi", 2, 12345)),
    _entry(b"string", b"S", _lstr("text é".encode())),
    _entry(b"bytes", b"x", _lstr(b"\x00\xff\x01")),
    _entry(b"array", b"A", _lstr(b"S" + _lstr(b"a") + b"I" + struct.pack(">i", 1) + b"V"
                                 + b"F" + _table(_entry(b"k", b"S", _lstr(b"v"))))),
    _entry(b"time", b"T", struct.pack(">Q", 1_700_000_000)),
    _entry(b"table", b"F", _table(_entry(b"inner", b"S", _lstr(b"v")),
                                  _entry(b"deeper", b"F", _table(_entry(b"n", b"l", struct.pack(">q", 7)))))),
    _entry(b"void", b"V", b""),
)


def _content_header(channel: int, body_size: int, table: bytes) -> bytes:
    payload = struct.pack(">HHQH", 60, 0, body_size, 1 << 13) + table  # headers only
    return struct.pack(">BHI", 2, channel, len(payload)) + payload + b"\xce"


def _read_raw(raw: RawAmqp) -> tuple[int, bytes]:
    """The next frame as (type, payload), undecoded."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if len(raw.buf) >= 7:
            kind, _, size = struct.unpack_from(">BHI", raw.buf)
            if len(raw.buf) >= 8 + size:
                payload, raw.buf = raw.buf[7:7 + size], raw.buf[8 + size:]
                return kind, payload
        raw.buf += raw.sock.recv(65536)
    raise TimeoutError("no frame")


def test_every_field_type_comes_back_byte_for_byte(broker):
    """A raw publisher's table of every field type, read back with basic.get: the same
    wire bytes, so the same types and values (pamqp decodes both alike)."""
    port = broker.endpoint("amqp")[1]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        conn.channel().queue_declare("typed")
    raw = RawAmqp(port)
    raw.send(1, commands.Channel.Open())
    assert isinstance(raw.read_frame()[1], commands.Channel.OpenOk)
    raw.send(1, commands.Confirm.Select())
    assert isinstance(raw.read_frame()[1], commands.Confirm.SelectOk)
    raw.send_raw(frame.marshal(commands.Basic.Publish(exchange="", routing_key="typed"), 1)
                 + _content_header(1, 4, EVERY_TYPE) + frame.marshal(ContentBody(b"body"), 1))
    assert isinstance(raw.read_frame()[1], commands.Basic.Ack)
    raw.send(1, commands.Basic.Get(queue="typed", no_ack=True))
    kind, _ = _read_raw(raw)  # get-ok
    kind, header = _read_raw(raw)
    assert kind == 2
    flags = struct.unpack_from(">H", header, 12)[0]
    assert flags == 1 << 13  # nothing but the headers, as published
    assert header[14:] == EVERY_TYPE
    _, table = decode.field_table(header[14:])
    _, published = decode.field_table(EVERY_TYPE)
    assert table == published and [type(v) for v in table.values()] == [type(v) for v in published.values()]
    assert table["uint32"] == 4_000_000_000 and table["int16"] == -300 and table["void"] is None
    assert table["decimal"] == decimal.Decimal("123.45") and table["bytes"] == b"\x00\xff\x01"
    raw.close()


def test_pika_headers_keep_their_types_and_celerys_timelimit_unpacks(broker):
    port = broker.endpoint("amqp")[1]
    headers = {"timelimit": [None, None], "retries": 3, "eta": None, "ok": True,  # pika writes no floats
               "price": decimal.Decimal("9.99"), "at": datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.timezone.utc),
               "blob": b"\x00\x01\xfe", "nested": {"a": [1, "two", {"b": False}]}, "id": "task-1"}
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", q, b"task", pika.BasicProperties(headers=headers))
        (_, props, body), = _drain(ch, q, 1)
    assert body == b"task"
    got = props.headers
    soft, hard = got["timelimit"]  # Celery's worker: ValueError when it came back as a string
    assert (soft, hard) == (None, None)
    assert got == headers
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in headers.items()}


def _kafka_records(broker: LiveBroker, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "typed-" + topic,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(8)])
    got: list = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    consumer.close()
    return got


def test_typed_headers_read_as_text_by_stomp_kafka_and_sql92(broker):
    """STOMP and Kafka readers see each header's text (numbers as digits, booleans
    true/false, arrays as JSON, no hidden table), content_type is STOMP's content-type,
    and a STOMP selector compares a numeric header as a number."""
    port = broker.endpoint("amqp")[1]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        conn.channel().exchange_declare("typed-x", "fanout")
    stomp, listener = stomp_connect(broker)
    stomp.subscribe("/topic/typed-x", "1", headers={"selector": "n > 3"})
    stomp.subscribe("/topic/typed-x", "2")
    stomp.send("/topic/typed-x", b"fence", headers={"n": "0", "receipt": "r"})
    listener.wait_receipt("r")
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for n in (2, 10, 30):
            ch.basic_publish("typed-x", "", b"n%d" % n, pika.BasicProperties(
                content_type="application/json",
                headers={"n": n, "ok": n > 5, "pair": [n, None], "s": "text"}))
    messages = listener.wait_messages(1 + 3 + 2)
    selected = sorted(body for headers, body in messages if headers["subscription"] == "1")
    assert selected == [b"n10", b"n30"]  # as text "10" > "3" would be false
    headers = next(h for h, body in messages if body == b"n10" and h["subscription"] == "2")
    assert (headers["n"], headers["ok"], headers["pair"], headers["s"]) == ("10", "true", "[10,null]", "text")
    assert headers["content-type"] == "application/json" and "content_type" not in headers
    assert "AMQP_HEADERS" not in headers
    stomp.disconnect()
    records = [r for r in _kafka_records(broker, "typed-x", 4) if r.value() == b"n30"]
    kafka_headers = dict(records[0].headers())
    assert kafka_headers["n"] == b"30" and kafka_headers["pair"] == b"[30,null]" and kafka_headers["ok"] == b"true"
    assert "AMQP_HEADERS" not in kafka_headers


def test_kafka_binary_headers_reach_amqp_as_byte_arrays_and_stomp_in_base64(broker):
    port = broker.endpoint("amqp")[1]
    binary = b"\xff\x00\x01\xfe"
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        ch.exchange_declare("kafka-bin", "fanout")
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(q, "kafka-bin")
        stomp, listener = stomp_connect(broker)
        stomp.subscribe("/topic/kafka-bin", "1")
        stomp.send("/topic/kafka-bin", b"fence", headers={"receipt": "r"})
        listener.wait_receipt("r")
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("kafka-bin", value=b"k", headers=[("bin", binary), ("txt", "héllo".encode())])
        assert producer.flush(20) == 0
        got = _drain(ch, q, 2)
    (_, props, _), = [m for m in got if m[2] == b"k"]
    assert props.headers["bin"] == binary and isinstance(props.headers["bin"], bytes)  # 'x', the octets
    assert props.headers["txt"] == "héllo"
    headers, _ = next(m for m in listener.wait_messages(2) if m[1] == b"k")
    assert headers["bin"] == "/wAB/g==" and headers["x-base64-headers"] == "bin"
    assert headers["txt"] == "héllo"
    stomp.disconnect()
    kafka, = [r for r in _kafka_records(broker, "kafka-bin", 2) if r.value() == b"k"]
    assert dict(kafka.headers())["bin"] == binary  # Kafka to Kafka: the octets as sent


def test_a_stomp_content_type_is_the_amqp_content_type(broker):
    port = broker.endpoint("amqp")[1]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        ch.exchange_declare("from-stomp", "fanout")
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(q, "from-stomp")
        stomp, listener = stomp_connect(broker)
        stomp.send("/topic/from-stomp", b"{}", headers={"content-type": "application/json", "n": "1",
                                                        "receipt": "sent"})
        listener.wait_receipt("sent")
        stomp.disconnect()
        (_, props, body), = _drain(ch, q, 1)
    assert body == b"{}" and props.content_type == "application/json"
    assert props.headers == {"n": "1"}  # a STOMP header's value is text


def test_a_keyed_run_stores_a_typed_table_as_the_general_path_does():
    """A keyed publisher's run converts each content header in one step
    (`properties.stored_properties`); what it makes of a typed table is what the general
    path stores (the table kept whole, no header's text: other readers make those when they
    read), or it leaves the publish to it."""
    from pika.spec import BasicProperties

    from rocketport.common.field_table import with_header_texts
    from rocketport.common.message import decode_properties as decode_stored
    from rocketport.common.message import encode_properties as stored
    from rocketport.protocols.amqp.codec import decode_properties
    from rocketport.protocols.amqp.properties import stored_properties, to_message_properties

    tables = [{"id": "t-1", "n": 5, "eta": None, "limits": [None, None], "ok": False, "price": decimal.Decimal("9.99"),
               "at": datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc), "blob": b"\x00\xfe", "t": {"a": 1}},
              {"a": "x\x01y", "n": 1}, {"n": 1, "a\x01b": "v"}, {"only": "strings", "é": "ü"}]
    for headers in tables:
        raw = b"".join(BasicProperties(delivery_mode=2, message_id="m", headers=headers).encode())
        for routing_key in ("", "rk"):
            tail = stored({"TAGS": routing_key}) if routing_key else b""
            general = stored(to_message_properties(decode_properties(raw), routing_key, 0))
            assert stored_properties(raw, tail) == general, headers
    kept = decode_stored(stored_properties(b"".join(BasicProperties(headers=tables[0]).encode()), b""))
    assert set(kept) == {"AMQP_HEADERS"}  # no text at publish
    assert with_header_texts(kept) == {"at": "1714521600", "blob": "\x00\udcfe", "id": "t-1", "limits": "[null,null]",
                                       "n": "5", "ok": "false", "price": "9.99", "t": '{"a":1}'}
    for apart in ({"n": 1, "x-delay": 5}, {"n": 1, "DEDUP_KEY": "d"}, {"n": 1, "KEYS": "k"}, {"a\x01b": "v"}):
        raw = b"".join(BasicProperties(headers=apart).encode())
        assert stored_properties(raw, b"") is None  # the general path's: a delay, a name the core reads, a bad name


def test_rocketmq_consumers_read_typed_headers_as_user_properties(broker):
    """A RocketMQ (remoting) pull shows each header of a kept table as a user property,
    as text, never the hidden table; an SQL92 subscription compares a numeric header as a
    number."""
    from rocketport.client import sync

    port = broker.endpoint("amqp")[1]
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)) as conn:
        ch = conn.channel()
        ch.exchange_declare("typed-rmq", "fanout")
        ch.confirm_delivery()
        for n in (2, 10, 30):
            ch.basic_publish("typed-rmq", "", b"n%d" % n, pika.BasicProperties(
                content_type="text/plain", headers={"n": n, "ok": n > 5, "pair": [n, None], "s": "text"}))

    def poll(group: str, count: int, **subscription: str) -> list:
        with sync.PullConsumer(group, broker.namesrv, consume_from="first") as puller:
            puller.assign(puller.queues("typed-rmq"), **subscription)
            got: list = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < count and time.monotonic() < deadline:
                got += puller.poll(timeout_s=0.2)
            return got

    by_body = {m.body: m for m in poll("TypedReader", 3)}
    props = by_body[b"n10"].properties
    assert (props["n"], props["ok"], props["pair"], props["s"]) == ("10", "true", "[10,null]", "text")
    assert props["content_type"] == "text/plain" and "AMQP_HEADERS" not in props
    assert sorted(m.body for m in poll("TypedSql", 2, sql="n > 3")) == [b"n10", b"n30"]


def test_a_publishers_tables_are_checked_as_a_walk_checks_them():
    """`field_table.entry_names` reuses the last table's check when a table differs from it
    only in long strings' values: the names are a full walk's, and a table that differs
    anywhere else (a broken entry after a run of good ones) is still refused."""
    from rocketport.common.field_table import entry_names, header_texts

    def table(i: int, k: str = "v") -> bytes:
        return encode.field_table({"id": "task-%04d" % i, "n": i % 3, "x": [1, None], "k": k})

    run = [table(i) for i in range(20)] + [table(3)] * 3 + [table(5, "")] + [table(i, "w") for i in range(5)]
    for raw in run:
        assert entry_names(raw, 0) == ([name.encode() for name, _ in header_texts(raw, 0)[0]], len(raw))
    broken = bytearray(table(7))
    broken[broken.index(b"\x01x") + 2] = 0x99  # the array's type tag
    with pytest.raises(ValueError):
        entry_names(bytes(broken), 0)


def test_a_typed_publishers_run_stores_each_header_as_the_general_path_does():
    """`stored_properties` stores a typed content header that differs from the last one
    only in a task id as the last one was, with its own table: each of a run is still what
    the general path stores, and one that differs elsewhere (another basic property, an
    integer, a name, a broken entry, a delay) is worked out again or left to it."""
    from pika.spec import BasicProperties

    from rocketport.common.message import encode_properties as stored
    from rocketport.protocols.amqp.codec import decode_properties
    from rocketport.protocols.amqp.properties import stored_properties, to_message_properties

    def raw(i: int, n: int = 3, name: str = "retries", correlation: str = "c1", **more: object) -> bytes:
        headers = {"id": "task-%06d" % i, name: n, "eta": None, "at": datetime.datetime(2024, 5, 1), **more}
        return b"".join(BasicProperties(delivery_mode=2, correlation_id=correlation, priority=1,
                                        headers=headers).encode())

    run = ([raw(i) for i in range(6)] + [raw(6, n=4), raw(7, n=4), raw(8, correlation="c2"), raw(9, correlation="c2"),
           raw(10, name="retrie_"), raw(11, name="retrie_"), raw(12, **{"x-delay": 5}), raw(13), raw(14)]
           + [raw(i, task="a" * (i % 3)) for i in range(15, 21)] + [raw(21), raw(22)])
    tail = stored({"TAGS": "rk"})
    for one in run:
        decoded = decode_properties(one, False)
        got = stored_properties(one, tail)
        if "x-delay" in decoded["headers"]:
            assert got is None
        else:
            assert got == stored(to_message_properties(decoded, "rk", 0)), decoded["headers"]
    broken = bytearray(raw(23))
    stored_properties(raw(22), tail)
    broken[broken.index(b"\x03etaV") + 4] = 0x99  # the void's type tag: unknown
    assert stored_properties(bytes(broken), tail) is None
