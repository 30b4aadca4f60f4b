"""ApiVersions (key 18): the first request of a connection: which APIs and versions the broker serves."""

from ._dsl import Api, F

API_VERSIONS = Api(
    key=18,
    name="ApiVersions",
    versions=(0, 4),
    flexible=3,
    request=(
        F("client_software_name", "string", "3+"),
        F("client_software_version", "string", "3+"),
    ),
    response=(
        F("error_code", "int16", "0+"),
        F("api_keys", "[]", "0+",
            F("api_key", "int16", "0+"),
            F("min_version", "int16", "0+"),
            F("max_version", "int16", "0+"),
        ),
        F("throttle_time_ms", "int32", "1+"),
        F("supported_features", "[]", "3+",
            F("name", "string", "3+"),
            F("min_version", "int16", "3+"),
            F("max_version", "int16", "3+"),
            tag=0,
        ),
        F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
        F("finalized_features", "[]", "3+",
            F("name", "string", "3+"),
            F("max_version_level", "int16", "3+"),
            F("min_version_level", "int16", "3+"),
            tag=2,
        ),
        F("zk_migration_ready", "bool", "3+", tag=3, default=False),
    ),
)
