"""DeleteTopics (key 20): deletes topics."""

from ._dsl import Api, F

DELETE_TOPICS = Api(
    key=20,
    name="DeleteTopics",
    versions=(0, 6),
    flexible=4,
    request=(
        F("topics", "[]", "6+",
            F("name", "string", "6+", nullable="6+", default=None),
            F("topic_id", "uuid", "6+"),
        ),
        F("topic_names", "[]string", "0-5"),
        F("timeout_ms", "int32", "0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+"),
        F("responses", "[]", "0+",
            F("name", "string", "0+", nullable="6+"),
            F("topic_id", "uuid", "6+"),
            F("error_code", "int16", "0+"),
            F("error_message", "string", "5+", nullable="5+", default=None),
        ),
    ),
)
