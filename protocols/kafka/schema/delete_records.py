"""DeleteRecords (key 21): raises partitions' log start offsets."""

from ._dsl import Api, F

DELETE_RECORDS = Api(
    key=21,
    name="DeleteRecords",
    versions=(0, 2),
    flexible=2,
    request=(
        F("topics", "[]", "0+",
            F("name", "string", "0+"),
            F("partitions", "[]", "0+",
                F("partition_index", "int32", "0+"),
                F("offset", "int64", "0+"),
            ),
        ),
        F("timeout_ms", "int32", "0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("topics", "[]", "0+",
            F("name", "string", "0+"),
            F("partitions", "[]", "0+",
                F("partition_index", "int32", "0+"),
                F("low_watermark", "int64", "0+"),
                F("error_code", "int16", "0+"),
            ),
        ),
    ),
)
