"""TxnOffsetCommit (key 28): offsets a transaction commits (visible when it commits).

v5 (the transaction protocol v2) also adds the group to the transaction, as AddOffsetsToTxn.
"""

from ._dsl import Api, F

TXN_OFFSET_COMMIT = Api(
    key=28,
    name="TxnOffsetCommit",
    versions=(0, 5),
    flexible=3,
    request=(
        F("transactional_id", "string", "0+"),
        F("group_id", "string", "0+"),
        F("producer_id", "int64", "0+"),
        F("producer_epoch", "int16", "0+"),
        F("generation_id", "int32", "3+", default=-1),
        F("member_id", "string", "3+", default=""),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("topics", "[]", "0+",
            F("name", "string", "0+"),
            F("partitions", "[]", "0+",
                F("partition_index", "int32", "0+"),
                F("committed_offset", "int64", "0+"),
                F("committed_leader_epoch", "int32", "2+", default=-1),
                F("committed_metadata", "string", "0+", nullable="0+"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("topics", "[]", "0+",
            F("name", "string", "0+"),
            F("partitions", "[]", "0+",
                F("partition_index", "int32", "0+"),
                F("error_code", "int16", "0+"),
            ),
        ),
    ),
)
