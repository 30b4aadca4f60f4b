"""DescribeAcls (key 29), CreateAcls (30) and DeleteAcls (31), KIP-140 with KIP-290's
pattern types: what kafka-acls and the admin clients use to read and write ACL bindings."""

from ._dsl import Api, F

_FILTER = (
    F("resource_type_filter", "int8", "0+"),
    F("resource_name_filter", "string", "0+", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=3),
    F("principal_filter", "string", "0+", nullable="0+"),
    F("host_filter", "string", "0+", nullable="0+"),
    F("operation", "int8", "0+"),
    F("permission_type", "int8", "0+"),
)

DESCRIBE_ACLS = Api(
    key=29,
    name="DescribeAcls",
    versions=(0, 3),
    flexible=2,
    request=_FILTER,
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F("resources", "[]", "0+",
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            F("pattern_type", "int8", "1+", default=3),
            F("acls", "[]", "0+",
                F("principal", "string", "0+"),
                F("host", "string", "0+"),
                F("operation", "int8", "0+"),
                F("permission_type", "int8", "0+"),
            ),
        ),
    ),
)

CREATE_ACLS = Api(
    key=30,
    name="CreateAcls",
    versions=(0, 3),
    flexible=2,
    request=(
        F("creations", "[]", "0+",
            F("resource_type", "int8", "0+"),
            F("resource_name", "string", "0+"),
            F("resource_pattern_type", "int8", "1+", default=3),
            F("principal", "string", "0+"),
            F("host", "string", "0+"),
            F("operation", "int8", "0+"),
            F("permission_type", "int8", "0+"),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("results", "[]", "0+",
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
        ),
    ),
)

DELETE_ACLS = Api(
    key=31,
    name="DeleteAcls",
    versions=(0, 3),
    flexible=2,
    request=(
        F("filters", "[]", "0+", *_FILTER),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("filter_results", "[]", "0+",
            F("error_code", "int16", "0+"),
            F("error_message", "string", "0+", nullable="0+"),
            F("matching_acls", "[]", "0+",
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+"),
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
                F("pattern_type", "int8", "1+", default=3),
                F("principal", "string", "0+"),
                F("host", "string", "0+"),
                F("operation", "int8", "0+"),
                F("permission_type", "int8", "0+"),
            ),
        ),
    ),
)
