"""Hostile but well-formed Kafka requests, byte level: every request the codec decodes gets
a response the codec can encode (a response that fails to encode closes the client's
connection and logs an error: bench/fuzz.py counts those as tracebacks)."""

from __future__ import annotations

import asyncio
import struct

from rocketport.core.broker import Broker
from rocketport.core.config import BrokerConfig, ProtocolConfig
from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.connection import KafkaServerConnection
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.events import RequestReceived
from rocketport.protocols.kafka.handlers import KafkaHandlers, RequestContext
from rocketport.protocols.kafka.schema import ApiKey


def answer(config: BrokerConfig, frame: bytes) -> dict:
    """Decode one request frame as the session does, run its handler on a real broker,
    encode the response as the session does and decode it back."""
    conn = KafkaServerConnection()
    [event] = conn.receive_data(frame)
    assert isinstance(event, RequestReceived), event

    async def scenario() -> list:
        async with Broker(config) as broker:
            handlers = KafkaHandlers(broker, ("127.0.0.1", 9092))
            try:
                ctx = RequestContext(event.api_version, event.client_id, ("127.0.0.1", 1))
                body = await handlers.table[event.api_key](ctx, event.body)
            finally:
                handlers.close()
        return conn.send_response(event.correlation_id, event.api_key, event.api_version, body)

    data = b"".join(bytes(part) for part in asyncio.run(scenario()))
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    correlation, pos = codec.decode_response_header(event.api_key, event.api_version, data[4:])
    assert correlation == event.correlation_id
    return codec.decode_response(event.api_key, event.api_version, memoryview(data)[4 + pos:])


def config(tmp_path) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=1 << 20,
                        kafka=ProtocolConfig(True, 0), namesrv=ProtocolConfig(False, 0), listen_port=0)


def test_metadata_v10_v11_asking_by_topic_id_gets_an_empty_name_not_a_null(tmp_path) -> None:
    """Metadata v10 and v11 requests may name a topic by id with a null name, but their
    responses' name is not nullable (from v12 on it is): the null echoed back made the
    response unencodable, and the connection was closed instead of answered."""
    for version in (10, 11, 12):
        body = (b"\x03"  # compact array of 2 topics
                + bytes(range(1, 17)) + b"\x00" + b"\x00"  # topic id, null name, no tags
                + bytes(16) + b"\x02A" + b"\x00"  # zero id, name "A", no tags
                + b"\x01\x00\x00" + b"\x00")  # auto-create, two flags (v10: both), no tags
        if version >= 11:
            body = body[:-3] + b"\x01\x00" + b"\x00"  # v11 dropped the cluster-operations flag
        payload = codec.encode_request_header(ApiKey.METADATA, version, 5, "c") + body
        response = answer(config(tmp_path), struct.pack(">i", len(payload)) + payload)
        by_id, by_name = response["topics"]
        assert by_id["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
        assert by_id["name"] == ("" if version < 12 else None)
        assert (by_name["name"], by_name["error_code"]) == ("A", ErrorCode.NONE)
