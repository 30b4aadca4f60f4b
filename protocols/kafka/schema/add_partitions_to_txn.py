"""AddPartitionsToTxn (key 24): a transactional producer names the partitions it writes.

Versions 0-3 are the client's (v4+ is the brokers' batched verification, not served)."""

from ._dsl import Api, F

ADD_PARTITIONS_TO_TXN = Api(
    key=24,
    name="AddPartitionsToTxn",
    versions=(0, 3),
    flexible=3,
    request=(
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F("v3_and_below_topics", "[]", "0-3",
            F("name", "string", "0+"),
            F("partitions", "[]int32", "0+"),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("results_by_topic_v3_and_below", "[]", "0-3",
            F("name", "string", "0+"),
            F("results_by_partition", "[]", "0+",
                F("partition_index", "int32", "0+"),
                F("partition_error_code", "int16", "0+"),
            ),
        ),
    ),
)
