"""DescribeTransactions (key 65): the coordinator's state of transactional ids (admin)."""

from ._dsl import Api, F

DESCRIBE_TRANSACTIONS = Api(
    key=65,
    name="DescribeTransactions",
    versions=(0, 0),
    flexible=0,
    request=(
        F("transactional_ids", "[]string", "0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("transaction_states", "[]", "0+",
            F("error_code", "int16", "0+"),
            F("transactional_id", "string", "0+"),
            F("transaction_state", "string", "0+"),
            F("transaction_timeout_ms", "int32", "0+"),
            F("transaction_start_time_ms", "int64", "0+"),
            F("producer_id", "int64", "0+"),
            F("producer_epoch", "int16", "0+"),
            F("topics", "[]", "0+",
                F("topic", "string", "0+"),
                F("partitions", "[]int32", "0+"),
            ),
        ),
    ),
)
