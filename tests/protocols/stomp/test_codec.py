"""The sans-IO STOMP codec, byte string by byte string: grammar, escaping per version,
content-length bodies, heart-beats between frames, limits."""

from __future__ import annotations

import pytest

from rocketport.protocols.stomp.codec import V10, V11, V12, Frame, Limits, escape, serialize, unescape
from rocketport.protocols.stomp.connection import ProtocolError, StompConnection


def feed(data: bytes, version: str = V12, limits: Limits | None = None) -> list:
    conn = StompConnection(limits)
    assert conn.negotiated(version) == []
    return conn.receive_data(data)


def test_a_frame_with_headers_and_body():
    [frame] = feed(b"SEND\ndestination:/queue/a\nx:1\n\nhello\0")
    assert frame == Frame("SEND", {"destination": "/queue/a", "x": "1"}, b"hello")


def test_crlf_line_endings_and_heart_beats_between_frames():
    events = feed(b"\n\r\nSEND\r\ndestination:/queue/a\r\n\r\nbody\0\n\n\r\nACK\nid:1\n\n\0\n")
    assert [(f.command, f.headers, f.body) for f in events] == [
        ("SEND", {"destination": "/queue/a"}, b"body"), ("ACK", {"id": "1"}, b"")]


def test_content_length_body_may_hold_nul_octets():
    body = b"\0\x01binary\0\n\0"
    [frame] = feed(b"SEND\ndestination:/queue/a\ncontent-length:%d\n\n" % len(body) + body + b"\0")
    assert frame.body == body


def test_a_frame_split_at_every_octet_comes_out_once():
    data = b"SEND\ndestination:/queue/a\ncontent-length:3\n\n\0a\0\0SEND\ndestination:/q\n\nz\0"
    conn = StompConnection()
    conn.negotiated(V12)
    out = []
    for i in range(len(data)):
        out += conn.receive_data(data[i:i + 1])
    assert [f.body for f in out] == [b"\0a\0", b"z"]
    assert conn.buffered == 0


def test_repeated_header_first_wins():
    [frame] = feed(b"SEND\ndestination:/queue/a\ndestination:/queue/b\n\n\0")
    assert frame.headers["destination"] == "/queue/a"


@pytest.mark.parametrize("version,raw,value", [
    (V12, b"a\\cb\\nc\\\\d\\re", "a:b\nc\\d\re"),
    (V11, b"a\\cb\\nc\\\\d", "a:b\nc\\d"),
    (V10, b"a\\cb", "a\\cb"),  # 1.0 has no escapes
])
def test_header_unescaping_per_version(version, raw, value):
    [frame] = feed(b"SEND\ndestination:/queue/a\nk:" + raw + b"\n\n\0", version)
    assert frame.headers["k"] == value


def test_value_may_contain_colons_in_1_0():
    [frame] = feed(b"SEND\ndestination:/queue/a\nurl:http://x:1\n\n\0", V10)
    assert frame.headers["url"] == "http://x:1"


@pytest.mark.parametrize("version,bad", [(V12, b"\\t"), (V11, b"\\r"), (V12, b"trailing\\")])
def test_undefined_escape_is_an_error(version, bad):
    [error] = feed(b"SEND\ndestination:/queue/a\nk:" + bad + b"\n\n\0", version)
    assert isinstance(error, ProtocolError) and "escape" in error.reason


def test_connect_headers_are_not_unescaped():
    [frame] = feed(b"CONNECT\naccept-version:1.2\nlogin:a\\cb\n\n\0")
    assert frame.headers["login"] == "a\\cb"


def test_escape_round_trip_and_serialize():
    for version in (V11, V12):
        text = "a:b\nc\\d" + ("\re" if version == V12 else "")
        assert unescape(escape(text, version), version) == text
    data = serialize("MESSAGE", {"k:x": "v\nw", "content-length": "2"}, b"\0z", V12)
    assert data == b"MESSAGE\nk\\cx:v\\nw\ncontent-length:2\n\n\0z\0"
    assert serialize("CONNECTED", {"version": "1.2", "server": "a:b"}, b"", V12) == \
        b"CONNECTED\nversion:1.2\nserver:a:b\n\n\0"


@pytest.mark.parametrize("data,reason", [
    (b"FOO\n\n\0", "unknown command"),
    (b"SEND\nno-colon\n\n\0", "without ':'"),
    (b"SEND\ncontent-length:x\n\n\0", "content-length"),
    (b"SEND\ncontent-length:-1\n\n\0", "content-length"),
    (b"SEND\ncontent-length:1\n\nab\0", "does not end with NUL"),
    (b"SEND\nk\0:v\n\n\0", "NUL"),
    (b"SEND\n\xff:v\n\n\0", "UTF-8"),
])
def test_malformed_frames(data, reason):
    events = feed(data)
    assert isinstance(events[-1], ProtocolError) and reason in events[-1].reason


def test_frames_behind_connect_wait_for_the_negotiated_version():
    conn = StompConnection()
    [connect] = conn.receive_data(b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:/q\nk:a\\cb\n\n\0")
    assert connect.command == "CONNECT" and conn.buffered > 0
    [send] = conn.negotiated(V12)
    assert send.headers["k"] == "a:b" and conn.buffered == 0


def test_nothing_is_parsed_after_an_error():
    conn = StompConnection()
    assert isinstance(conn.receive_data(b"BAD\n\n\0")[0], ProtocolError)
    assert conn.failed and conn.receive_data(b"SEND\ndestination:/q\n\n\0") == []


def test_limits():
    limits = Limits(max_headers=3, max_header_length=20, max_body=10)
    assert "headers" in feed(b"SEND\na:1\nb:2\nc:3\nd:4\n\n\0", limits=limits)[0].reason
    assert "longer" in feed(b"SEND\nk:" + b"v" * 30 + b"\n\n\0", limits=limits)[0].reason
    assert feed(b"SEND\ncontent-length:11\n\n", limits=limits)[0].reason == \
        "PRECONDITION_FAILED - message size 11 is larger than configured max size 10"  # RabbitMQ's words
    assert "size 11 or more is larger" in feed(b"SEND\n\n" + b"x" * 11, limits=limits)[0].reason
    assert "size 11 is larger" in feed(b"SEND\n\n" + b"x" * 11 + b"\0", limits=limits)[0].reason
    assert "exceed the size limit" in feed(b"SEND\na:" + b"v" * 200, limits=limits)[0].reason
    [ok] = feed(b"SEND\ncontent-length:10\n\n" + b"x" * 10 + b"\0", limits=limits)
    assert ok.body == b"x" * 10
