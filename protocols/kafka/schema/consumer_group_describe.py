"""ConsumerGroupDescribe (key 69): a KIP-848 group's members, epochs and assignments."""

from ._dsl import Api, F

_ASSIGNMENT = (
    F("topic_partitions", "[]", "0+",
        F("topic_id", "uuid", "0+"),
        F("topic_name", "string", "0+"),
        F("partitions", "[]int32", "0+"),
    ),
)

CONSUMER_GROUP_DESCRIBE = Api(
    key=69,
    name="ConsumerGroupDescribe",
    versions=(0, 0),
    flexible=0,
    request=(
        F("group_ids", "[]string", "0+"),
        F("include_authorized_operations", "bool", "0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("groups", "[]", "0+",
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+", default=None),
            F("group_id", "string", "0+"),
            F("group_state", "string", "0+"),
            F("group_epoch", "int32", "0+"),
            F("assignment_epoch", "int32", "0+"),
            F("assignor_name", "string", "0+"),
            F("members", "[]", "0+",
                F("member_id", "string", "0+"),
                F("instance_id", "string", "0+", nullable="0+", default=None),
                F("rack_id", "string", "0+", nullable="0+", default=None),
                F("member_epoch", "int32", "0+"),
                F("client_id", "string", "0+"),
                F("client_host", "string", "0+"),
                F("subscribed_topic_names", "[]string", "0+"),
                F("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
                F("assignment", "struct", "0+", *_ASSIGNMENT),
                F("target_assignment", "struct", "0+", *_ASSIGNMENT),
            ),
            F("authorized_operations", "int32", "0+", default=-2147483648),
        ),
    ),
)
