"""OffsetCommit (key 8): commits a group's offsets."""

from ._dsl import Api, F

OFFSET_COMMIT = Api(
    key=8,
    name="OffsetCommit",
    versions=(0, 9),
    flexible=8,
    request=(
        F("group_id", "string", "0+"),
        F("generation_id_or_member_epoch", "int32", "1+", default=-1),
        F("member_id", "string", "1+"),
        F("group_instance_id", "string", "7+", nullable="7+", default=None),
        F("retention_time_ms", "int64", "2-4", default=-1),
        F("topics", "[]", "0+",
            F("name", "string", "0+"),
            F("partitions", "[]", "0+",
                F("partition_index", "int32", "0+"),
                F("committed_offset", "int64", "0+"),
                F("committed_leader_epoch", "int32", "6+", default=-1),
                F("commit_timestamp", "int64", "1", default=-1),
                F("committed_metadata", "string", "0+", nullable="0+"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "3+"),
        F("topics", "[]", "0+",
            F("name", "string", "0+"),
            F("partitions", "[]", "0+",
                F("partition_index", "int32", "0+"),
                F("error_code", "int16", "0+"),
            ),
        ),
    ),
)
