"""EndTxn (key 26): commit or abort the producer's open transaction."""

from ._dsl import Api, F

END_TXN = Api(
    key=26,
    name="EndTxn",
    versions=(0, 4),
    flexible=3,
    request=(
        F("transactional_id", "string", "0+"),
        F("producer_id", "int64", "0+"),
        F("producer_epoch", "int16", "0+"),
        F("committed", "bool", "0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
    ),
)
