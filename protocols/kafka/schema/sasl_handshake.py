"""SaslHandshake (key 17): the client names its SASL mechanism. v0 is followed by raw SASL
tokens (no Kafka framing), v1 by SaslAuthenticate requests."""

from ._dsl import Api, F

SASL_HANDSHAKE = Api(
    key=17,
    name="SaslHandshake",
    versions=(0, 1),
    flexible=None,
    request=(
        F("mechanism", "string", "0+"),
    ),
    response=(
        F("error_code", "int16", "0+"),
        F("mechanisms", "[]string", "0+"),
    ),
)
