"""SASL/PLAIN for the Kafka front-end (``kafkaSaslMechanisms: PLAIN``).

User names and passwords are the plain ACL's accounts (accessKey / secretKey in
``plainAclFile``), so one account works over RocketMQ remoting and Kafka, and its topic and
group permissions apply to both. PLAIN sends the password in clear: use it on trusted
networks (there is no TLS listener yet). The session drives the exchange; this module only
parses tokens and answers yes or no, without sockets.
"""

from __future__ import annotations

from rocketport.core.auth.plain_acl import Account, AclError, PlainAcl

from .errors import ErrorCode

PLAIN = "PLAIN"


class SaslPlain:
    def __init__(self, acl: PlainAcl) -> None:
        self.acl = acl
        self.mechanisms = [PLAIN]

    def handshake(self, mechanism: str) -> ErrorCode:
        return ErrorCode.NONE if mechanism == PLAIN else ErrorCode.UNSUPPORTED_SASL_MECHANISM

    def authenticate(self, token: bytes) -> Account:
        """``[authzid] NUL authcid NUL passwd`` (RFC 4616); raises AclError when refused."""
        parts = bytes(token).split(b"\0")
        if len(parts) != 3 or not parts[1]:
            raise AclError("Authentication failed: malformed PLAIN token")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AclError("Authentication failed: PLAIN token is not UTF-8") from None
        if authzid and authzid != user:
            raise AclError("Authentication failed: authorization id differs from the user name")
        return self.acl.authenticate(user, password)
