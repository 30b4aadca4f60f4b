"""EndTxn (key 26): commit or abort the producer's open transaction.

v5 (the transaction protocol v2) bumps the producer's epoch at every end and answers the
producer id and epoch the next transaction runs under.
"""

from ._dsl import Api, F

END_TXN = Api(
    key=26,
    name="EndTxn",
    versions=(0, 5),
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
        F("producer_id", "int64", "5+", default=-1),
        F("producer_epoch", "int16", "5+", default=-1),
    ),
)
