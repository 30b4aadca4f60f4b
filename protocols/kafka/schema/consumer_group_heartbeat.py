"""ConsumerGroupHeartbeat (key 68): KIP-848's one group call (join, heartbeat, leave, and
the assignment the broker computed), transcribed from Kafka 4.0's spec (v1 adds the RE2
topic regex and client-generated member ids, KIP-1082)."""

from ._dsl import Api, F

CONSUMER_GROUP_HEARTBEAT = Api(
    key=68,
    name="ConsumerGroupHeartbeat",
    versions=(0, 1),
    flexible=0,
    request=(
        F("group_id", "string", "0+"),
        F("member_id", "string", "0+"),
        F("member_epoch", "int32", "0+"),
        F("instance_id", "string", "0+", nullable="0+", default=None),
        F("rack_id", "string", "0+", nullable="0+", default=None),
        F("rebalance_timeout_ms", "int32", "0+", default=-1),
        F("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
        F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        F("server_assignor", "string", "0+", nullable="0+", default=None),
        F("topic_partitions", "[]", "0+",
            F("topic_id", "uuid", "0+"),
            F("partitions", "[]int32", "0+"),
            nullable="0+", default=None,
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F("member_id", "string", "0+", nullable="0+", default=None),
        F("member_epoch", "int32", "0+"),
        F("heartbeat_interval_ms", "int32", "0+"),
        F("assignment", "struct", "0+",
            F("topic_partitions", "[]", "0+",
                F("topic_id", "uuid", "0+"),
                F("partitions", "[]int32", "0+"),
            ),
            nullable="0+", default=None,
        ),
    ),
)
