"""DescribeConfigs (key 32): topic and broker configuration, for admin tools."""

from ._dsl import Api, F

DESCRIBE_CONFIGS = Api(
    key=32,
    name="DescribeConfigs",
    versions=(0, 4),
    flexible=4,
    request=(
        F("resources", "[]", "0+",
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            F("configuration_keys", "[]string", "0+", nullable="0+"),
        ),
        F("include_synonyms", "bool", "1+", default=False),
        F("include_documentation", "bool", "3+", default=False),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("results", "[]", "0+",
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            F("configs", "[]", "0+",
                F("name", "string", "0+"),
                F("value", "string", "0+", nullable="0+"),
                F("read_only", "bool", "0+"),
                F("is_default", "bool", "0"),
                F("config_source", "int8", "1+", default=-1),
                F("is_sensitive", "bool", "0+"),
                F("synonyms", "[]", "1+",
                    F("name", "string", "1+"),
                    F("value", "string", "1+", nullable="0+"),
                    F("source", "int8", "1+"),
                ),
                F("config_type", "int8", "3+", default=0),
                F("documentation", "string", "3+", nullable="0+"),
            ),
        ),
    ),
)
