"""DescribeTopicPartitions (KIP-966) on the wire: topic ids, cursor paging, errors."""

from __future__ import annotations

from rocketport.protocols.kafka.errors import ErrorCode
from rocketport.protocols.kafka.schema import ApiKey
from tests.protocols.kafka.kafka_raw import RawClient
from tests.protocols.kafka.test_confluent_kafka import create_topic

DTP = ApiKey.DESCRIBE_TOPIC_PARTITIONS


def describe(raw: RawClient, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> dict:
    return raw.request(DTP, 0, {"topics": [{"name": n} for n in names], "response_partition_limit": limit,
                                "cursor": None if cursor is None else {"topic_name": cursor[0],
                                                                       "partition_index": cursor[1]}})


def test_describe_topic_partitions_pages_by_cursor_with_topic_ids(live_broker):
    create_topic(live_broker, "dt-a", 3)
    create_topic(live_broker, "dt-b", 2)
    with RawClient(live_broker.port) as raw:
        meta = raw.request(ApiKey.METADATA, 12, {"topics": [{"topic_id": bytes(16), "name": "dt-b"}],
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
        first = describe(raw, ["dt-b", "dt-a", "dt-none", "bad name!"], limit=4)
        by_name = {t["name"]: t for t in first["topics"]}
        assert [p["partition_index"] for p in by_name["dt-a"]["partitions"]] == [0, 1, 2]
        assert [p["partition_index"] for p in by_name["dt-b"]["partitions"]] == [0]  # the limit: 4 in all
        assert by_name["dt-b"]["topic_id"] == meta["topics"][0]["topic_id"] != bytes(16)
        assert first["next_cursor"] == {"topic_name": "dt-b", "partition_index": 1}
        rest = describe(raw, ["dt-b", "dt-a", "dt-none", "bad name!"], cursor=("dt-b", 1))
        errors = {t["name"]: t["error_code"] for t in rest["topics"]}
        assert errors == {"dt-b": ErrorCode.NONE, "dt-none": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [1]
        assert rest["next_cursor"] is None
        # "bad name!" sorts before the cursor's topic: only names from the cursor on are answered
        assert {t["name"] for t in describe(raw, ["bad name!"])["topics"]} == {"bad name!"}
        assert describe(raw, ["bad name!"])["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        # every topic when none is named; a cursor on a topic not asked for is refused
        listed = [t["name"] for t in describe(raw, [])["topics"]]
        assert "dt-a" in listed and "dt-b" in listed and listed == sorted(listed)
        refused = describe(raw, ["dt-a"], cursor=("dt-b", 0))
        assert [t["error_code"] for t in refused["topics"]] == [ErrorCode.INVALID_REQUEST]
