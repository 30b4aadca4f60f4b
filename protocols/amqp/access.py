"""Who may connect and what they may do: the login of a start-ok and the permission checks.

With aclEnable on, a PLAIN or AMQPLAIN start-ok names an account of the ACL file (accessKey,
secretKey) and every action needs that account's permission: PUB on an exchange's topic to
publish, SUB on a queue to consume, get or purge, admin to declare, bind or delete. Without
ACL any credentials of those two mechanisms log in and every action is allowed. Refusals
are typed (`AclError` at login, a 403 `ChannelError` after); this module never writes.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from pamqp import decode

from rocketport.core.auth.plain_acl import PUB, Account, AclError, PlainAcl

from .errors import ChannelError, Reply

MECHANISMS: Final = "PLAIN AMQPLAIN"
_U32: Final = struct.Struct(">I")

SERVER_PROPERTIES: Final[dict[str, Any]] = {
    "product": "Rocketport",
    "platform": "Python",
    "version": "0.1.0",
    "capabilities": {
        "publisher_confirms": True, "exchange_exchange_bindings": True, "basic.nack": True,
        "consumer_cancel_notify": True, "connection.blocked": True, "consumer_priorities": False,
        "authentication_failure_close": True, "per_consumer_qos": True, "direct_reply_to": False,
    },
}


def login(acl: PlainAcl | None, mechanism: str, response: bytes) -> Account | None:
    """The account a start-ok logs in as (None without ACL); `AclError` refuses it."""
    if acl is not None:
        user, password = _credentials(mechanism, response)
        return acl.authenticate(user, password)
    if mechanism not in MECHANISMS.split():
        raise AclError(f"unsupported mechanism {mechanism}")
    return None


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
