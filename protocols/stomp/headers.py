"""A MESSAGE frame's property headers: a message's properties as ``name:value`` lines.

Every property a client could have sent shows as a header; the store's own (RocketMQ's
names) do not, except TAGS and KEYS, which show as ``x-tags`` and ``x-keys``, and neither
does one named like a header the MESSAGE sets itself. A drain renders the same properties
message after message (one producer's header block), so `PropertyHeaders.of_stored` keeps
the lines by the properties' stored octets, without the per-message unique key (a
RocketMQ producer's UNIQ_KEY, never shown): a hit costs a dict look-up, not a decode.
An AMQP publisher's ``content_type`` is the frame's ``content-type``. A value that is not
UTF-8 (a Kafka header's bytes, an AMQP byte array) cannot be a STOMP header as it is: it
is written in base64 (RFC 4648) and its name listed in ``x-base64-headers`` (names
separated by commas), so a client decodes it back to the exact octets. Typed AMQP headers
show as their text (`field_table.with_header_texts`). Sans-IO: one instance per
connection, for its negotiated version.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Final

from rocketport.common.field_table import with_header_texts
from rocketport.common.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    SYSTEM_PROPERTY_NAMES,
    decode_properties,
    without_unique_key,
)

from .codec import escape

BASE64_HEADERS: Final = "x-base64-headers"
HIDDEN: Final = SYSTEM_PROPERTY_NAMES | {
    "message-id", "ack", "subscription", "destination", "content-length", "redelivered",
    "x-reconsume-times", "x-tags", "x-keys", BASE64_HEADERS}
_CACHED_MAX: Final = 64  # distinct property blocks kept per connection


class PropertyHeaders:
    """The property header lines of one connection's MESSAGE frames."""

    __slots__ = ("version", "_tag_header", "_hidden_tagged", "_cache")

    def __init__(self, version: str, tag_header: str) -> None:
        self.version = version
        self._tag_header = tag_header
        self._hidden_tagged = HIDDEN | {tag_header}
        self._cache: dict[bytes, str] = {}

    def of_stored(self, raw: bytes) -> str:
        """The lines for properties as the store encodes them (cached, see the module)."""
        text = self._cache.get(raw)
        if text is None:
            key = without_unique_key(raw)
            text = self._cache.get(key)
            if text is None:
                if len(self._cache) >= _CACHED_MAX:
                    self._cache.clear()
                text = self._cache[key] = self.of(decode_properties(key))
        return text

    def of(self, props: Mapping[str, str]) -> str:
        """The lines for a properties dict; escaped only when one holds what must be."""
        props = with_header_texts(props)
        tags = props.get(PROPERTY_TAGS)
        # a record batch carries TAGS in its tag header too: shown once, as x-tags
        hidden = self._hidden_tagged if tags and props.get(self._tag_header) == tags else HIDDEN
        shown = [(k, v) for k, v in props.items() if k not in hidden]
        if "content_type" in props and "content-type" not in props:  # an AMQP publisher's
            shown = [("content-type" if k == "content_type" else k, v) for k, v in shown]
        if not all(v.isascii() for _, v in shown):
            shown = _binary_as_base64(shown)
        if tags:
            shown.append(("x-tags", tags))
        keys = props.get(PROPERTY_KEYS)
        if keys:
            shown.append(("x-keys", keys))
        text = "".join([f"{k}:{v}\n" for k, v in shown])
        if text and ("\\" in text or "\r" in text or text.count(":") != len(shown)
                     or text.count("\n") != len(shown)):
            version = self.version
            text = "".join([f"{escape(k, version)}:{escape(v, version)}\n" for k, v in shown])
        return text



def _binary_as_base64(shown: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Values that are not UTF-8 (octets kept through surrogateescape) in base64, their
    names listed in `BASE64_HEADERS`."""
    out: list[tuple[str, str]] = []
    binary: list[str] = []
    for name, value in shown:
        try:
            value.encode()
        except UnicodeEncodeError:
            value = base64.b64encode(value.encode("utf-8", "surrogateescape")).decode()
            binary.append(name)
        out.append((name, value))
    if binary:
        out.append((BASE64_HEADERS, ",".join(binary)))
    return out
