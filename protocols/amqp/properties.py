"""AMQP basic properties and headers to message properties, and back.

Every protocol shares one store, so what an AMQP publisher sets must be what a Kafka
consumer sees as headers and a RocketMQ consumer as user properties: each basic property is
stored under its spec name (``content_type``, ``correlation_id``, ``reply_to``, ``type`` ...)
and each header under its own name, as text (``timestamp`` in seconds since the epoch).
The routing key is the message's TAGS. Going back, the same names become the basic
properties and every other non-system property a header. A header table holding anything
but strings (numbers, booleans, timestamps, decimals, byte arrays, arrays, tables, void) is
kept as it came instead, its wire bytes in one hidden property (`PROPERTY_AMQP_HEADERS`),
and an AMQP consumer gets that table back, types and values as published; every other
reader gets each header's text when it reads the message (`field_table.with_header_texts`:
numbers as digits, so SQL92 compares them as numbers; arrays and tables as JSON). Only the
headers named like what the broker itself reads from the stored properties (a basic
property, the core's names, the default-exchange mark, a STOMP ``content-type``) are also
stored as text at publish. A text value that is not UTF-8 (a Kafka header's bytes) goes to
AMQP as a byte array ('x'). Header-less and all-string publishes store nothing more. The
core's own properties (TAGS, KEYS, UNIQ_KEY, DELAY, ...) are never shown as headers, except
DELAY and the timer keys a publisher may set to use the core's delay path. A stored
``content-type`` (a STOMP sender's) is the content_type property when there is none.
"""

from __future__ import annotations

import base64
import binascii
from binascii import b2a_base64
import struct
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final

from pamqp import decode

from rocketport.common.field_table import entry_names, last_varied, same_but
from rocketport.common.field_table import text_of as _text
from rocketport.common.message import (
    PROPERTY_AMQP_HEADERS,
    PROPERTY_DEDUP_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SYSTEM_PROPERTY_NAMES,
)

# (property name, flag bit, kind) in the spec's order; kind: s shortstr, o octet, t u64
_FIELDS: Final = (
    ("content_type", 15, "s"), ("content_encoding", 14, "s"), ("headers", 13, "F"),
    ("delivery_mode", 12, "o"), ("priority", 11, "o"), ("correlation_id", 10, "s"),
    ("reply_to", 9, "s"), ("expiration", 8, "s"), ("message_id", 7, "s"),
    ("timestamp", 6, "t"), ("type", 5, "s"), ("user_id", 4, "s"), ("app_id", 3, "s"),
)
BASIC_NAMES: Final = frozenset(name for name, _, _ in _FIELDS if name != "headers")
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")

# the amqp headers RabbitMQ's delayed-message plugin uses: milliseconds to wait
X_DELAY: Final = "x-delay"
# marks a publish through the default exchange into a queue's topic that is also an
# exchange's (kombu and Celery name both alike): the queue takes it, the exchange's
# bindings do not. Never shown as a header.
DEFAULT_EXCHANGE_MARK: Final = "AMQP_TO_QUEUE"


# what the codec adds to a content header's properties when its header table holds more
# than strings: the table's wire bytes (length included)
HEADERS_TABLE: Final = "headers_table"
# header names stored as text even when their table is kept: what the broker itself reads
# from stored properties (a basic property's: the property wins; the core's names; the
# mark; a STOMP sender's content-type, the content_type property when there is none)
_EAGER: Final = BASIC_NAMES | SYSTEM_PROPERTY_NAMES | {PROPERTY_DEDUP_KEY, DEFAULT_EXCHANGE_MARK, "content-type"}


def to_message_properties(props: Mapping[str, Any], routing_key: str, now_ms: int) -> dict[str, str]:
    """A publish's properties (`codec.ContentHeader.properties`) as stored: TAGS = routing
    key, basic properties by name, headers by name (a table kept whole: only those named
    in `_EAGER`). ``x-delay`` (ms) becomes the core's TIMER_DELIVER_MS."""
    out: dict[str, str] = {}
    if props:
        headers = props.get("headers")
        typed = HEADERS_TABLE in props  # kept whole; its headers are texts already (field_table.header_texts)
        if headers:
            for key, value in headers.items():
                if key == X_DELAY:
                    try:
                        delay = int(value)  # type: ignore[arg-type]
                    except (TypeError, ValueError):
                        continue
                    if delay > 0:
                        out[PROPERTY_TIMER_DELIVER_MS] = str(now_ms + delay)
                    continue
                if typed:
                    if key in _EAGER and value is not None:
                        out[key] = value
                elif value is not None and "\x01" not in key and "\x02" not in key:
                    out[key] = _text(value).replace("\x01", " ").replace("\x02", " ")
        for name, value in props.items():
            if name in BASIC_NAMES and value != "":
                out[name] = _text(value)
        table = props.get(HEADERS_TABLE)
        if table is not None:
            out[PROPERTY_AMQP_HEADERS] = base64.b64encode(table).decode()
    if routing_key:
        out[PROPERTY_TAGS] = routing_key
    return out


# what `stored_properties` converts directly, by property flags: (stored name + \x01,
# kind) per property present; None for flags it leaves to the general path
_Layout = tuple[tuple[bytes, str], ...] | None
_LAYOUTS: dict[int, _Layout] = {}
_DIRECT: Final = frozenset(name for name, _, _ in _FIELDS if name != "expiration")  # expiration: limits
# header names the general path treats apart: a delay, and those stored as text even in a
# kept table (`_EAGER`: a basic property's, the routing key's TAGS, the mark, the names
# the core must see to put a message its own way, such as a delay, a transaction or a
# dedup key, which `Broker.accept_now` declines), so what `stored_properties` makes is a
# plain send whatever the header values, and a kept table needs no text
_APART: Final = frozenset(name.encode() for name in _EAGER | {X_DELAY})
_OCTETS: Final = tuple(b"%d\x02" % n for n in range(256))
_TYPED_NAME: Final = PROPERTY_AMQP_HEADERS.encode() + b"\x01"
_U32 = struct.Struct(">I")
# a typed publisher's last content header that `stored_properties` stored whole, the
# ranges (its table's long strings' values) where its table differed from the one before
# (None: no such header), its table's start and end, and what its stored form holds
# before the table's base64
_typed_again: list = [b"", None, 0, 0, b""]


def _layout(flags: int) -> _Layout:
    if flags & 1:
        return None
    layout = []
    for name, bit, kind in _FIELDS:
        if flags >> bit & 1:
            if name not in _DIRECT:
                return None
            layout.append((name.encode() + b"\x01", kind))
    if flags & ((1 << 3) - 1) & ~1:  # cluster-id (bit 2) and the reserved bits
        return None
    return tuple(layout)


def stored_properties(raw: bytes, tail: bytes) -> bytes | None:
    """A content header's properties (its bytes from the property flags on) as
    `to_message_properties` and `encode_properties` of common.message would store them,
    in one pass over the bytes (a keyed publisher's: a key each; a typed table kept whole,
    its names checked): ``tail`` (TAGS and the like, encoded) ends them. None for anything
    else (a delay, expiration, a separator character in a name, text that is not UTF-8, a
    malformed list): the general path takes it and says what is wrong. A typed publisher's
    next content header that differs from its last only inside the table's long strings'
    values where that one differed from the one before (a task id) is stored as the last
    one was, with the new table (`_typed_again`)."""
    last, varied, start, stop, before = _typed_again
    if varied is not None and len(raw) == len(last) and same_but(raw, last, varied):
        return b"".join((before, b2a_base64(raw[start:stop], newline=False), b"\x02", tail))
    try:
        layout = _LAYOUTS[raw[0] << 8 | raw[1]]
    except KeyError:
        layout = _LAYOUTS[raw[0] << 8 | raw[1]] = _layout(raw[0] << 8 | raw[1])
    except IndexError:
        return None
    if layout is None:
        return None
    parts: list[bytes] = []  # the headers' (name, \x01, value, \x02 each), then the others'
    basics: list[bytes] = []  # (name and \x01, value, \x02 or b"") each
    pos = 2
    names = 0
    typed: bytes | None = None  # a typed header table's bytes
    all_names: list[bytes] = []  # a typed table's
    try:
        for name, kind in layout:
            if kind == "s":
                end = pos + 1 + raw[pos]
                if end > pos + 1:  # an empty one is not stored
                    basics += (name, raw[pos + 1:end], b"\x02")
                pos = end
            elif kind == "o":
                basics += (name, _OCTETS[raw[pos]], b"")
                pos += 1
            elif kind == "t":
                basics += (name, b"%d\x02" % _U64.unpack_from(raw, pos), b"")
                pos += 8
            else:  # the headers: name shortstr, 'S', long string, each
                table_at = pos
                at = pos + 4
                pos = at + _U32.unpack_from(raw, pos)[0]
                while at < pos:
                    kind_at = at + 1 + raw[at]
                    if raw[kind_at] != 0x53:
                        break
                    name_of = raw[at + 1:kind_at]
                    at = kind_at + 5 + _U32.unpack_from(raw, kind_at + 1)[0]
                    parts += (name_of, b"\x01", raw[kind_at + 5:at], b"\x02")
                    names += 1
                else:
                    if at != pos:
                        return None
                    continue
                # a typed table: kept whole (as `to_message_properties` stores it), its
                # names checked, no text made (`field_table.with_header_texts`, at a read)
                all_names, used = entry_names(raw, table_at)
                typed = raw[table_at:table_at + used]
                parts, names = [], 0
    except (IndexError, struct.error, ValueError):
        return None
    if pos != len(raw):
        return None
    if typed is not None:
        if not _APART.isdisjoint(all_names):
            return None  # treated apart: the general path's
        head = len(basics)
        basics += (_TYPED_NAME, b2a_base64(typed, newline=False), b"\x02")
    elif parts and (not _APART.isdisjoint(keys := parts[0::4]) or (len(keys) > 1 and len(set(keys)) != len(keys))):
        return None  # treated apart, or a name twice: the general path's
    pairs = names + len(basics) // 3
    parts += basics
    out = b"".join(parts)
    if out.count(b"\x01") != pairs or out.count(b"\x02") != pairs:
        return None  # a separator inside a name or value
    if typed is None:  # a long string that is not UTF-8 makes a table typed (the general path's)
        try:
            out.decode()
        except UnicodeDecodeError:
            return None
    elif (table_varied := last_varied()) is not None:
        _typed_again[:] = (raw, tuple((table_at + s, table_at + e) for s, e in table_varied), table_at,
                           table_at + len(typed), b"".join(basics[:head + 1]))
    return out + tail


def _shortstr(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogateescape")[:255]
    return bytes((len(raw),)) + raw


_BASIC_FIELDS: Final = {name: (bit, kind) for name, bit, kind in _FIELDS if name != "headers"}
_CONTENT_TYPE: Final = _BASIC_FIELDS["content_type"]
_HEADERS_FLAG: Final = 1 << 13
# DELAY is the publisher's own here (RabbitMQ's x-delay plugin): it comes back as a header
_HIDDEN: Final = (SYSTEM_PROPERTY_NAMES - {"DELAY"}) | {DEFAULT_EXCHANGE_MARK}
# per tag header: messages of one publisher look alike
_encoded: dict[str, dict[tuple[tuple[str, str], ...], bytes]] = {}
_ENCODED_MAX = 4096
_UNIQ: Final = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def encode_properties(properties: Mapping[str, str], tag_header: str) -> bytes:
    """A stored message's properties as a content header's property flags and list (the
    drain's hot path: one pass, and recent property sets are remembered). The Kafka tag
    header (``tag_header``, what a record of a batch carries its TAGS in) is the routing
    key: not repeated as a header when it says the same."""
    key = tuple(properties.items())
    encoded = _encoded.get(tag_header)
    if encoded is None:
        encoded = _encoded[tag_header] = {}
    done = encoded.get(key)
    if done is not None:
        return done
    if _UNIQ in properties:  # one of its own per message (a record of a batch): not part of the key
        key = key[1:] if key[0][0] == _UNIQ else tuple([item for item in key if item[0] != _UNIQ])
        done = encoded.get(key)
        if done is not None:
            return done
    flags = 0
    found: list[tuple[int, bytes]] = []
    headers: dict[str, object] | None = None
    routing_key = properties.get(PROPERTY_TAGS)
    for name, value in key:
        field = _BASIC_FIELDS.get(name)
        if field is None and name == "content-type" and "content_type" not in properties:
            field = _CONTENT_TYPE  # a STOMP sender's
        if field is None:
            if name not in _HIDDEN and not (name == tag_header and value == routing_key):
                if headers is None:
                    headers = {}
                headers[name] = value
            continue
        bit, kind = field
        if kind == "s":
            found.append((bit, _shortstr(value)))
        else:
            try:
                number = int(value)
            except ValueError:
                continue
            if kind == "o":
                if not 0 <= number <= 255:
                    continue
                found.append((bit, bytes((number,))))
            else:
                if not 0 <= number < 1 << 64:
                    continue
                found.append((bit, _U64.pack(number)))
        flags |= 1 << bit
    typed = properties.get(PROPERTY_AMQP_HEADERS)
    if typed is not None:
        entries, names = _typed_table(typed)
        extra = _text_entries({k: v for k, v in headers.items() if k not in names}) if headers else b""
        flags |= _HEADERS_FLAG
        found.append((13, _U32.pack(len(entries) + len(extra)) + entries + extra))
    elif headers:
        flags |= _HEADERS_FLAG
        entries = _text_entries(headers)
        found.append((13, _U32.pack(len(entries)) + entries))
    found.sort(reverse=True)
    done = _U16.pack(flags) + b"".join(part for _, part in found)
    if len(encoded) >= _ENCODED_MAX:
        encoded.clear()
    encoded[key] = done
    return done


def _text_entries(headers: Mapping[str, str]) -> bytes:
    """Field-table entries of text headers: a long string each, or a byte array for text
    that is not UTF-8 (a binary Kafka header: its octets, kept through surrogateescape)."""
    parts: list[bytes] = []
    for name, value in headers.items():
        raw_name = name.encode("utf-8", "surrogateescape")[:255]
        try:
            raw, kind = value.encode(), b"S"
        except UnicodeEncodeError:
            raw, kind = value.encode("utf-8", "surrogateescape"), b"x"
        parts += (bytes((len(raw_name),)), raw_name, kind, _U32.pack(len(raw)), raw)
    return b"".join(parts)


@lru_cache(maxsize=256)
def _typed_table(stored: str) -> tuple[bytes, frozenset[str]]:
    """A stored typed header table (`PROPERTY_AMQP_HEADERS`): its entries' wire bytes and
    their names (the text properties of the same names are its renderings). A value that
    does not decode (never written by us) counts as no table."""
    try:
        raw = base64.b64decode(stored, validate=True)
        used, table = decode.field_table(raw)
    except (binascii.Error, ValueError, TypeError, struct.error, UnicodeDecodeError):
        return b"", frozenset()
    return raw[4:used], frozenset(table)


def typed_headers(properties: Mapping[str, str]) -> dict[str, Any] | None:
    """The typed header table a message was published with, decoded (None: none kept)."""
    stored = properties.get(PROPERTY_AMQP_HEADERS)
    if stored is None:
        return None
    entries, _ = _typed_table(stored)
    return decode.field_table(_U32.pack(len(entries)) + entries)[1]


def routing_key_of(properties: Mapping[str, str]) -> str:
    return properties.get(PROPERTY_TAGS, "")
