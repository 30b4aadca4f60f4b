"""Byte-level tests of the remoting frame codec and the sans-IO connection."""

from __future__ import annotations

import struct

import construct as cs
import pytest

from rocketport.protocols.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    CommandReceived,
    LanguageCode,
    ProtocolError,
    RemotingCommand,
    RemotingConnection,
    RequestCode,
    ResponseCode,
    SerializeType,
    body_length,
    encode_command,
    make_response,
)
from rocketport.protocols.remoting.frame import JsonFrameTemplate, json_text

# An independent description of the frame layout, written with construct from the
# protocol description (not from our encoder), used to check what the encoder emits.
FRAME = cs.Struct(
    "length" / cs.Int32sb,
    "word" / cs.Int32ub,
    "header" / cs.Bytes(cs.this.word & 0xFFFFFF),
    "body" / cs.Bytes(cs.this.length - 4 - (cs.this.word & 0xFFFFFF)),
    cs.Terminated,
)
BINARY_HEADER = cs.Struct(
    "code" / cs.Int16sb,
    "language" / cs.Int8ub,
    "version" / cs.Int16sb,
    "opaque" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "remark" / cs.PascalString(cs.Int32sb, "utf8"),
    "ext" / cs.Prefixed(
        cs.Int32sb,
        cs.GreedyRange(
            cs.Struct(
                "key" / cs.PascalString(cs.Int16sb, "utf8"),
                "value" / cs.PascalString(cs.Int32sb, "utf8"),
            )
        ),
    ),
)


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """Build a frame by hand, independently of the encoder."""
    return (
        struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header))
        + header
        + body
    )


def feed(data: bytes, conn: RemotingConnection | None = None) -> list:
    return (conn or RemotingConnection()).receive_data(data)


def only_command(events: list) -> RemotingCommand:
    assert len(events) == 1 and isinstance(events[0], CommandReceived), events
    return events[0].command


# --- encoding ----------------------------------------------------------------------------


def test_json_response_bytes_match_fastjson_layout() -> None:
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=42, version=395)
    response = make_response(request, ResponseCode.SUCCESS, ext_fields={"msgId": "AB", "queueId": "1"}, body=b"xy")
    header = (
        b'{"code":0,"extFields":{"msgId":"AB","queueId":"1"},"flag":1,"language":"JAVA",'
        b'"opaque":42,"serializeTypeCurrentRPC":"JSON","version":395}'
    )
    assert b"".join(encode_command(response)) == frame(header, b"xy")


@pytest.mark.parametrize("uniq", ["7F0000011A2B", "", 'a "quoted" \\ 100% \x01 é'])
def test_response_template_writes_what_the_general_encoder_writes(uniq: str) -> None:
    template = JsonFrameTemplate(ResponseCode.SUCCESS, {
        "msgId": bytes, "queueId": int, "queueOffset": int, "transactionId": bytes,
        "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=-7, version=395)
    response = make_response(request, ResponseCode.SUCCESS, ext_fields={
        "msgId": "AB01", "queueId": "3", "queueOffset": "-1", "transactionId": uniq,
        "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
    made = template.frame(-7, 395, b"AB01", 3, -1, json_text(uniq.encode()))
    assert made == b"".join(encode_command(response))
    [event] = RemotingConnection().receive_data(made)
    assert event.command.ext_fields["transactionId"] == uniq


def test_json_header_carries_remark_only_when_set() -> None:
    parsed = FRAME.parse(b"".join(encode_command(RemotingCommand(code=1, remark="boom"))))
    assert b'"remark":"boom"' in parsed.header
    parsed = FRAME.parse(b"".join(encode_command(RemotingCommand(code=1))))
    assert b"remark" not in parsed.header


def test_binary_header_bytes() -> None:
    command = RemotingCommand(
        code=11,
        language=LanguageCode.CPP,
        version=7,
        opaque=-2,
        flag=FLAG_ONEWAY,
        remark="r",
        ext_fields={"k": "vé"},
        serialize_type=SerializeType.ROCKETMQ,
    )
    expected_header = (
        b"\x00\x0b" b"\x01" b"\x00\x07" b"\xff\xff\xff\xfe" b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x01r"
        b"\x00\x00\x00\x0a" b"\x00\x01k" b"\x00\x00\x00\x03v\xc3\xa9"
    )
    assert b"".join(encode_command(command)) == frame(expected_header, serialize_type=1)


def test_binary_header_parses_with_independent_decoder() -> None:
    command = RemotingCommand(
        code=310, opaque=9, ext_fields={"a": "g", "b": "t"}, serialize_type=SerializeType.ROCKETMQ
    )
    parsed = FRAME.parse(b"".join(encode_command(command)))
    assert parsed.word >> 24 == 1
    header = BINARY_HEADER.parse(parsed.header)
    assert (header.code, header.opaque, header.remark) == (310, 9, "")
    assert {entry.key: entry.value for entry in header.ext} == {"a": "g", "b": "t"}


def test_encoder_passes_body_buffers_through_without_joining() -> None:
    first, second = memoryview(b"abc"), memoryview(b"defg")
    command = RemotingCommand(code=0, flag=FLAG_RESPONSE, body=[first, b"", second])
    buffers = encode_command(command)
    assert buffers[1] is first and buffers[2] is second and len(buffers) == 3
    parsed = FRAME.parse(b"".join(buffers))
    assert parsed.body == b"abcdefg"
    assert body_length(command.body) == 7


def test_binary_encoder_rejects_codes_outside_i16() -> None:
    with pytest.raises(ValueError):
        encode_command(RemotingCommand(code=200050, serialize_type=SerializeType.ROCKETMQ))


def test_make_response_keeps_opaque_and_serialize_type() -> None:
    request = RemotingCommand(code=34, opaque=77, serialize_type=SerializeType.ROCKETMQ, version=5)
    response = make_response(request, ResponseCode.SYSTEM_ERROR, remark="no")
    assert (response.opaque, response.serialize_type, response.code, response.remark) == (
        77,
        SerializeType.ROCKETMQ,
        1,
        "no",
    )
    assert response.is_response and not response.is_oneway
    assert not request.is_response


# --- decoding: what real clients send ------------------------------------------------------


def test_decode_cpp_style_header_with_number_and_boolean_ext_values() -> None:
    header = (
        b'{"code":310,"language":"CPP","version":0,"opaque":3,"flag":0,"remark":null,'
        b'"extFields":{"a":"G","e":3,"g":1700000000000,"k":false,"m":true,"z":null,"x":1.5}}'
    )
    command = only_command(feed(frame(header, b"body")))
    assert command.code == RequestCode.SEND_MESSAGE_V2
    assert command.language is LanguageCode.CPP
    assert command.ext_fields == {
        "a": "G", "e": "3", "g": "1700000000000", "k": "false", "m": "true", "x": "1.5"
    }
    assert bytes(command.body) == b"body"
    assert command.serialize_type is SerializeType.JSON


def test_decode_tolerates_missing_optional_keys_and_string_numbers() -> None:
    command = only_command(feed(frame(b'{"code":"34","opaque":"12"}')))
    assert (command.code, command.opaque, command.flag, command.version) == (34, 12, 0, 0)
    assert command.language is LanguageCode.JAVA
    assert command.ext_fields == {} and command.remark is None and command.body == b""


def test_decode_language_as_number_and_unknown_name() -> None:
    assert only_command(feed(frame(b'{"code":1,"language":9}'))).language is LanguageCode.GO
    assert only_command(feed(frame(b'{"code":1,"language":"COBOL"}'))).language is LanguageCode.OTHER


def test_decode_binary_header_built_by_hand() -> None:
    header = (
        struct.pack(">hBhii", 105, 0, 1, 5, 0)
        + struct.pack(">i", 0)
        + struct.pack(">i", 2 + 5 + 4 + 3)
        + struct.pack(">h", 5) + b"topic"
        + struct.pack(">i", 3) + b"T_1"
    )
    command = only_command(feed(frame(header, b"", serialize_type=1)))
    assert (command.code, command.opaque, command.remark) == (105, 5, None)
    assert command.ext_fields == {"topic": "T_1"}
    assert command.serialize_type is SerializeType.ROCKETMQ


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_round_trip_both_serialize_types(serialize_type: SerializeType) -> None:
    command = RemotingCommand(
        code=11,
        language=LanguageCode.PYTHON,
        version=3,
        opaque=2**31 - 1,
        flag=FLAG_RESPONSE | FLAG_ONEWAY,
        remark="rémark",
        ext_fields={"queueOffset": "12", "ключ": "значение"},
        body=b"\x00\x01payload",
        serialize_type=serialize_type,
    )
    assert only_command(feed(b"".join(encode_command(command)))) == command


def test_partial_reads_byte_by_byte_across_frames() -> None:
    frames = [RemotingCommand(code=i, opaque=i, body=b"b" * i) for i in range(1, 4)]
    stream = b"".join(b"".join(encode_command(c)) for c in frames)
    conn = RemotingConnection()
    events = []
    for i in range(len(stream)):
        events += conn.receive_data(stream[i : i + 1])
    assert [e.command for e in events] == frames
    assert conn.buffered == 0


def test_chunk_boundaries_inside_prefix_header_and_body() -> None:
    command = RemotingCommand(code=10, opaque=1, ext_fields={"b": "T"}, body=b"0123456789")
    raw = b"".join(encode_command(command))
    for cut in (2, 6, 12, len(raw) - 3):
        conn = RemotingConnection()
        assert conn.receive_data(raw[:cut]) == []
        assert conn.buffered == cut
        assert only_command(conn.receive_data(raw[cut:] + raw[:1])) == command
        assert conn.buffered == 1


def test_several_frames_in_one_chunk() -> None:
    commands = [RemotingCommand(code=34, opaque=n) for n in range(5)]
    stream = b"".join(b"".join(encode_command(c)) for c in commands)
    events = feed(stream)
    assert [e.command.opaque for e in events] == [0, 1, 2, 3, 4]


def test_body_of_whole_frame_is_a_view_not_a_copy() -> None:
    raw = b"".join(encode_command(RemotingCommand(code=1, body=b"z" * 1000)))
    body = only_command(feed(raw)).body
    assert isinstance(body, memoryview) and body.readonly and body.obj is raw


def test_body_of_split_frame_is_read_only_and_survives_later_reads() -> None:
    first, second = (b"".join(encode_command(RemotingCommand(code=1, body=fill * 5000)))
                     for fill in (b"a", b"b"))
    conn = RemotingConnection()
    assert conn.receive_data(first[:3000]) == []
    [event] = conn.receive_data(first[3000:] + second[:100])
    body = event.command.body
    assert isinstance(body, memoryview) and body.readonly
    [later] = conn.receive_data(second[100:])
    assert bytes(body) == b"a" * 5000 and bytes(later.command.body) == b"b" * 5000


# --- errors ------------------------------------------------------------------------------


def error_of(events: list) -> ProtocolError:
    assert isinstance(events[-1], ProtocolError), events
    return events[-1]


@pytest.mark.parametrize(
    "prefix, words",
    [
        (struct.pack(">i", -1), "negative"),
        (struct.pack(">i", 3), "cannot hold"),
        (struct.pack(">i", 0x47455420), "exceeds the maximum"),  # "GET " from an HTTP client
    ],
)
def test_bad_length_is_fatal_as_soon_as_four_bytes_arrive(prefix: bytes, words: str) -> None:
    conn = RemotingConnection()
    error = error_of(conn.receive_data(prefix))
    assert error.fatal and words in error.reason and error.opaque is None
    assert conn.failed
    assert conn.receive_data(frame(b'{"code":1}')) == []


def test_configurable_max_frame_length() -> None:
    ok = frame(b'{"code":1}', b"x" * 10)
    assert isinstance(feed(ok, RemotingConnection(max_frame_length=len(ok) - 4))[0], CommandReceived)
    assert error_of(feed(ok, RemotingConnection(max_frame_length=len(ok) - 5))).fatal


def test_header_length_beyond_frame_is_fatal() -> None:
    raw = struct.pack(">iI", 10, 7) + b"{}{}{}"
    error = error_of(feed(raw))
    assert error.fatal and "header length 7" in error.reason


def test_unknown_serialize_type_is_fatal() -> None:
    error = error_of(feed(frame(b'{"code":1}', serialize_type=2)))
    assert error.fatal and "serialize type 2" in error.reason


def test_broken_json_is_not_fatal_and_recovers_opaque() -> None:
    good = frame(b'{"code":1,"opaque":8}')
    conn = RemotingConnection()
    events = conn.receive_data(frame(b'{"code":1,"opaque":77,') + good)
    assert isinstance(events[0], ProtocolError)
    assert (events[0].fatal, events[0].opaque) == (False, 77)
    assert "not valid JSON" in events[0].reason
    assert events[1].command.opaque == 8


@pytest.mark.parametrize(
    "header, field, opaque",
    [
        (b"[1,2]", "list", None),
        (b'"code"', "str", None),
        (b'{"code":[1],"opaque":4}', "'code'", 4),
        (b'{"opaque":5}', "no 'code'", 5),
        (b'{"code":1,"opaque":6,"extFields":[]}', "'extFields'", 6),
        (b'{"code":1,"opaque":6,"extFields":{"a":{"b":1}}}', "extFields.a", 6),
        (b'{"code":1,"opaque":2,"flag":"x"}', "'flag'", 2),
        (b'{"code":1,"opaque":99999999999}', "'opaque'", None),
        (b'{"code":1,"opaque":3,"language":{}}', "'language'", 3),
        (b'{"code":1,"opaque":3,"remark":[]}', "'remark'", 3),
        (b'{"code":true}', "'code'", 0),
    ],
)
def test_wrong_field_types_are_reported_per_frame(header: bytes, field: str, opaque: int | None) -> None:
    conn = RemotingConnection()
    error = error_of(conn.receive_data(frame(header)))
    assert not error.fatal and field in error.reason and error.opaque == opaque
    assert only_command(conn.receive_data(frame(b'{"code":2}'))).code == 2


@pytest.mark.parametrize("header, opaque", [(b'{"code":[10],"opaque":4}', 4), (b'{"code":{},"opaque":"4"}', 4),
                                            (b'{"code":[],"opaque":{}}', None),
                                            (b'{"opaque":5,"code":{"10":1}}', 5)])
def test_raw_frames_never_carry_a_code_that_cannot_be_hashed(header: bytes, opaque: int | None) -> None:
    """Fast paths (the send lane) look a raw header's code up in a dict: a list or object
    code used to reach them and raise TypeError out of the session's data_received, which
    dropped the connection with no answer. It is refused like any other bad code."""
    [event] = RemotingConnection().receive_raw(frame(header))
    assert isinstance(event, ProtocolError)
    assert not event.fatal and "'code'" in event.reason and event.opaque == opaque


def _binary_header(entries: list[tuple[bytes, bytes]], opaque: int = 7) -> bytes:
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in entries)
    return struct.pack(">hBhii", 30, 0, 0, opaque, 0) + struct.pack(">i", 0) + struct.pack(">i", len(ext)) + ext


@pytest.mark.parametrize("serialize_type", [0, 1])
def test_a_header_carries_a_bounded_number_of_ext_fields(serialize_type: int) -> None:
    """A 16 MiB binary header holds a million empty extFields and took 2.2 s to decode on
    the event loop; past MAX_EXT_FIELDS entries (repeated or empty keys count too) the
    frame is refused, answering its opaque, and the connection goes on."""
    from rocketport.protocols.remoting.frame import MAX_EXT_FIELDS

    def header(entries: list[tuple[bytes, bytes]]) -> bytes:
        if serialize_type:
            return _binary_header(entries)
        return b'{"code":30,"opaque":7,"extFields":{%s}}' % b",".join(b'"%s":"%s"' % kv for kv in entries)

    distinct = [(b"k%d" % i, b"") for i in range(MAX_EXT_FIELDS)]
    conn = RemotingConnection()
    command = only_command(conn.receive_data(frame(header(distinct), serialize_type=serialize_type)))
    assert len(command.ext_fields) == MAX_EXT_FIELDS
    too_many = [distinct + [(b"one", b"more")]]
    if serialize_type:  # a JSON object keeps one of each key; binary entries all cost
        too_many += [[(b"same", b"")] * (MAX_EXT_FIELDS + 1), [(b"", b"x")] * (MAX_EXT_FIELDS + 1)]
    for entries in too_many:
        error = error_of(conn.receive_data(frame(header(entries), serialize_type=serialize_type)))
        assert not error.fatal and "extFields" in error.reason and error.opaque == 7
    assert only_command(conn.receive_data(frame(b'{"code":2}'))).code == 2


@pytest.mark.parametrize(
    "header, opaque",
    [
        (b"\x00\x01\x00", None),
        (struct.pack(">hBhii", 1, 0, 0, 7, 0) + struct.pack(">i", 100) + b"\x00" * 4, 7),
        (struct.pack(">hBhii", 1, 0, 0, 7, 0) + struct.pack(">ii", 0, -1), 7),
        (struct.pack(">hBhii", 1, 0, 0, 7, 0) + struct.pack(">iih", 0, 2, 9), 7),
        (struct.pack(">hBhii", 1, 0, 0, 7, 0) + struct.pack(">iihb", 0, 3, 1, 65), 7),
    ],
)
def test_bad_binary_headers_are_reported_per_frame(header: bytes, opaque: int | None) -> None:
    error = error_of(feed(frame(header, serialize_type=1)))
    assert not error.fatal and error.opaque == opaque


def test_events_before_a_fatal_error_are_kept() -> None:
    events = feed(frame(b'{"code":1}') + struct.pack(">i", -5))
    assert isinstance(events[0], CommandReceived) and events[1].fatal
