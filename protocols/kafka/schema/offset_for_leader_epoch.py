"""OffsetForLeaderEpoch (key 23): where a leader epoch ended, so a client that followed an
older leader can find whether its position is still in the log (KIP-101, KIP-320)."""

from ._dsl import Api, F

OFFSET_FOR_LEADER_EPOCH = Api(
    key=23,
    name="OffsetForLeaderEpoch",
    versions=(0, 4),
    flexible=4,
    request=(
        F("replica_id", "int32", "3+", default=-2),
        F("topics", "[]", "0+",
            F("topic", "string", "0+"),
            F("partitions", "[]", "0+",
                F("partition", "int32", "0+"),
                F("current_leader_epoch", "int32", "2+", default=-1),
                F("leader_epoch", "int32", "0+"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "2+"),
        F("topics", "[]", "0+",
            F("topic", "string", "0+"),
            F("partitions", "[]", "0+",
                F("error_code", "int16", "0+"),
                F("partition", "int32", "0+"),
                F("leader_epoch", "int32", "1+", default=-1),
                F("end_offset", "int64", "0+", default=-1),
            ),
        ),
    ),
)
