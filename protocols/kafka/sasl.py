"""SASL for the Kafka front-end: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (``kafkaSaslMechanisms``).

Accounts and their topic and group permissions are the plain ACL's (``plainAclFile``), so one
account works over RocketMQ remoting and Kafka. PLAIN checks the account's secretKey, sent in
clear (use the TLS port, SASL_SSL); SCRAM checks the salted credential kept in the SCRAM
file (core/auth/scram.py, no password on disk) and takes the account's permissions by name.
The session drives the exchange; this module answers token by token, without sockets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rocketport.core.auth.plain_acl import Account, AclError, PlainAcl
from rocketport.core.auth.scram import MECHANISMS as SCRAM_MECHANISMS
from rocketport.core.auth.scram import ScramCredentials, ScramError, ScramServer

from .errors import ErrorCode

PLAIN = "PLAIN"


class SaslExchange(Protocol):
    def step(self, token: bytes) -> tuple[bytes, Account | None]:
        """The server's token, and the account once authenticated (None: another round)."""


@dataclass(slots=True)
class _PlainExchange:
    acl: PlainAcl

    def step(self, token: bytes) -> tuple[bytes, Account | None]:
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
        return b"", self.acl.authenticate(user, password)


@dataclass(slots=True)
class _ScramExchange:
    acl: PlainAcl
    server: ScramServer

    def step(self, token: bytes) -> tuple[bytes, Account | None]:
        try:
            reply = self.server.step(token)
        except ScramError as exc:
            raise AclError(str(exc)) from None
        if self.server.user is None:
            return reply, None
        account = self.acl.account(self.server.user)
        if account is None:
            raise AclError(f"Authentication failed: no account {self.server.user} in the ACL")
        return reply, account


class SaslServer:
    def __init__(self, acl: PlainAcl, mechanisms: list[str], scram: ScramCredentials | None) -> None:
        self.acl = acl
        self.mechanisms = mechanisms
        self.scram = scram

    def handshake(self, mechanism: str) -> ErrorCode:
        return ErrorCode.NONE if mechanism in self.mechanisms else ErrorCode.UNSUPPORTED_SASL_MECHANISM

    def start(self, mechanism: str) -> SaslExchange:
        if mechanism in SCRAM_MECHANISMS and self.scram is not None:
            return _ScramExchange(self.acl, ScramServer(mechanism, self.scram))
        return _PlainExchange(self.acl)


def parse_mechanisms(value: str) -> list[str]:
    """kafkaSaslMechanisms: names separated by commas (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."""
    return [m.strip().upper() for m in value.split(",") if m.strip()]
