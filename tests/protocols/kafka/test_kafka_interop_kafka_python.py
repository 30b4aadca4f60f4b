"""Cross-check against kafka-python 3.x's protocol classes (built from Kafka's JSON specs).

Bytes we encode must decode in kafka-python to the same values and re-encode to the same
bytes; frames kafka-python builds (header included) must decode in our connection, and our
framed responses in kafka-python.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.connection import KafkaServerConnection
from rocketport.protocols.kafka.events import RequestReceived
from rocketport.protocols.kafka.schema import APIS

from .kafka_samples import api_versions, message, normalise, project

kp_admin = pytest.importorskip("kafka.protocol.admin")
import kafka.protocol.consumer as kp_consumer  # noqa: E402
import kafka.protocol.metadata as kp_metadata  # noqa: E402
import kafka.protocol.producer as kp_producer  # noqa: E402
import kafka.protocol.sasl as kp_sasl  # noqa: E402

_MODULES = (kp_admin, kp_consumer, kp_metadata, kp_producer, kp_sasl)


def kp_class(api_key: int, response: bool):
    suffix = "Response" if response else "Request"
    for module in _MODULES:
        cls = getattr(module, APIS[api_key].name + suffix, None)
        if cls is not None:
            return cls
    raise LookupError(api_key)


def from_kp(value, mine):
    """kafka-python's to_dict(json=False) values in our representation."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    if value is None and mine == bytes(16):
        return bytes(16)  # kafka-python reads the zero uuid as None
    if value is None and isinstance(mine, dict):
        return mine  # an absent tagged struct: its default
    if isinstance(value, dict):
        return {
            # kafka-python presents authorized-operations bitfields as sets; bytes are compared instead
            k: v if k.endswith("authorized_operations") else from_kp(value.get(k), v)
            for k, v in mine.items()
        }
    if isinstance(value, list) and isinstance(mine, list):
        return [from_kp(v, m) for v, m in zip(value, mine)] if len(value) == len(mine) else value
    return value


def _known_to_kafka_python(api_key: int) -> bool:
    try:
        kp_class(api_key, False)
    except LookupError:  # kafka-python 3.0 has no KIP-848 classes (68, 69): test_kafka_codec's golden bytes
        return False
    return True


@pytest.mark.parametrize(("api_key", "version"), [(k, v) for k, v in api_versions() if _known_to_kafka_python(k)])
@pytest.mark.parametrize("response", [False, True], ids=["request", "response"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_reads_and_rewrites_our_bytes(api_key: int, version: int, response: bool, data) -> None:
    api = APIS[api_key]
    flexible = api.flexible is not None and version >= api.flexible
    sent = message(data.draw, api.response if response else api.request, version, flexible)
    if api_key == 18 and response:
        sent["error_code"] = 0  # clients read an ApiVersions error response as v0 (kafka.md pitfall 1)
    encode = codec.encode_response if response else codec.encode_request
    wire = b"".join(encode(api_key, version, sent))
    theirs = kp_class(api_key, response).decode(wire, version=version)
    theirs.with_header(correlation_id=0)  # kafka-python encodes only messages that carry a header
    assert bytes(theirs.encode()) == wire
    ours = project((codec.decode_response if response else codec.decode_request)(api_key, version, wire), sent)
    assert from_kp(normalise(theirs.to_dict(json=False)), ours) == ours


@pytest.mark.parametrize(
    ("cls", "version", "fields"),
    [
        (kp_metadata.ApiVersionsRequest, 3, {"client_software_name": "kp", "client_software_version": "3.0"}),
        (kp_metadata.ApiVersionsRequest, 0, {}),
        (kp_metadata.MetadataRequest, 12, {"topics": None, "allow_auto_topic_creation": True}),
        (kp_metadata.MetadataRequest, 4, {"topics": [], "allow_auto_topic_creation": False}),
        (kp_consumer.HeartbeatRequest, 4, {"group_id": "g", "generation_id": 3, "member_id": "m", "group_instance_id": None}),
        (kp_consumer.HeartbeatRequest, 1, {"group_id": "g", "generation_id": 3, "member_id": "m"}),
        (kp_consumer.JoinGroupRequest, 0, {"group_id": "g", "session_timeout_ms": 6000, "member_id": "", "protocol_type": "consumer", "protocols": []}),
    ],
)
def test_kafka_python_framed_requests_decode_in_our_connection(cls, version, fields) -> None:
    request = cls(version=version, **fields)
    request.with_header(correlation_id=123, client_id="kp-client")
    frame = request.encode(header=True, framed=True)
    [event] = KafkaServerConnection().receive_data(bytes(frame))
    assert isinstance(event, RequestReceived)
    assert (event.correlation_id, event.api_key, event.api_version, event.client_id) == (123, cls.API_KEY, version, "kp-client")
    for name, value in fields.items():
        assert event.body[name] == value


@pytest.mark.parametrize(("api_key", "version"), [(18, 3), (18, 0), (3, 12), (0, 9), (1, 12), (11, 7), (9, 8)])
def test_our_framed_responses_decode_in_kafka_python(api_key: int, version: int) -> None:
    body = {
        18: {"api_keys": [{"api_key": 0, "min_version": 0, "max_version": 11}]},
        3: {"brokers": [{"node_id": 1, "host": "h", "port": 9092}], "cluster_id": "c", "controller_id": 1},
        0: {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 42}]}]},
        1: {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "high_watermark": 9, "records": b"x" * 100}]}]},
        11: {"generation_id": 2, "protocol_name": "range", "leader": "m1", "member_id": "m1", "members": []},
        9: {"groups": [{"group_id": "g", "topics": []}]},
    }[api_key]
    out = b"".join(KafkaServerConnection().send_response(55, api_key, version, body))
    theirs = kp_class(api_key, True).decode(out, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == 55
    got = theirs.to_dict(json=False)
    for name, value in body.items():
        assert normalise(from_kp(got[name], value)) == value or got[name] == value


def test_api_versions_header_is_v0_for_kafka_python() -> None:
    out = b"".join(KafkaServerConnection().send_response(7, 18, 3, {"api_keys": []}))
    assert struct.unpack_from(">ii", out) == (len(out) - 4, 7)
    theirs = kp_metadata.ApiVersionsResponse.decode(out, version=3, header=True, framed=True)
    assert theirs.header.correlation_id == 7 and theirs.api_keys == []
