"""KafkaServerConnection: framing, events, the ApiVersions rules, and no escaping exceptions."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.connection import KafkaServerConnection
from rocketport.protocols.kafka.events import BadRequest, RequestReceived, UnsupportedVersion
from rocketport.protocols.kafka.errors import ErrorCode


def frame(api_key: int, version: int, correlation_id: int, body: dict, client_id: str | None = "c1") -> bytes:
    payload = codec.encode_request_header(api_key, version, correlation_id, client_id) + b"".join(
        codec.encode_request(api_key, version, body)
    )
    return struct.pack(">i", len(payload)) + payload


PRODUCE = {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"R" * 3000}]}]}


def test_one_request_event() -> None:
    conn = KafkaServerConnection()
    [event] = conn.receive_data(frame(0, 9, 42, PRODUCE))
    assert isinstance(event, RequestReceived)
    assert (event.correlation_id, event.api_key, event.api_version, event.client_id) == (42, 0, 9, "c1")
    records = event.body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and bytes(records) == b"R" * 3000


def test_byte_by_byte_and_many_frames_per_chunk() -> None:
    stream = frame(18, 3, 1, {"client_software_name": "x"}) + frame(3, 12, 2, {"topics": None}) + frame(0, 7, 3, PRODUCE, None)
    conn = KafkaServerConnection()
    events = []
    for i in range(len(stream)):
        events += conn.receive_data(stream[i : i + 1])
    assert [(e.correlation_id, e.api_key, e.client_id) for e in events] == [(1, 18, "c1"), (2, 3, "c1"), (3, 0, None)]
    conn = KafkaServerConnection()
    events = conn.receive_data(stream + stream[:10]) + conn.receive_data(bytearray(stream[10:]))
    assert [e.correlation_id for e in events] == [1, 2, 3, 1, 2, 3]
    assert all(isinstance(e, RequestReceived) for e in events)


def test_records_survive_later_input() -> None:
    conn = KafkaServerConnection()
    data = frame(0, 9, 1, PRODUCE)
    buf = bytearray(data)
    [event] = conn.receive_data(buf)
    buf[:] = bytes(len(buf))  # the caller reuses its read buffer
    conn.receive_data(frame(0, 9, 2, PRODUCE)[:50])
    assert bytes(event.body["topic_data"][0]["partition_data"][0]["records"]) == b"R" * 3000


def test_oversize_negative_and_tiny_frames_close() -> None:
    for prefix in (struct.pack(">i", 1001), struct.pack(">i", -5), struct.pack(">i", 3)):
        conn = KafkaServerConnection(max_frame_size=1000)
        [event] = conn.receive_data(prefix)  # decided from the length alone, nothing buffered
        assert isinstance(event, BadRequest) and conn.closed
        assert conn.receive_data(frame(18, 0, 1, {})) == []


def test_default_max_frame_is_100_mib() -> None:
    conn = KafkaServerConnection()
    assert conn.receive_data(struct.pack(">i", 100 * 1024 * 1024)) == []
    [event] = KafkaServerConnection().receive_data(struct.pack(">i", 100 * 1024 * 1024 + 1))
    assert isinstance(event, BadRequest)


def test_garbled_body_is_bad_request_with_header_fields() -> None:
    payload = codec.encode_request_header(0, 9, 77, "c") + b"\x00\xff"
    conn = KafkaServerConnection()
    [event] = conn.receive_data(struct.pack(">i", len(payload)) + payload)
    assert isinstance(event, BadRequest) and (event.correlation_id, event.api_key, event.api_version) == (77, 0, 9)
    assert conn.closed


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes((value,)))


def _request(api_key: int, version: int, body: bytes, correlation_id: int = 9) -> bytes:
    payload = codec.encode_request_header(api_key, version, correlation_id, "c") + body
    return struct.pack(">i", len(payload)) + payload


def _metadata_v9(topics: int) -> bytes:
    """Metadata v9 naming ``topics`` empty topic names: two bytes a topic."""
    return _request(3, 9, _uvarint(topics + 1) + b"\x01\x00" * topics + b"\x00\x00\x00\x00")


def test_a_request_holds_a_bounded_number_of_array_items() -> None:
    """Two bytes were enough for an item: a 2 MB Metadata request named a million topics
    and its decode and handling held the event loop 7 s (a 100 MiB one, minutes and
    gigabytes). Past MAX_REQUEST_ITEMS the request is refused before its items are built."""
    limit = codec.MAX_REQUEST_ITEMS
    [event] = KafkaServerConnection().receive_data(_metadata_v9(limit))
    assert isinstance(event, RequestReceived) and len(event.body["topics"]) == limit
    conn = KafkaServerConnection()
    [event] = conn.receive_data(_metadata_v9(limit + 1))
    assert isinstance(event, BadRequest) and "array items" in event.reason and event.correlation_id == 9
    assert conn.closed


def test_nested_arrays_and_tagged_fields_share_the_budget() -> None:
    half = codec.MAX_REQUEST_ITEMS // 2
    # OffsetFetch v7: group "g", two topics of `half` partition indexes each (2 + 2 * half items)
    topic = b"\x02t" + _uvarint(half + 1) + b"\x00\x00\x00\x00" * half + b"\x00"
    [event] = KafkaServerConnection().receive_data(_request(9, 7, b"\x02g" + b"\x03" + topic * 2 + b"\x00\x00"))
    assert isinstance(event, BadRequest) and "array items" in event.reason
    # ApiVersions v3 with a tag section of MAX_REQUEST_ITEMS + 1 empty unknown tagged fields
    tags = _uvarint(codec.MAX_REQUEST_ITEMS + 1) + b"\x05\x00" * (codec.MAX_REQUEST_ITEMS + 1)
    [event] = KafkaServerConnection().receive_data(_request(18, 3, b"\x01\x01" + tags))
    assert isinstance(event, BadRequest) and "tagged fields" in event.reason


def test_each_request_has_its_own_budget_and_responses_none() -> None:
    conn = KafkaServerConnection()
    events = conn.receive_data(_metadata_v9(codec.MAX_REQUEST_ITEMS) * 3)
    assert [type(e) for e in events] == [RequestReceived] * 3
    body = {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": 0,
            "topics": [{"error_code": 0, "name": "t", "is_internal": False, "partitions": []}]
            * (codec.MAX_REQUEST_ITEMS + 1)}
    encoded = b"".join(bytes(p) for p in codec.encode_response(3, 9, body))
    assert len(codec.decode_response(3, 9, encoded)["topics"]) == codec.MAX_REQUEST_ITEMS + 1


def test_unsupported_version_and_unknown_key() -> None:
    conn = KafkaServerConnection()
    events = conn.receive_data(frame(1, 12, 5, {}))  # served
    payload = codec.encode_request_header(1, 18, 6, "c") + b"\x00" * 40
    events += conn.receive_data(struct.pack(">i", len(payload)) + payload)
    payload = codec.encode_request_header(71, 0, 7, "c")  # GetTelemetrySubscriptions: not served
    events += conn.receive_data(struct.pack(">i", len(payload)) + payload)
    assert isinstance(events[0], RequestReceived)
    assert events[1] == UnsupportedVersion(6, 1, 18, "c")  # Fetch is served to v17
    assert events[2] == UnsupportedVersion(7, 71, 0, "c")
    assert not conn.closed


def test_api_versions_future_version_answered_with_v0_error_body() -> None:
    # A v9 ApiVersions request (header v2, unknown body) must still yield its correlation id,
    # and the answer is a v0 body with error 35 and header v0.
    payload = codec.encode_request_header(18, 9, 11, "future") + b"\x05whatever\x00"
    conn = KafkaServerConnection()
    [event] = conn.receive_data(struct.pack(">i", len(payload)) + payload)
    assert event == UnsupportedVersion(11, 18, 9, "future")
    out = b"".join(conn.send_response(event.correlation_id, 18, 0, {
        "error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}))
    assert out == struct.pack(">ii", 16, 11) + struct.pack(">hihhh", 35, 1, 18, 0, 4)


def test_send_response_headers_and_pass_through() -> None:
    conn = KafkaServerConnection()
    v3 = b"".join(conn.send_response(1, 18, 3, {"api_keys": []}))
    assert v3[4:8] == struct.pack(">i", 1) and v3[8:10] == b"\x00\x00"  # no header tag byte
    assert struct.unpack(">i", v3[:4])[0] == len(v3) - 4
    md = b"".join(conn.send_response(2, 3, 12, {}))
    assert md[4:9] == struct.pack(">i", 2) + b"\x00"  # header v1
    blob = memoryview(bytes(1 << 20))
    parts = conn.send_response(3, 1, 12, {"responses": [{"topic": "t", "partitions": [{"records": [blob]}]}]})
    assert parts[1] is blob and len(parts) == 3
    assert struct.unpack(">i", parts[0][:4])[0] == sum(map(len, parts)) - 4


@settings(max_examples=500, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_random_bytes_never_raise(chunks: list[bytes]) -> None:
    conn = KafkaServerConnection(max_frame_size=4096)
    for chunk in chunks:
        for event in conn.receive_data(chunk):
            assert isinstance(event, (RequestReceived, UnsupportedVersion, BadRequest))


@settings(max_examples=500, deadline=None)
@given(
    api=st.sampled_from(sorted(codec.supported_versions().items())),
    version_pick=st.integers(0, 20),
    body=st.binary(max_size=120),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
)
def test_random_bodies_behind_valid_headers_never_raise(api, version_pick, body, correlation_id) -> None:
    key, (low, high) = api
    version = low + version_pick % (high - low + 1)
    payload = codec.encode_request_header(key, version, correlation_id, "fuzz") + body
    [event] = KafkaServerConnection().receive_data(struct.pack(">i", len(payload)) + payload)
    assert event.correlation_id == correlation_id
    assert isinstance(event, (RequestReceived, BadRequest))
