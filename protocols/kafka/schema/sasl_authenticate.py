"""SaslAuthenticate (key 36): one SASL token each way, after a v1 SaslHandshake."""

from ._dsl import Api, F

SASL_AUTHENTICATE = Api(
    key=36,
    name="SaslAuthenticate",
    versions=(0, 2),
    flexible=2,
    request=(
        F("auth_bytes", "bytes", "0+"),
    ),
    response=(
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+"),
        F("auth_bytes", "bytes", "0+"),
        F("session_lifetime_ms", "int64", "1+", default=0),
    ),
)
