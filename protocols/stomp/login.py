"""A CONNECT (or STOMP) frame's answer: the version, the heart-beats and the account.

The specification's negotiation and the ACL's login, decided from the frame's headers
alone, so the session only writes CONNECTED or ERROR and starts its timers. Sans-IO: no
transport, no clock; it never writes a frame itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rocketport.core.auth.plain_acl import Account, AclError, PlainAcl

from .codec import V10, VERSIONS
from .errors import StompError

# heart-beats: we send and expect them as often as the client asks (0 = none), but never
# more often than every 100 ms
_MIN_BEAT_MS: Final = 100


class VersionRefused(Exception):
    """The client accepts no version we speak: the ERROR names ours, then the end."""


@dataclass(frozen=True, slots=True)
class Login:
    """What an accepted CONNECT settled for the connection."""

    version: str
    beat_send_ms: int  # between our heart-beats; 0 = none
    beat_receive_ms: int  # within which the client's must come; 0 = none
    account: Account | None  # None when the ACL is off


def negotiate_version(accept: str | None) -> str | None:
    """The best version both sides speak; no accept-version header means 1.0."""
    if accept is None:
        return V10
    offered = {v.strip() for v in accept.split(",")}
    return next((v for v in VERSIONS if v in offered), None)


def negotiate_heart_beat(header: str | None) -> tuple[int, int]:
    """(ms between our beats, ms within which the client's must come); 0 = none."""
    if not header:
        return 0, 0
    try:
        cx, cy = (int(part.strip()) for part in header.split(","))
    except ValueError:
        raise StompError(f"heart-beat {header[:64]!r} is not two integers") from None
    if cx < 0 or cy < 0:
        raise StompError("heart-beat values must not be negative")
    send = max(cy, _MIN_BEAT_MS) if cy else 0
    receive = max(cx, _MIN_BEAT_MS) if cx else 0
    return send, receive


def log_in(headers: dict[str, str], acl: PlainAcl | None, certificate_name: str | None = None) -> Login:
    """The CONNECT frame's outcome; VersionRefused, StompError or AclError refuse it. A
    CONNECT without a login over mutual TLS logs in as the account the verified client
    certificate's CN names (RabbitMQ's ssl_cert_login)."""
    version = negotiate_version(headers.get("accept-version"))
    if version is None:
        raise VersionRefused()
    send_ms, receive_ms = negotiate_heart_beat(headers.get("heart-beat")) if version != V10 else (0, 0)
    account = None
    if acl is not None:
        login = headers.get("login")
        if not login and certificate_name is not None:
            account = acl.account(certificate_name)
            if account is None:
                raise AclError(f"Authentication failed: client certificate CN={certificate_name} names no account")
        elif not login:
            raise StompError("Authentication failed: login and passcode are required")
        else:
            account = acl.authenticate(login, headers.get("passcode", ""))
    return Login(version, send_ms, receive_ms, account)
