"""What the sans-IO AMQP connection reports to its session: small immutable records."""

from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from pamqp.base import Frame

from .codec import Publish


@dataclass(frozen=True, slots=True)
class HeaderReceived:
    """The client's protocol header was AMQP 0-9-1: answer with connection.start."""


@dataclass(frozen=True, slots=True)
class HeaderMismatch:
    """Another protocol or version: write ``PROTOCOL_HEADER`` and close (the spec's answer)."""


@dataclass(frozen=True, slots=True)
class StartOkReceived:
    mechanism: str
    response: bytes
    client_properties: dict


@dataclass(frozen=True, slots=True)
class OpenReceived:
    virtual_host: str


@dataclass(frozen=True, slots=True)
class MethodReceived:
    """A method other than the connection class's, on an open channel number."""

    channel: int
    method: Frame


@dataclass(frozen=True, slots=True)
class ContentReceived:
    """One or more basic.publish in a row on one channel, alike in method (a pipelining
    publisher's read holds runs of them), each with its whole body (assembled from body
    frames); alike in properties too unless ``varied`` holds each one's, undecoded (a
    keyed publisher's: every message has a header of its own)."""

    channel: int
    method: Publish
    properties: dict[str, Any]  # the basic properties present, by spec name (the first's)
    bodies: list[bytes]  # in publish order
    # per body when their properties differ: the content header's bytes from the property
    # flags on (`codec.decode_properties` decodes them)
    varied: list[bytes] | None = None


@dataclass(frozen=True, slots=True)
class ContentTooLarge:
    """A publish whose declared body exceeds the broker's limit; its body was discarded."""

    channel: int
    size: int


@dataclass(frozen=True, slots=True)
class ChannelCloseOkReceived:
    """The client confirmed a channel.close we sent: the channel number is free again."""

    channel: int


@dataclass(frozen=True, slots=True)
class CloseReceived:
    """The client closes the connection: answer close-ok and drop it."""

    reply_code: int
    reply_text: str


@dataclass(frozen=True, slots=True)
class CloseOkReceived:
    """The client confirmed our connection.close."""


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """A connection-level error (501, 502, 503, 504, 505, 530, 540): the session closes the
    connection with it (``close`` on the connection)."""

    code: int
    text: str
    class_id: int = 0
    method_id: int = 0


Event = (HeaderReceived | HeaderMismatch | StartOkReceived | OpenReceived | MethodReceived
         | ContentReceived | ContentTooLarge | ChannelCloseOkReceived | CloseReceived
         | CloseOkReceived | ConnectionFailed)
