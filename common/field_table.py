"""AMQP field tables as the text other protocols read: each header's value as text.

An AMQP header table holding more than strings is stored whole, its wire bytes in one
hidden property (`PROPERTY_AMQP_HEADERS`), and an AMQP consumer gets it back typed. Every
other reader (remoting, Kafka, STOMP, SQL92 filters, the headers exchange) reads each
header as a property of its own, as text: `with_header_texts` makes those properties when
such a reader reads the message, not when it is published (a Celery publisher's texts cost
more than the rest of its publish, and most of its messages are read by AMQP consumers).
A publisher's tables mostly repeat all but an entry or two (a Celery task's id), so a table
is walked entry by entry without decoding (each type's size is known from its tag or its
length prefix) and an entry's text is remembered by its bytes: only entries not seen
recently are decoded (by pamqp). The field types are 0-9-1's and RabbitMQ's errata ('s' a
signed 16-bit integer, 'i' an unsigned 32-bit one, 'u' unsigned 16-bit, 'B' unsigned 8-bit,
'l' and 'L' 64-bit). Sans-IO; a malformed table raises ValueError.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import json
import struct
from collections.abc import Mapping
from typing import Final

from pamqp import decode

from rocketport.common.message import PROPERTY_AMQP_HEADERS

_U32 = struct.Struct(">I")
# bytes after the type tag, by tag; None: a long length prefix says (S x A F)
_SIZES: Final = {
    0x74: 1, 0x62: 1, 0x42: 1, 0x73: 2, 0x75: 2, 0x49: 4, 0x69: 4, 0x6C: 8, 0x4C: 8,
    0x66: 4, 0x64: 8, 0x44: 5, 0x54: 8, 0x56: 0, 0x53: None, 0x78: None, 0x41: None, 0x46: None,
}
_texts: dict[bytes, tuple[str, str | None]] = {}  # an entry's bytes -> (name, text)
_TEXTS_MAX: Final = 4096


def text_of(value: object) -> str:
    """A header value as the text other protocols read: strings as they are, bytes as
    their octets (undecodable ones kept through surrogateescape, so a Kafka reader gets
    them back exactly), booleans true/false, numbers as digits, a timestamp as seconds
    since the epoch, arrays and tables as JSON."""
    if type(value) is str:
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "surrogateescape")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return str(int(value.replace(tzinfo=value.tzinfo or datetime.timezone.utc).timestamp()))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=_json_value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _json_value(value: object) -> object:
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else str(value)
    return text_of(value)


def header_texts(data: bytes | memoryview, pos: int) -> tuple[list[tuple[str, str | None]], int, bool]:
    """The entries of the field table at ``pos`` (its length prefix) as (name, text; None
    for void), in order; the table's size with its prefix; and whether it holds more than
    UTF-8 long strings (then the texts do not say it all: the table is kept whole). A
    text holds no property separator (\x01, \x02: a space each), so it is stored as it
    is. Long strings, mostly a message's own (an id), are decoded each time, not kept."""
    out, size, typed, _ = _walk(data, pos, True)
    return out, size, typed


def entry_names(data: bytes | memoryview, pos: int) -> tuple[list[bytes], int]:
    """The names (their octets) of the entries of the field table at ``pos``, and its size
    with its prefix: the table checked as `header_texts` checks it (every entry but a long
    string decodes), no text made. What a publish keeps whole needs no more. A table that
    differs from the last one checked only inside long strings' values it differed in
    before (a publisher's task ids) is that table with other text: it is not walked again
    (the names are the last table's: read them, never change them)."""
    try:
        (size,) = _U32.unpack_from(data, pos)
    except struct.error:
        raise ValueError("field table truncated") from None
    table = bytes(data[pos:pos + 4 + size])
    last, names, varied = _last
    if varied is not None and len(table) == len(last) and same_but(table, last, varied):
        return names, 4 + size
    names, _, _, values = _walk(table, 0, False)
    varied = None
    if len(table) == len(last):  # which values differ from the last table's, if only they do
        varied = tuple((start, end) for start, end in values if table[start:end] != last[start:end])
        if not same_but(table, last, varied):
            varied = None
    _last[:] = table, names, varied
    return names, 4 + size


# the last table `entry_names` checked, its names, and the long strings' values (start,
# end) it differed from the one before in (None: it differed elsewhere too)
_last: list = [b"", [], None]


def last_varied() -> tuple[tuple[int, int], ...] | None:
    """Where (start, end from the length prefix) the table `entry_names` checked last
    differed from the one before it, all inside long strings' values (a publisher's task
    ids); None when it differed elsewhere too. A caller that meets a table differing from
    that one only there has its names again, unchecked."""
    return _last[2]


def same_but(table: bytes, last: bytes, varied: tuple[tuple[int, int], ...]) -> bool:
    """Whether two tables (or other octets) of one size hold the same octets outside
    ``varied`` (ascending (start, end) ranges)."""
    at = 0
    for start, end in varied:
        if table[at:start] != last[at:start]:
            return False
        at = end
    return table[at:] == last[at:]


def _walk(data: bytes | memoryview, pos: int, texts_too: bool) -> tuple[list, int, bool, list[tuple[int, int]]]:
    """The table's entries (texts, or only names), size, whether typed, and (names only)
    where its long strings' values lie."""
    try:
        (size,) = _U32.unpack_from(data, pos)
    except struct.error:
        raise ValueError("field table truncated") from None
    end = pos + 4 + size
    if end > len(data):
        raise ValueError("field table longer than its content header")
    out: list = []
    values: list[tuple[int, int]] = []
    at = pos + 4
    texts, sizes = _texts, _SIZES
    typed = False
    while at < end:
        kind_at = at + 1 + data[at]
        if kind_at >= end:
            raise ValueError("field table entry truncated")
        kind = data[kind_at]
        width = sizes.get(kind, -1)
        if width is None:
            if kind_at + 5 > end:
                raise ValueError("field table entry truncated")
            width = 4 + _U32.unpack_from(data, kind_at + 1)[0]
        elif width < 0:
            raise ValueError(f"unknown field type {bytes(data[kind_at:kind_at + 1])!r}")
        entry_end = kind_at + 1 + width
        if entry_end > end:
            raise ValueError("field table entry truncated")
        if kind == 0x53:  # 'S'
            if not texts_too:
                out.append(data[at + 1:kind_at])
                values.append((kind_at + 5, entry_end))
                at = entry_end
                continue
            try:
                name = str(data[at + 1:kind_at], "utf-8")
                text = str(data[kind_at + 5:entry_end], "utf-8")
            except UnicodeDecodeError:  # pamqp keeps such a value as bytes: their octets
                typed = True
                name = str(data[at + 1:kind_at], "utf-8", "surrogateescape")
                text = str(data[kind_at + 5:entry_end], "utf-8", "surrogateescape")
            if "\x01" in text or "\x02" in text:
                text = text.replace("\x01", " ").replace("\x02", " ")
            out.append((name, text))
            at = entry_end
            continue
        typed = True
        entry = bytes(data[at:entry_end])
        found = texts.get(entry)
        if found is None:
            found = _decoded(entry)
            if len(texts) >= _TEXTS_MAX:
                texts.clear()
            texts[entry] = found
        out.append(found if texts_too else data[at + 1:kind_at])
        at = entry_end
    return out, 4 + size, typed, values


def _decoded(entry: bytes) -> tuple[str, str | None]:
    try:
        _, table = decode.field_table(_U32.pack(len(entry)) + entry)
    except (ValueError, TypeError, struct.error, UnicodeDecodeError, decimal.InvalidOperation) as exc:
        raise ValueError(f"field table entry does not decode: {exc}") from None
    ((name, value),) = table.items()
    return name, None if value is None else text_of(value).replace("\x01", " ").replace("\x02", " ")


# an AMQP publisher's `x-delay` is the core's timer, never a header of its own
_NOT_SHOWN: Final = frozenset({"x-delay"})
AMQP_HEADERS_NEEDLE: Final = PROPERTY_AMQP_HEADERS.encode() + b"\x01"


def with_header_texts(properties: Mapping[str, str]) -> Mapping[str, str]:
    """``properties`` as every reader but an AMQP consumer sees them: the headers of a
    kept table (`PROPERTY_AMQP_HEADERS`) each a property of its own name, as text (void
    and names holding a property separator left out), the table itself hidden. Properties
    stored under a header's name (a basic property, the routing key's TAGS, what the core
    reads: stored as text at publish) keep their stored value. ``properties`` itself when
    there is no table."""
    stored = properties.get(PROPERTY_AMQP_HEADERS)
    if stored is None:
        return properties
    out: dict[str, str] = {}
    for name, text in _stored_texts(stored):
        if text is not None and name not in _NOT_SHOWN and "\x01" not in name and "\x02" not in name:
            out[name] = text
    for name, value in properties.items():
        if name != PROPERTY_AMQP_HEADERS:
            out[name] = value
    return out


def _stored_texts(stored: str) -> list[tuple[str, str | None]]:
    """The texts of a stored table (base64 of its wire bytes, length prefix included); a
    value that does not decode (never written by the broker) as no table."""
    try:
        return header_texts(base64.b64decode(stored, validate=True), 0)[0]
    except (binascii.Error, ValueError):
        return []
