"""AlterConfigs (key 33): replaces a resource's dynamic configs (the legacy API)."""

from ._dsl import Api, F

ALTER_CONFIGS = Api(
    key=33,
    name="AlterConfigs",
    versions=(0, 2),
    flexible=2,
    request=(
        F("resources", "[]", "0+",
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            F("configs", "[]", "0+",
                F("name", "string", "0+"),
                F("value", "string", "0+", nullable="0+"),
            ),
        ),
        F("validate_only", "bool", "0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("responses", "[]", "0+",
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
        ),
    ),
)
