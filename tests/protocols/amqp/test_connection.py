"""The sans-IO AMQP connection, byte by byte: no sockets."""

from __future__ import annotations

from pamqp import commands, frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from rocketport.protocols.amqp import codec
from rocketport.protocols.amqp.connection import AmqpServerConnection
from rocketport.protocols.amqp.events import (
    CloseReceived,
    ConnectionFailed,
    ContentReceived,
    ContentTooLarge,
    HeaderMismatch,
    HeaderReceived,
    MethodReceived,
    OpenReceived,
    StartOkReceived,
)


def _open(frame_max: int = 131072, max_body: int = 1 << 20) -> AmqpServerConnection:
    conn = AmqpServerConnection(frame_max=frame_max, max_body=max_body)
    assert conn.receive_data(codec.PROTOCOL_HEADER) == [HeaderReceived()]
    events = conn.receive_data(frame.marshal(commands.Connection.StartOk(
        client_properties={}, mechanism="PLAIN", response="\0u\0p"), 0))
    assert isinstance(events[0], StartOkReceived) and events[0].response == b"\0u\0p"
    conn.send_tune()
    assert conn.receive_data(frame.marshal(commands.Connection.TuneOk(100, frame_max, 0), 0)) == []
    assert conn.receive_data(frame.marshal(commands.Connection.Open("/"), 0)) == [OpenReceived("/")]
    conn.send_open_ok()
    return conn


def _publish_frames(channel: int, body: bytes, frame_max: int, routing_key: str = "k",
                    content_type: str = "text/plain") -> bytes:
    out = frame.marshal(commands.Basic.Publish(exchange="x", routing_key=routing_key), channel)
    out += frame.marshal(ContentHeader(body_size=len(body), properties=commands.Basic.Properties(
        content_type=content_type)), channel)
    for part in codec.content_frames(channel, b"\x00\x00", body, frame_max)[1:]:
        out += bytes(part)
    return out


def test_a_wrong_protocol_header_is_answered_by_ours():
    conn = AmqpServerConnection()
    assert conn.receive_data(b"AMQP\x00\x00\x08\x00") == [HeaderMismatch()]
    assert AmqpServerConnection().receive_data(b"GET / HTTP/1.1\r\n") == [HeaderMismatch()]


def test_frames_split_anywhere_reassemble_and_bodies_assemble_across_frames():
    conn = _open(frame_max=4096)
    body = bytes(range(256)) * 40  # 10,240 bytes: three body frames at frame_max 4096
    data = _publish_frames(3, body, 4096)
    events = []
    for i in range(0, len(data), 7):  # seven bytes per read
        events += conn.receive_data(data[i:i + 7])
    assert len(events) == 1 and isinstance(events[0], ContentReceived)
    assert events[0].channel == 3 and events[0].bodies == [body]
    assert events[0].method.routing_key == "k" and events[0].properties == {"content_type": "text/plain"}


def _bodies(events: list) -> list[tuple[int, bytes]]:
    return [(e.channel, body) for e in events for body in e.bodies]


def test_publish_triples_in_one_read_and_interleaved_channels():
    """Whole triples in one buffer are read without assembly (the fast path); a triple
    cut anywhere, or interleaved with another channel's frames, reads the same."""
    bodies = [b"a" * 100, b"b" * 3, b"c" * 4000]
    data = b"".join(_publish_frames(1 + i % 2, body, 4096) for i, body in enumerate(bodies))
    expected = [(1 + i % 2, body) for i, body in enumerate(bodies)]
    conn = _open(frame_max=4096)
    assert _bodies(conn.receive_data(data)) == expected
    for cut in (1, 20, 30, len(data) - 1):
        conn = _open(frame_max=4096)
        events = conn.receive_data(data[:cut]) + conn.receive_data(data[cut:])
        assert _bodies(events) == expected
        assert all(e.method.routing_key == "k" and e.properties == {"content_type": "text/plain"} for e in events)
    # channel 2's publish starts between channel 1's method and header: no triple
    one, two = _publish_frames(1, b"x", 4096), _publish_frames(2, b"y", 4096)
    method_end = 7 + int.from_bytes(one[3:7], "big") + 1
    conn = _open(frame_max=4096)
    events = conn.receive_data(one[:method_end] + two + one[method_end:])
    assert _bodies(events) == [(2, b"y"), (1, b"x")]


def test_a_run_of_one_method_is_one_event_with_each_ones_properties_when_they_differ():
    """Triples in a row on one channel with the same method (body sizes may differ) are one
    event with their bodies in order; when their properties differ (a keyed publisher's),
    the event holds each one's undecoded (``varied``). Another routing key or another
    channel starts a new event, and so does a new read."""
    data = (_publish_frames(1, b"a", 4096) + _publish_frames(1, b"bb", 4096) + _publish_frames(1, b"c", 4096)
            + _publish_frames(1, b"d", 4096, routing_key="k2") + _publish_frames(1, b"e", 4096, routing_key="k2")
            + _publish_frames(1, b"f", 4096, routing_key="k2", content_type="text/html")
            + _publish_frames(1, b"g", 4096, routing_key="k2", content_type="text/html")
            + _publish_frames(2, b"h", 4096, routing_key="k2", content_type="text/html"))
    conn = _open(frame_max=4096)
    events = conn.receive_data(data)
    assert [(e.channel, e.method.routing_key, e.properties.get("content_type"), e.bodies) for e in events] == [
        (1, "k", "text/plain", [b"a", b"bb", b"c"]), (1, "k2", "text/plain", [b"d", b"e", b"f", b"g"]),
        (2, "k2", "text/html", [b"h"])]
    assert events[0].varied is None and events[2].varied is None
    assert [codec.decode_properties(raw)["content_type"] for raw in events[1].varied] == [
        "text/plain", "text/plain", "text/html", "text/html"]
    again = conn.receive_data(_publish_frames(2, b"i", 4096, routing_key="k2", content_type="text/html"))
    assert len(again) == 1 and again[0].bodies == [b"i"] and events[-1].bodies == [b"h"]


def test_a_run_of_one_body_size_cut_anywhere_reads_the_same_and_a_bad_frame_end_in_it_is_an_error():
    """Bodies of one size in a run are checked by comparing what lies between them."""
    data = b"".join(_publish_frames(1, b"%03d" % i, 4096) for i in range(6))
    expected = [(1, b"%03d" % i) for i in range(6)]
    for cut in range(1, len(data)):
        conn = _open(frame_max=4096)
        assert _bodies(conn.receive_data(data[:cut]) + conn.receive_data(data[cut:])) == expected, cut
    bad = bytearray(data)
    bad[len(data) // 6 * 4 - 1] = 0  # the fourth body's frame end
    events = _open(frame_max=4096).receive_data(bytes(bad))
    assert _bodies(events[:-1]) == expected[:3] and isinstance(events[-1], ConnectionFailed) \
        and events[-1].code == 501


def test_a_triple_whose_body_frame_lies_is_a_frame_error():
    data = bytearray(_publish_frames(1, b"z" * 10, 4096))
    data[-15:-11] = (11).to_bytes(4, "big")  # the body frame claims 11 bytes: its end is off
    conn = _open(frame_max=4096)
    events = conn.receive_data(bytes(data) + b"\x00" * 8)
    assert isinstance(events[-1], ConnectionFailed) and events[-1].code == 501


def test_a_frame_over_frame_max_is_a_frame_error():
    conn = _open(frame_max=4096)
    events = conn.receive_data(b"\x03\x00\x01\x00\x00\x20\x00" + b"x" * 8192 + b"\xce")
    assert isinstance(events[0], ConnectionFailed) and events[0].code == 501


def test_a_bad_frame_end_and_an_unknown_frame_type_are_frame_errors():
    conn = _open()
    assert conn.receive_data(b"\x01\x00\x01\x00\x00\x00\x04\x00\x14\x00\x0a\x00")[0].code == 501
    conn = _open()
    assert conn.receive_data(b"\x09\x00\x01\x00\x00\x00\x00\xce")[0].code == 501


def test_content_out_of_order_is_unexpected_frame():
    conn = _open()
    events = conn.receive_data(frame.marshal(ContentBody(b"x"), 1))
    assert events[0].code == 505
    conn = _open()
    data = frame.marshal(commands.Basic.Publish(exchange="x"), 1) + frame.marshal(commands.Queue.Declare(), 1)
    assert conn.receive_data(data)[0].code == 505


def test_unknown_methods_and_bad_arguments():
    conn = _open()
    events = conn.receive_data(b"\x01\x00\x01\x00\x00\x00\x04\x00\x63\x00\x01\xce")
    assert events[0].code == 540
    conn = _open()
    truncated = b"\x00\x32\x00\x0a\xff"  # queue.declare whose queue name claims 255 bytes
    events = conn.receive_data(b"\x01\x00\x01" + len(truncated).to_bytes(4, "big") + truncated + b"\xce")
    assert events[0].code == 502


def test_a_body_over_the_limit_is_read_and_reported_without_being_kept():
    conn = _open(max_body=100)
    events = conn.receive_data(_publish_frames(1, b"y" * 500, 131072))
    assert events == [ContentTooLarge(1, 500)]


def test_after_our_close_only_close_and_close_ok_are_read():
    conn = _open()
    conn.close(320, "CONNECTION_FORCED - bye")
    assert conn.receive_data(frame.marshal(commands.Queue.Declare(), 1)) == []
    events = conn.receive_data(frame.marshal(commands.Connection.Close(200, "bye", 0, 0), 0))
    assert events == [CloseReceived(200, "bye")]


def test_a_closing_channel_drops_its_frames_until_close_ok():
    conn = _open()
    conn.close_channel(1, 404, "NOT_FOUND")
    assert conn.receive_data(frame.marshal(commands.Queue.Declare(), 1)) == []
    assert conn.receive_data(frame.marshal(commands.Channel.CloseOk(), 1))[0].channel == 1
    events = conn.receive_data(frame.marshal(commands.Queue.Declare(queue="q"), 1))
    assert isinstance(events[0], MethodReceived) and events[0].method.queue == "q"


def test_get_ok_frames_decode_as_pamqp_encodes_them():
    raw = codec.get_ok_frame(1, 9, False, b"", b"q", 3)
    _, _, method = frame.unmarshal(raw)
    assert (method.delivery_tag, method.exchange, method.routing_key, method.message_count) == (9, "", "q", 3)


def test_deliveries_from_one_template_decode_as_three_frames_each():
    """One template serves deliveries of any tag, redelivered flag and body size; a body
    over frame_max is split."""
    props = b"\x90\x00\x0atext/plain\x02"  # content_type and delivery_mode
    deliveries = codec.Deliveries(2, codec.shortstr_of("ct"), codec.shortstr_of("ex") + codec.shortstr_of("rk"),
                                  props)
    for tag, redelivered, body in ((5, False, b"hello"), (6, True, b"hi"), (1 << 40, False, b"hello")):
        parts: list = []
        deliveries.frames_into(parts, tag, redelivered, body, 131072)
        raw = b"".join(parts)
        used, channel, method = frame.unmarshal(raw)
        assert (channel, method.consumer_tag, method.delivery_tag, method.redelivered, method.exchange,
                method.routing_key) == (2, "ct", tag, redelivered, "ex", "rk")
        used2, _, header = frame.unmarshal(raw[used:])
        assert header.body_size == len(body) and header.properties.content_type == "text/plain"
        assert header.properties.delivery_mode == 2
        used3, _, value = frame.unmarshal(raw[used + used2:])
        assert value.value == body and used + used2 + used3 == len(raw)
    split: list = []
    codec.Deliveries(1, codec.shortstr_of("ct"), codec.shortstr_of("") + codec.shortstr_of("rk"),
                     b"\x00\x00").frames_into(split, 6, True, b"x" * 10000, 4096)
    raw, frames = b"".join(split), []
    while raw:  # deliver, header, three body frames, none over frame_max
        used, _, value = frame.unmarshal(raw)
        assert used <= 4096
        frames.append(value)
        raw = raw[used:]
    assert len(frames) == 5
    method = frames[0]
    assert (method.delivery_tag, method.redelivered, method.exchange, method.routing_key) == (6, True, "", "rk")
    assert b"".join(f.value for f in frames[2:]) == b"x" * 10000


def test_a_start_ok_response_outside_latin_1_reaches_the_login_as_its_utf_8_bytes() -> None:
    """pamqp hands a long string that decodes as UTF-8 over as str: the login must see the
    bytes the client sent (a password with 'ʄ' in it), not an encoding error escaping
    receive_data (the 1,000,000-input AMQP fuzz found three)."""
    conn = AmqpServerConnection(frame_max=131072, max_body=1 << 20)
    conn.receive_data(codec.PROTOCOL_HEADER)
    response = "\0user\0pässʄ"
    events = conn.receive_data(frame.marshal(commands.Connection.StartOk(
        client_properties={}, mechanism="PLAIN", response=response), 0))
    assert isinstance(events[0], StartOkReceived)
    assert events[0].response == response.encode("utf-8")
