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


def answers(config: BrokerConfig, frames: list[bytes], setup=None) -> list[dict]:
    """Decode request frames as the session does, run their handlers in turn on one real
    broker (after ``setup(broker)``), encode each response as the session does and decode
    it back."""
    conn = KafkaServerConnection()
    events = [event for frame in frames for event in conn.receive_data(frame)]
    assert all(isinstance(event, RequestReceived) for event in events), events

    async def scenario() -> list:
        async with Broker(config) as broker:
            if setup is not None:
                setup(broker)
            handlers = KafkaHandlers(broker, ("127.0.0.1", 9092))
            out = []
            try:
                for event in events:
                    ctx = RequestContext(event.api_version, event.client_id, ("127.0.0.1", 1))
                    body = await handlers.table[event.api_key](ctx, event.body)
                    out.append(conn.send_response(event.correlation_id, event.api_key, event.api_version, body))
            finally:
                handlers.close()
        return out

    decoded = []
    for event, parts in zip(events, asyncio.run(scenario())):
        data = b"".join(bytes(part) for part in parts)
        (size,) = struct.unpack_from(">i", data)
        assert size == len(data) - 4
        correlation, pos = codec.decode_response_header(event.api_key, event.api_version, data[4:])
        assert correlation == event.correlation_id
        decoded.append(codec.decode_response(event.api_key, event.api_version, memoryview(data)[4 + pos:]))
    return decoded


def answer(config: BrokerConfig, frame: bytes) -> dict:
    [response] = answers(config, [frame])
    return response


def request(api_key: int, version: int, body: dict, client_id: str | None = "c") -> bytes:
    payload = codec.encode_request_header(api_key, version, 5, client_id) + b"".join(
        bytes(part) for part in codec.encode_request(api_key, version, body))
    return struct.pack(">i", len(payload)) + payload


def config(tmp_path) -> BrokerConfig:
    return BrokerConfig(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=1 << 20,
                        kafka=ProtocolConfig(True, 0), namesrv=ProtocolConfig(False, 0), listen_port=0,
                        amqp=ProtocolConfig(False, 0), stomp=ProtocolConfig(False, 0))


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


LONG = "g" * 40_000  # only flexible versions (compact strings) can carry it


def test_offset_fetch_of_all_topics_leaves_out_names_no_topic_can_have(tmp_path) -> None:
    """Remoting commits offsets on any string: a 40 KB "topic" in a group's offsets made
    OffsetFetch v2-v5 for all of the group's topics unencodable (int16 string lengths), and
    the asking client was disconnected."""
    def setup(broker) -> None:
        broker.create_topic("T", read_queue_nums=1, write_queue_nums=1)
        broker.commit_offset("grp", LONG, 0, 5)
        broker.commit_offset("grp", "T", 0, 7)

    frames = [request(ApiKey.OFFSET_FETCH, v, {"group_id": "grp", "topics": None}) for v in (2, 5)]
    for response in answers(config(tmp_path), frames, setup):
        assert [(t["name"], t["partitions"][0]["committed_offset"]) for t in response["topics"]] == [("T", 7)]


def test_join_group_refuses_what_older_versions_could_not_echo(tmp_path) -> None:
    """A group joined by a flexible JoinGroup with a 40 KB group id made ListGroups v0-v2
    unencodable for every client, and a 32 KB client id made a member id that JoinGroup
    v0-v5 could not carry: such joins are refused, and the group listing still answers."""
    join = {"session_timeout_ms": 6000, "rebalance_timeout_ms": 100, "member_id": "", "group_instance_id": None,
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    frames = [request(ApiKey.JOIN_GROUP, 6, dict(join, group_id=LONG)),
              request(ApiKey.JOIN_GROUP, 6, dict(join, group_id="g", protocols=[{"name": LONG, "metadata": b""}])),
              request(ApiKey.JOIN_GROUP, 6, dict(join, group_id="g", group_instance_id="i" * 32_740)),
              request(ApiKey.JOIN_GROUP, 3, dict(join, group_id="g"), client_id="c" * 32_767),
              request(ApiKey.LIST_GROUPS, 2, {})]
    *joins, listing = answers(config(tmp_path), frames)
    assert [j["error_code"] for j in joins] == [ErrorCode.INVALID_GROUP_ID] + [ErrorCode.INVALID_REQUEST] * 3
    assert (listing["error_code"], listing["groups"]) == (ErrorCode.NONE, [])


def test_a_name_repeated_in_a_request_is_answered_once(tmp_path) -> None:
    """A response grows with what the broker keeps times how often a request names it: a
    DescribeGroups naming one group 20,000 times (300 KB) over a group of many members held
    the event loop while the broker built a response of many GB and was OOM-killed. Each
    group (and each Metadata topic, as Kafka does with a set) is answered once."""
    def setup(broker) -> None:
        broker.create_topic("T", read_queue_nums=64, write_queue_nums=64)
        broker.commit_offset("grp", "T", 0, 7)

    join = {"group_id": "grp", "session_timeout_ms": 6000, "rebalance_timeout_ms": 100, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": bytes(1000)}]}
    frames = [request(ApiKey.JOIN_GROUP, 0, join),
              request(ApiKey.DESCRIBE_GROUPS, 2, {"groups": ["grp", "other"] * 5000}),
              request(ApiKey.METADATA, 1, {"topics": [{"name": "T"}] * 5000}),
              request(ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "grp", "topics": None}] * 5000})]
    _, described, metadata, offsets = answers(config(tmp_path), frames, setup)
    assert [g["group_id"] for g in described["groups"]] == ["grp", "other"]
    assert [(t["name"], len(t["partitions"])) for t in metadata["topics"]] == [("T", 64)]
    assert [g["group_id"] for g in offsets["groups"]] == ["grp"]
