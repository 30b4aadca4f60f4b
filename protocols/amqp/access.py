"""Who may connect and what they may do: the login of a start-ok and the permission checks.

With aclEnable on, a PLAIN or AMQPLAIN start-ok names an account of the ACL file (accessKey,
secretKey) and every action needs that account's permission: PUB on an exchange's topic to
publish, SUB on a queue to consume, get or purge, admin to declare, bind or delete. Without
ACL there is RabbitMQ's one default account (amqp.defaultUser / amqp.defaultPass, guest /
guest; an empty defaultUser lets any credentials in) and every action is allowed. Either
way a user named in amqp.loopbackUsers (RabbitMQ's loopback_users: guest) logs in only from
a loopback address (127.0.0.0/8, ::1). Over mutual TLS, EXTERNAL logs in as the account
the client certificate's CN names. A refused login is `LoginRefused`, whose reply text
is RabbitMQ's (the reason goes to the broker's log, not to the client); a refused action a
403 `ChannelError`. This module never writes.
"""

from __future__ import annotations

import hmac
import ipaddress
import struct
from dataclasses import dataclass
from typing import Any, Final

from pamqp import decode

from rocketport.core.auth.plain_acl import PUB, Account, AclError, PlainAcl

from .errors import ChannelError, Reply

MECHANISMS: Final = "PLAIN AMQPLAIN"
EXTERNAL: Final = "EXTERNAL"  # offered first on a connection with a verified client certificate
_U32: Final = struct.Struct(">I")

SERVER_PROPERTIES: Final[dict[str, Any]] = {
    "product": "Rocketport",
    "platform": "Python",
    "version": "0.1.0",
    "capabilities": {
        "publisher_confirms": True, "exchange_exchange_bindings": True, "basic.nack": True,
        "consumer_cancel_notify": True, "connection.blocked": True, "consumer_priorities": True,
        "authentication_failure_close": True, "per_consumer_qos": True, "direct_reply_to": True,
    },
}


class LoginRefused(AclError):
    """A start-ok refused: connection.close 403 with RabbitMQ's words (``reply_text``);
    the message (the reason) is for the broker's log."""

    def __init__(self, mechanism: str, reason: str) -> None:
        super().__init__(reason)
        self.reply_text = (f"ACCESS_REFUSED - Login was refused using authentication mechanism "
                           f"{mechanism}. For details see the broker logfile.")


@dataclass(frozen=True, slots=True)
class Logins:
    """Who may log in (see the module): the ACL file's accounts, else the default account,
    and the users who may log in from a loopback address only."""

    acl: PlainAcl | None
    default_user: str = ""
    default_pass: str = ""
    loopback_users: frozenset[str] = frozenset()

    def login(self, mechanism: str, response: bytes, peer_host: str,
              certificate_name: str | None = None) -> Account | None:
        """The account a start-ok from ``peer_host`` logs in as (None without ACL);
        `LoginRefused` refuses it. EXTERNAL (offered on a mutual-TLS connection, as
        RabbitMQ's rabbitmq_auth_mechanism_ssl) logs in as the account the verified client
        certificate's CN names."""
        if mechanism == EXTERNAL and certificate_name is not None:
            if self.acl is None:
                return None
            account = self.acl.account(certificate_name)
            if account is None:
                raise LoginRefused(mechanism, f"client certificate CN={certificate_name} names no account")
            return account
        if mechanism not in MECHANISMS.split():
            raise LoginRefused(mechanism, f"unsupported mechanism {mechanism!r}")
        try:
            user, password = _credentials(mechanism, response)
        except AclError as exc:
            raise LoginRefused(mechanism, str(exc)) from None
        account = None
        if self.acl is not None:
            try:
                account = self.acl.authenticate(user, password)
            except AclError as exc:
                raise LoginRefused(mechanism, f"user '{user}': {exc}") from None
        elif self.default_user:
            # compared whatever the name, so timing does not tell a wrong name from a wrong password
            good = hmac.compare_digest(password.encode(), self.default_pass.encode())
            if user != self.default_user or not good:
                raise LoginRefused(mechanism, f"user '{user}': invalid credentials")
        if user in self.loopback_users and not _loopback(peer_host):
            raise LoginRefused(mechanism, f"user '{user}' can only connect via localhost")
        return account


def _loopback(host: str) -> bool:
    """127.0.0.0/8 and ::1 (an IPv4 one mapped into IPv6 too), as RabbitMQ counts them."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def require(account: Account | None, resource: str, needed: int) -> None:
    """403 unless the account may use the topic or queue as ``needed`` (PUB or SUB) says."""
    if account is not None and not account.permits(resource, needed):
        what = "write to" if needed == PUB else "read from"
        raise ChannelError(Reply.ACCESS_REFUSED, f"user '{account.access_key}' may not {what} '{resource}'")


def require_admin(account: Account | None, what: str) -> None:
    """403 unless the account is an admin (declarations, bindings, deletes)."""
    if account is not None and not account.admin:
        raise ChannelError(Reply.ACCESS_REFUSED, f"user '{account.access_key}' is not an admin: cannot {what}")


def _credentials(mechanism: str, response: bytes) -> tuple[str, str]:
    """The user name and password of a PLAIN or AMQPLAIN start-ok response."""
    if mechanism == "PLAIN":
        parts = response.split(b"\0")
        if len(parts) != 3:
            raise AclError("Authentication failed: malformed PLAIN response")
        return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if mechanism == "AMQPLAIN":
        try:
            _, table = decode.field_table(_U32.pack(len(response)) + response)
        except (ValueError, struct.error, IndexError) as exc:
            raise AclError(f"Authentication failed: malformed AMQPLAIN response ({exc})") from None
        return str(table.get("LOGIN", "")), str(table.get("PASSWORD", ""))
    raise AclError(f"Authentication failed: unsupported mechanism {mechanism}")
