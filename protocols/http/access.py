"""Who may read the console and /api/: with ``aclEnable``, only the ACL's admin accounts
(HTTP basic auth against the plain ACL file, as SASL/PLAIN logins are); without it, only
clients on a loopback address unless ``http.allowRemote`` is set. /metrics is outside this
check, as RocketMQ's and RabbitMQ's exporters are: Prometheus scrapes it from elsewhere.

Sans-IO: a request in, None (allowed) or the refusal to answer out.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from typing import Final

from rocketport.core.auth.plain_acl import AclError, PlainAcl
from rocketport.core.config import BrokerConfig

from . import responses
from .responses import Response
from .session import Request

REALM: Final = 'Basic realm="Rocketport", charset="UTF-8"'


class HttpAccess:
    def __init__(self, config: BrokerConfig) -> None:
        self.acl = PlainAcl(config.plain_acl_file) if config.acl_enable else None
        self.allow_remote = config.http.allow_remote

    def refusal(self, request: Request) -> Response | None:
        """None when the request may be answered, else the 401 or 403 to send."""
        if self.acl is not None:
            credentials = basic_credentials(request)
            if credentials is None:
                return _challenge("an admin account of the ACL is needed (HTTP basic auth)")
            try:
                account = self.acl.authenticate(*credentials)
            except AclError as exc:
                return _challenge(str(exc))
            if not account.admin:
                return responses.text(403, f"{account.access_key} is not an admin account of the ACL")
            return None
        if self.allow_remote or is_loopback(request.peer[0]):
            return None
        return responses.text(403, "the console and /api/ answer only loopback clients: turn aclEnable on "
                                   "(admin accounts log in) or set http.allowRemote")


def basic_credentials(request: Request) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header (UTF-8, RFC 7617), else None."""
    value = next((v for k, v in request.headers if k.lower() == "authorization"), "")
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, colon, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (user, password) if colon else None


def is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _challenge(why: str) -> Response:
    return responses.Response(401, responses.TEXT, (why + "\n").encode(), (("www-authenticate", REALM),))
