"""The schema-driven codec: every API and version round-trips; hand-built bytes decode."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import APIS, ApiKey

from .kafka_samples import api_versions, message, normalise, project

SERVED = {  # kafka.md's "serve" column plus the admin APIs: (min, max)
    ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12), ApiKey.PRODUCE: (0, 13),
    ApiKey.INIT_PRODUCER_ID: (0, 5), ApiKey.FETCH: (0, 17), ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.FIND_COORDINATOR: (0, 6), ApiKey.JOIN_GROUP: (0, 9), ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4), ApiKey.OFFSET_FETCH: (0, 9), ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.LEAVE_GROUP: (0, 5), ApiKey.CREATE_TOPICS: (0, 7), ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5), ApiKey.DELETE_TOPICS: (0, 6), ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4), ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.ALTER_CONFIGS: (0, 2), ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0), ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (0, 3), ApiKey.CREATE_ACLS: (0, 3), ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3), ApiKey.ADD_OFFSETS_TO_TXN: (0, 4), ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5), ApiKey.DESCRIBE_TRANSACTIONS: (0, 0), ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1), ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
}


def test_served_versions_table() -> None:
    assert codec.supported_versions() == {int(k): v for k, v in SERVED.items()}
    assert {api.key for api in APIS.values()} == {int(k) for k in ApiKey}
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and ErrorCode.MEMBER_ID_REQUIRED == 79


@pytest.mark.parametrize(("api_key", "version"), api_versions())
@pytest.mark.parametrize("response", [False, True], ids=["request", "response"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_api_and_version(api_key: int, version: int, response: bool, data) -> None:
    api = APIS[api_key]
    flexible = api.flexible is not None and version >= api.flexible
    sent = message(data.draw, api.response if response else api.request, version, flexible)
    encode = codec.encode_response if response else codec.encode_request
    decode = codec.decode_response if response else codec.decode_request
    wire = b"".join(encode(api_key, version, sent))
    decoded = decode(api_key, version, wire)
    assert project(decoded, sent) == normalise(sent)
    assert b"".join(encode(api_key, version, decoded)) == wire


# --- golden bytes, written by hand from the protocol spec -----------------------------------


def _cstr(s: str) -> bytes:  # compact string
    return bytes([len(s) + 1]) + s.encode()


def test_golden_nullable_struct() -> None:
    """KIP-848's heartbeat assignment: an int8 marker, -1 when null, 1 before the struct."""
    base = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m",
            "member_epoch": 3, "heartbeat_interval_ms": 500}
    head = b"\x00" * 6 + b"\x00" + _cstr("m") + struct.pack(">ii", 3, 500)
    null = b"".join(codec.encode_response(68, 1, {**base, "assignment": None}))
    assert null == head + b"\xff" + b"\x00"
    uuid = bytes(range(16))
    present = b"".join(codec.encode_response(68, 1, {**base, "assignment": {
        "topic_partitions": [{"topic_id": uuid, "partitions": [1, 2]}]}}))
    assert present == head + b"\x01" + b"\x02" + uuid + b"\x03" + struct.pack(">ii", 1, 2) + b"\x00\x00\x00"
    assert codec.decode_response(68, 1, present)["assignment"] == {
        "topic_partitions": [{"topic_id": uuid, "partitions": [1, 2]}]}
    assert codec.decode_response(68, 1, null)["assignment"] is None


def test_golden_api_versions_v3_request() -> None:
    header = struct.pack(">hhi", 18, 3, 7) + struct.pack(">h", 3) + b"cli" + b"\x00"
    body = _cstr("librdkafka") + _cstr("2.16.0") + b"\x00"
    parsed, pos = codec.decode_request_header(header + body)
    assert (parsed.api_key, parsed.api_version, parsed.correlation_id, parsed.client_id) == (18, 3, 7, "cli")
    assert codec.decode_request(18, 3, (header + body)[pos:]) == {
        "client_software_name": "librdkafka",
        "client_software_version": "2.16.0",
    }
    assert codec.encode_request_header(18, 3, 7, "cli") == header
    assert b"".join(codec.encode_request(18, 3, {"client_software_name": "librdkafka", "client_software_version": "2.16.0"})) == body


def test_golden_api_versions_v3_response() -> None:
    body = (
        b"\x00\x00"  # error_code
        + b"\x03"  # compact array, 2 entries
        + struct.pack(">hhh", 0, 0, 11) + b"\x00"
        + struct.pack(">hhh", 18, 0, 4) + b"\x00"
        + struct.pack(">i", 0)  # throttle_time_ms
        + b"\x00"  # empty tagged section
    )
    msg = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 11},
                                          {"api_key": 18, "min_version": 0, "max_version": 4}]}
    assert b"".join(codec.encode_response(18, 3, msg)) == body
    decoded = codec.decode_response(18, 3, body)
    assert decoded["api_keys"] == msg["api_keys"] and decoded["finalized_features_epoch"] == -1
    # header v0: the correlation id alone, no tagged section, even for v3
    assert codec.encode_response_header(18, 3, 9) == struct.pack(">i", 9)
    assert codec.encode_response_header(3, 12, 9) == struct.pack(">i", 9) + b"\x00"
    assert codec.encode_response_header(3, 8, 9) == struct.pack(">i", 9)


def test_golden_metadata_v12_request() -> None:
    topic_id = bytes(range(16))
    body = (
        b"\x03"  # two topics
        + topic_id + _cstr("orders") + b"\x00"
        + bytes(16) + b"\x00" + b"\x00"  # zero topic id, null name
        + b"\x01"  # allow_auto_topic_creation
        + b"\x00"  # include_topic_authorized_operations
        + b"\x00"
    )
    decoded = codec.decode_request(3, 12, body)
    assert decoded == {
        "topics": [{"topic_id": topic_id, "name": "orders"}, {"topic_id": bytes(16), "name": None}],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
        "include_cluster_authorized_operations": False,  # v8-10 only: default
    }
    assert b"".join(codec.encode_request(3, 12, decoded)) == body
    assert codec.decode_request(3, 12, b"\x00\x01\x00\x00") == {
        "topics": None, "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False,
    }


def test_golden_produce_v9_request() -> None:
    records = bytes(range(200)) * 3  # opaque to the codec
    body = (
        b"\x00"  # transactional_id null
        + struct.pack(">hi", -1, 30000)  # acks, timeout_ms
        + b"\x02" + _cstr("t")
        + b"\x02" + struct.pack(">i", 4)
        + b"\xd9\x04" + records  # compact bytes: uvarint(600 + 1)
        + b"\x00"  # partition tags
        + b"\x00"  # topic tags
        + b"\x00"  # top-level tags
    )
    decoded = codec.decode_request(0, 9, body)
    assert decoded["transactional_id"] is None and decoded["acks"] == -1 and decoded["timeout_ms"] == 30000
    part = decoded["topic_data"][0]["partition_data"][0]
    assert part["index"] == 4 and isinstance(part["records"], memoryview) and bytes(part["records"]) == records
    assert b"".join(codec.encode_request(0, 9, decoded)) == body


def test_flexible_and_classic_encodings_differ_as_specified() -> None:
    msg = {"topics": [{"name": "ab"}], "allow_auto_topic_creation": True}
    classic = b"".join(codec.encode_request(3, 8, msg))
    flexible = b"".join(codec.encode_request(3, 9, msg))
    assert classic == struct.pack(">ih", 1, 2) + b"ab" + b"\x01\x00\x00"
    assert flexible == b"\x02" + b"\x03ab" + b"\x00" + b"\x01\x00\x00" + b"\x00"
    assert codec.decode_request(3, 0, struct.pack(">i", 0))["topics"] == []


def test_unknown_tags_are_skipped_and_known_tags_read() -> None:
    # Fetch v12 request with cluster_id (tag 0) set and an unknown tag 7 at top level.
    plain = b"".join(codec.encode_request(1, 12, {"max_wait_ms": 500, "topics": []}))
    assert plain.endswith(b"\x00")
    tags = b"\x02" + b"\x00\x04" + b"\x04abc" + b"\x07\x03xyz"
    decoded = codec.decode_request(1, 12, plain[:-1] + tags)
    assert decoded["cluster_id"] == "abc" and decoded["max_wait_ms"] == 500
    # an unknown tag inside a nested struct (Metadata v12 request topic)
    body = b"\x02" + bytes(16) + _cstr("x") + b"\x01\x05\x02hi" + b"\x01\x00\x00"
    assert codec.decode_request(3, 12, body)["topics"] == [{"topic_id": bytes(16), "name": "x"}]
    # emitted tagged sections stay empty unless a caller sets a non-default tagged value
    assert b"".join(codec.encode_request(1, 12, {"cluster_id": None})).endswith(b"\x00")
    with_tag = b"".join(codec.encode_request(1, 12, {"cluster_id": "c"}))
    assert with_tag.endswith(b"\x01\x00\x02\x02c")
    with pytest.raises(codec.DecodeError):
        codec.decode_request(1, 12, plain[:-1] + b"\x01\x00\x09\x04abc")  # size overruns


def test_records_are_passed_through_without_copy() -> None:
    blob = memoryview(bytearray(1 << 20))
    parts = [memoryview(bytes(40000)), blob]
    msg = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": parts}]}]}
    out = codec.encode_response(1, 12, msg)
    assert any(p is blob for p in out) and any(p is parts[0] for p in out)
    wire = b"".join(out)
    got = codec.decode_response(1, 12, wire)["responses"][0]["partitions"][0]["records"]
    assert isinstance(got, memoryview) and got.obj is wire and len(got) == 40000 + (1 << 20)


@pytest.mark.parametrize(
    "body",
    [
        b"",  # empty
        struct.pack(">hi", 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 50) + b"short",  # string overrun
        struct.pack(">hi", 1, 1000) + struct.pack(">i", 0x7FFFFFFF),  # absurd array count
        struct.pack(">hi", 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", -1),  # null topic name
        struct.pack(">hi", 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 2) + b"\xff\xfe",  # bad UTF-8
    ],
)
def test_malformed_bodies_raise_decode_error(body: bytes) -> None:
    with pytest.raises(codec.DecodeError):
        codec.decode_request(0, 2, body)


def test_encode_rejects_null_for_non_nullable() -> None:
    with pytest.raises(ValueError):
        codec.encode_request(0, 9, {"topic_data": [{"name": None}]})
    with pytest.raises(codec.UnsupportedApi):
        codec.encode_request(1, 18, {})
