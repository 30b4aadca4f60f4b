"""Events a Kafka server connection emits: small immutable records, one per request frame.

They carry what a session needs to answer (correlation id, api key and version, client
id) and nothing about sockets; this module must never import asyncio or do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A well-formed request of a served API and version; ``body`` is the decoded dict."""

    correlation_id: int
    api_key: int
    api_version: int
    client_id: str | None
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class UnsupportedVersion:
    """A request whose API key or version is not served; its body was not parsed.

    For ApiVersions (key 18) the session answers UNSUPPORTED_VERSION with a v0 body listing
    the served APIs; for any other API Kafka closes the connection, and so should the session.
    """

    correlation_id: int
    api_key: int
    api_version: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class BadRequest:
    """Input that cannot be served: oversize or negative frame length, garbled header or body.

    The connection accepts no more input after this event; the session closes the socket.
    Header fields are filled when the header parsed, so the session can log what failed.
    """

    reason: str
    correlation_id: int | None = None
    api_key: int | None = None
    api_version: int | None = None
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class SaslTokenReceived:
    """A raw SASL token: the frame after a successful v0 SaslHandshake has no request header."""

    token: bytes


Event = RequestReceived | UnsupportedVersion | BadRequest | SaslTokenReceived
