"""Who may read the console and /api/: with ``aclEnable``, only the ACL's admin accounts
(HTTP basic auth checked by `check_login` against the broker's one account file, as every
protocol's logins are; any refusal is a 401 as RabbitMQ's management API answers a user
without the management tag, the reason in the broker's log); without it, only
clients on a loopback address unless ``http.allowRemote`` is set. /metrics is outside this
check, as RocketMQ's and RabbitMQ's exporters are: Prometheus scrapes it from elsewhere.

Sans-IO: a request in, None (allowed) or the refusal to answer out.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
from typing import Final
from urllib.parse import urlsplit

from rocketport.core.auth.plain_acl import AclError, check_login
from rocketport.core.broker import Broker

from . import responses
from .responses import Response
from .session import Request

log = logging.getLogger(__name__)

REALM: Final = 'Basic realm="Rocketport", charset="UTF-8"'


class HttpAccess:
    def __init__(self, broker: Broker) -> None:
        config = broker.config
        self.acl = broker.acl if config.acl_enable else None
        self.allow_remote = config.http.allow_remote

    def refusal(self, request: Request) -> Response | None:
        """None when the request may be answered, else the 401 or 403 to send."""
        if self.acl is not None:
            credentials = basic_credentials(request)
            if credentials is None:
                return _challenge("an admin account of the ACL is needed (HTTP basic auth)")
            try:
                check_login(self.acl, *credentials, admin=True)
            except AclError as exc:
                log.info("http: %s:%d refused: %s", *request.peer, exc)
                return _challenge("refused: an admin account of the ACL is needed (HTTP basic auth)")
            return None
        if self.allow_remote:
            return None
        if not is_loopback(request.peer[0]):
            return responses.text(403, "the console and /api/ answer only loopback clients: turn aclEnable on "
                                       "(admin accounts log in) or set http.allowRemote")
        # a page of another site whose name was re-pointed at 127.0.0.1 (DNS rebinding)
        # reaches a loopback client's broker under its own name: answer only our names
        if not _loopback_host(_header(request, "host")):
            return responses.text(403, "the console and /api/ answer requests for a loopback host name only")
        return None

    def write_refusal(self, request: Request) -> Response | None:
        """For a request that changes something (POST), beyond `refusal`: a JSON body (an
        HTML form of another site cannot send one without the browser asking us first,
        which we never allow) and, when the browser names the page's origin, this host."""
        if _header(request, "content-type").split(";")[0].strip().lower() != "application/json":
            return responses.text(415, "send the action as JSON (content-type: application/json)")
        origin = _header(request, "origin")
        if origin and urlsplit(origin).netloc.lower() != _header(request, "host").lower():
            return responses.text(403, f"a page of {origin} may not change this broker")
        return None


def basic_credentials(request: Request) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header (UTF-8, RFC 7617), else None."""
    scheme, _, token = _header(request, "authorization").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, colon, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (user, password) if colon else None


def _header(request: Request, name: str) -> str:
    return next((v for k, v in request.headers if k.lower() == name), "")


def _loopback_host(host: str) -> bool:
    """Whether a Host header names this machine by a loopback name or address (port aside);
    an HTTP/1.0 request may have none (h11 requires one of HTTP/1.1, as browsers send)."""
    name = host.strip().lower()
    if not name:
        return True
    if name.startswith("["):  # [::1]:5557
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    return name == "localhost" or name.endswith(".localhost") or is_loopback(name)


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
