"""Produce v13 (Kafka 4.1, KIP-516): topics named by id in the request and the answer, raw on
the wire. No client here sends v13 (librdkafka 2.16 stops at v10, the Java client 3.9 at
v11); their produce tests run against the same broker, which now advertises v13."""

from __future__ import annotations

from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.protocols.kafka.kafka_raw import RawClient, encode_batch
from tests.protocols.kafka.test_confluent_kafka import create_topic

PRODUCE_V13 = 13


def _topic_id(raw: RawClient, name: str) -> bytes:
    meta = raw.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": bytes(16), "name": name}],
                                             "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
    return meta["topics"][0]["topic_id"]


def _produce(raw: RawClient, topic_id: bytes, partition: int, values: list[bytes]) -> dict:
    return raw.request(ApiKey.PRODUCE, PRODUCE_V13, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                     "topic_data": [{"topic_id": topic_id, "partition_data": [
                                                         {"index": partition, "records": encode_batch(values)}]}]})


def test_produce_v13_writes_by_topic_id_and_answers_an_unknown_id(live_broker):
    create_topic(live_broker, "p13", 2)
    broker = live_broker.server.broker
    with RawClient(live_broker.port) as raw:
        versions = raw.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "raw",
                                                        "client_software_version": "1"})
        assert {k["api_key"]: k["max_version"] for k in versions["api_keys"]}[ApiKey.PRODUCE] == PRODUCE_V13
        topic_id = _topic_id(raw, "p13")
        assert topic_id != bytes(16)

        out = _produce(raw, topic_id, 1, [b"a", b"b", b"c"])
        [topic] = out["responses"]
        assert topic["topic_id"] == topic_id
        [part] = topic["partition_responses"]
        assert (part["index"], part["error_code"], part["base_offset"]) == (1, ErrorCode.NONE, 0)
        assert live_broker.run(broker.max_offset, "p13", 1) == 3

        stranger = bytes(range(16))
        out = _produce(raw, stranger, 0, [b"lost"])
        [topic] = out["responses"]
        assert topic["topic_id"] == stranger
        assert [(p["index"], p["error_code"], p["base_offset"]) for p in topic["partition_responses"]] == \
            [(0, ErrorCode.UNKNOWN_TOPIC_ID, -1)]
        assert live_broker.run(broker.max_offset, "p13", 0) == 0  # nothing written anywhere

        fetched = raw.request(ApiKey.FETCH, 13, {
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [{"partition": 1, "fetch_offset": 0,
                                                              "partition_max_bytes": 1 << 20}]}]})
        [topic] = fetched["responses"]
        assert topic["topic_id"] == topic_id and topic["partitions"][0]["high_watermark"] == 3

        # an older version on the same connection still names the topic
        older = raw.request(ApiKey.PRODUCE, 12, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                 "topic_data": [{"name": "p13", "partition_data": [
                                                     {"index": 1, "records": encode_batch([b"d"])}]}]})
        assert older["responses"][0]["name"] == "p13"
        assert older["responses"][0]["partition_responses"][0]["base_offset"] == 3

