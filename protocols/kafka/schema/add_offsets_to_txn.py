"""AddOffsetsToTxn (key 25): a transaction will commit offsets of a consumer group."""

from ._dsl import Api, F

ADD_OFFSETS_TO_TXN = Api(
    key=25,
    name="AddOffsetsToTxn",
    versions=(0, 4),
    flexible=3,
    request=(
        F("transactional_id", "string", "0+"),
        F("producer_id", "int64", "0+"),
        F("producer_epoch", "int16", "0+"),
        F("group_id", "string", "0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
    ),
)
