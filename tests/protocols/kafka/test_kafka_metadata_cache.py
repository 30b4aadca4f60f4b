"""Metadata answers a topic's part from its encoded bytes once it has been encoded (by
name and partition count, per version and partition state): the bytes are the ones the
codec writes for the part itself, and the answer follows partitions added, topics
deleted and recreated."""

from __future__ import annotations

from rocketport.protocols.kafka import codec
from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey

from .kafka_raw import RawClient

VERSIONS = range(codec.supported_versions()[ApiKey.METADATA][0],
                 codec.supported_versions()[ApiKey.METADATA][1] + 1)


def _answer(version: int, topics: list) -> dict:
    return {"throttle_time_ms": 0, "cluster_id": "c", "controller_id": 0,
            "brokers": [{"node_id": 0, "host": "h", "port": 9092, "rack": None}], "topics": topics}


def _topic(name: str, partitions: int) -> dict:
    return {"error_code": 0, "name": name, "topic_id": bytes(range(16)), "is_internal": False,
            "partitions": [{"error_code": 0, "partition_index": i, "leader_id": 0, "leader_epoch": 3,
                            "replica_nodes": [0, 2], "isr_nodes": [0], "offline_replicas": []}
                           for i in range(partitions)]}


def test_an_encoded_item_is_written_as_the_codec_writes_the_item():
    for version in VERSIONS:
        topics = [_topic("a", 2), _topic("b\u00e9", 0), _topic("c", 5)]
        plain = b"".join(codec.encode_response(ApiKey.METADATA, version, _answer(version, topics)))
        encode = codec.item_encoder(ApiKey.METADATA, version, "topics")
        mixed = [encode(topics[0]), topics[1], encode(topics[2])]
        assert b"".join(codec.encode_response(ApiKey.METADATA, version, _answer(version, mixed))) == plain
        assert codec.decode_response(ApiKey.METADATA, version, plain)["topics"][2]["partitions"][4][
            "partition_index"] == 4


def _partitions(client: RawClient, version: int, names: list[str] | None) -> dict[str, tuple[int, list[int]]]:
    if names is None:
        topics = [] if version == 0 else None  # every topic (v0: an empty list)
    else:
        topics = [{"name": n, "topic_id": bytes(16)} for n in names]
    answer = client.request(ApiKey.METADATA, version, {"topics": topics, "allow_auto_topic_creation": False})
    return {t["name"]: (t["error_code"], [p["partition_index"] for p in t["partitions"]])
            for t in answer["topics"]}


def test_metadata_follows_partitions_added_and_topics_deleted(live_broker):
    broker = live_broker.server.broker

    def create(name: str, n: int) -> None:
        live_broker.run(lambda: broker.create_topic(name, read_queue_nums=n, write_queue_nums=n))

    create("mc-a", 2)
    create("mc-b", 1)
    with RawClient(live_broker.port) as client:
        for version in VERSIONS:
            for _ in range(2):  # the second answer is made of the parts the first encoded
                seen = _partitions(client, version, None)
                assert seen["mc-a"] == (0, [0, 1]) and seen["mc-b"] == (0, [0])
                assert _partitions(client, version, ["mc-a"]) == {"mc-a": (0, [0, 1])}
        create("mc-a", 3)
        live_broker.run(lambda: broker.delete_topic("mc-b"))
        for version in VERSIONS:
            seen = _partitions(client, version, None)
            assert seen["mc-a"] == (0, [0, 1, 2]) and "mc-b" not in seen
        # (before v4 a named topic is created by asking: only from v4 on)
        assert _partitions(client, 12, ["mc-b"]) == {"mc-b": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])}
        create("mc-b", 1)
        assert _partitions(client, 12, None)["mc-b"] == (0, [0])
