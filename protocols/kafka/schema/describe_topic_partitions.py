"""DescribeTopicPartitions (key 75, KIP-966): topics with their ids and partitions, paged by a
cursor (what Kafka 3.8+ admin clients ask instead of Metadata when the broker offers it)."""

from ._dsl import Api, F

_CURSOR = (
    F("topic_name", "string", "0+"),
    F("partition_index", "int32", "0+"),
)

DESCRIBE_TOPIC_PARTITIONS = Api(
    key=75,
    name="DescribeTopicPartitions",
    versions=(0, 0),
    flexible=0,
    request=(
        F("topics", "[]", "0+",
            F("name", "string", "0+"),
        ),
        F("response_partition_limit", "int32", "0+", default=2000),
        F("cursor", "struct", "0+", *_CURSOR, nullable="0+", default=None),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("topics", "[]", "0+",
            F("error_code", "int16", "0+"),
            F("name", "string", "0+", nullable="0+"),
            F("topic_id", "uuid", "0+"),
            F("is_internal", "bool", "0+", default=False),
            F("partitions", "[]", "0+",
                F("error_code", "int16", "0+"),
                F("partition_index", "int32", "0+"),
                F("leader_id", "int32", "0+"),
                F("leader_epoch", "int32", "0+", default=-1),
                F("replica_nodes", "[]int32", "0+"),
                F("isr_nodes", "[]int32", "0+"),
                F("eligible_leader_replicas", "[]int32", "0+", nullable="0+", default=None),
                F("last_known_elr", "[]int32", "0+", nullable="0+", default=None),
                F("offline_replicas", "[]int32", "0+"),
            ),
            F("topic_authorized_operations", "int32", "0+", default=-2147483648),
        ),
        F("next_cursor", "struct", "0+", *_CURSOR, nullable="0+", default=None),
    ),
)
