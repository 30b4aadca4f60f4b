"""ListTransactions (key 66): the transactional ids the coordinator knows (admin)."""

from ._dsl import Api, F

LIST_TRANSACTIONS = Api(
    key=66,
    name="ListTransactions",
    versions=(0, 1),
    flexible=0,
    request=(
        F("state_filters", "[]string", "0+"),
        F("producer_id_filters", "[]int64", "0+"),
        F("duration_filter", "int64", "1+", default=-1),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("unknown_state_filters", "[]string", "0+"),
        F("transaction_states", "[]", "0+",
            F("transactional_id", "string", "0+"),
            F("producer_id", "int64", "0+"),
            F("transaction_state", "string", "0+"),
        ),
    ),
)
