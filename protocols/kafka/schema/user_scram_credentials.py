"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), KIP-554:
what kafka-configs --entity-type users and the admin clients use for SCRAM credentials."""

from ._dsl import Api, F

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    key=50,
    name="DescribeUserScramCredentials",
    versions=(0, 0),
    flexible=0,
    request=(
        F("users", "[]", "0+",
            F("name", "string", "0+"),
            nullable="0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F("results", "[]", "0+",
            F("user", "string", "0+"),
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            F("credential_infos", "[]", "0+",
                F("mechanism", "int8", "0+"),
                F("iterations", "int32", "0+"),
            ),
        ),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    key=51,
    name="AlterUserScramCredentials",
    versions=(0, 0),
    flexible=0,
    request=(
        F("deletions", "[]", "0+",
            F("name", "string", "0+"),
            F("mechanism", "int8", "0+"),
        ),
        F("upsertions", "[]", "0+",
            F("name", "string", "0+"),
            F("mechanism", "int8", "0+"),
            F("iterations", "int32", "0+"),
            F("salt", "bytes", "0+"),
            F("salted_password", "bytes", "0+"),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("results", "[]", "0+",
            F("user", "string", "0+"),
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
        ),
    ),
)
