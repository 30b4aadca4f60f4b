"""ListGroups (key 16): lists groups, for admin tools."""

from ._dsl import Api, F

LIST_GROUPS = Api(
    key=16,
    name="ListGroups",
    versions=(0, 5),
    flexible=3,
    request=(
        F("states_filter", "[]string", "4+"),
        F("types_filter", "[]string", "5+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "0+"),
        F("groups", "[]", "0+",
            F("group_id", "string", "0+"),
            F("protocol_type", "string", "0+"),
            F("group_state", "string", "4+"),
            F("group_type", "string", "5+"),
        ),
    ),
)
