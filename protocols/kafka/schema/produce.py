"""Produce (key 0): appends record batches to partitions.

v12 has v11's fields; in a transaction it also adds the partitions it writes to the
transaction (the transaction protocol v2, KIP-890 part 2). v13 (Kafka 4.1) names topics by
id, in the request and the response (KIP-516): an id no topic has is UNKNOWN_TOPIC_ID.
"""

from ._dsl import Api, F

PRODUCE = Api(
    key=0,
    name="Produce",
    versions=(0, 13),
    flexible=9,
    request=(
        F("transactional_id", "string", "3+", nullable="3+", default=None),
        F("acks", "int16", "0+"),
        F("timeout_ms", "int32", "0+"),
        F("topic_data", "[]", "0+",
            F("name", "string", "0-12"),
            F("topic_id", "uuid", "13+"),
            F("partition_data", "[]", "0+",
                F("index", "int32", "0+"),
                F("records", "records", "0+", nullable="0+"),
            ),
        ),
    ),
    response=(
        F("responses", "[]", "0+",
            F("name", "string", "0-12"),
            F("topic_id", "uuid", "13+"),
            F("partition_responses", "[]", "0+",
                F("index", "int32", "0+"),
                F("error_code", "int16", "0+"),
                F("base_offset", "int64", "0+"),
                F("log_append_time_ms", "int64", "2+", default=-1),
                F("log_start_offset", "int64", "5+", default=-1),
                F("record_errors", "[]", "8+",
                    F("batch_index", "int32", "8+"),
                    F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                ),
                F("error_message", "string", "8+", nullable="8+", default=None),
                F("current_leader", "struct", "10+",
                    F("leader_id", "int32", "10+", default=-1),
                    F("leader_epoch", "int32", "10+", default=-1),
                    tag=0,
                ),
            ),
        ),
        F("throttle_time_ms", "int32", "1+", default=0),
        F("node_endpoints", "[]", "10+",
            F("node_id", "int32", "10+"),
            F("host", "string", "10+"),
            F("port", "int32", "10+"),
            F("rack", "string", "10+", nullable="10+", default=None),
            tag=0,
        ),
    ),
)
