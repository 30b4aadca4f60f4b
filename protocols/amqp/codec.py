"""AMQP 0-9-1 frames: split a byte stream into frames, and encode the frames we send.

The 70-odd methods, their fields and the field-table types are pamqp's (the codec under
aiormq and aio-pika, generated from RabbitMQ's machine-readable spec): this module only
frames them. The three frames every delivered message costs (basic.deliver, its content
header, its body) are encoded here directly (`Deliveries`), from parts encoded once:
pamqp's generic marshaller walks the spec per field, which a profile of a drain showed as
the largest item of the broker's per-message CPU. Nothing here does I/O or knows a session.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from pamqp import commands
from pamqp.base import Frame
from pamqp.exceptions import UnmarshalingException

from rocketport.common.field_table import header_texts

FRAME_METHOD: Final = 1
FRAME_HEADER: Final = 2
FRAME_BODY: Final = 3
FRAME_HEARTBEAT: Final = 8
FRAME_END: Final = 0xCE
FRAME_END_BYTE: Final = b"\xce"
PROTOCOL_HEADER: Final = b"AMQP\x00\x00\x09\x01"
FRAME_MIN_SIZE: Final = 4096
FRAME_OVERHEAD: Final = 8  # type, channel, size, frame-end
HEARTBEAT_FRAME: Final = b"\x08\x00\x00\x00\x00\x00\x00\xce"

FRAME_HEAD = struct.Struct(">BHI")
_METHOD_ID = struct.Struct(">I")
_HEADER_FIXED = struct.Struct(">HHQ")
_U64 = struct.Struct(">Q")
_CONTENT_HEAD = struct.Struct(">BHIHHQ")  # frame head + class id, weight, body size
_BODY_HEAD = struct.Struct(">BHI")
_DELIVER_ID_BYTES: Final = _METHOD_ID.pack((60 << 16) | 60)
_GET_OK_ID_BYTES: Final = _METHOD_ID.pack((60 << 16) | 71)
_DECLARE_OK_ID_BYTES: Final = _METHOD_ID.pack((50 << 16) | 11)
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
PUBLISH_ID: Final = (60 << 16) | 40
PUBLISH_ID_BYTES: Final = _METHOD_ID.pack(PUBLISH_ID)
# content header properties in flag order (bit 15 down): name and kind (s shortstr,
# F table, o octet, t u64 timestamp)
PROPERTY_FIELDS: Final = (
    ("content_type", "s"), ("content_encoding", "s"), ("headers", "F"), ("delivery_mode", "o"),
    ("priority", "o"), ("correlation_id", "s"), ("reply_to", "s"), ("expiration", "s"),
    ("message_id", "s"), ("timestamp", "t"), ("type", "s"), ("user_id", "s"), ("app_id", "s"),
    ("cluster_id", "s"),
)


@dataclass(frozen=True, slots=True)
class Publish:
    """basic.publish, decoded by hand (every published message costs one; pamqp's generic
    unmarshal was the largest item of a publish's broker CPU)."""

    exchange: str
    routing_key: str
    mandatory: bool
    immediate: bool
    index: int = PUBLISH_ID
    name: str = "Basic.Publish"


@dataclass(frozen=True, slots=True)
class ContentHeader:
    body_size: int
    properties: dict[str, Any]  # the basic properties present, by spec name (``type``, ...)


class FrameError(Exception):
    """A frame that cannot be read: the connection closes with ``code`` (501, 502, 505)."""

    def __init__(self, code: int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        super().__init__(text)
        self.code = code
        self.text = text
        self.class_id = class_id
        self.method_id = method_id


def decode_method(payload: memoryview) -> Frame:
    """A method frame's payload to pamqp's method object; FrameError 503/502 when the
    method is unknown or its arguments do not parse."""
    if len(payload) < 4:
        raise FrameError(502, "SYNTAX_ERROR - method frame shorter than its method id")
    (method_id,) = _METHOD_ID.unpack_from(payload)
    cls = commands.INDEX_MAPPING.get(method_id)
    if cls is None:
        raise FrameError(540, f"NOT_IMPLEMENTED - unknown method {method_id >> 16}.{method_id & 0xFFFF}",
                         method_id >> 16, method_id & 0xFFFF)
    method = cls()
    try:
        method.unmarshal(bytes(payload[4:]))
    except (struct.error, ValueError, TypeError, IndexError, UnicodeDecodeError,
            UnmarshalingException) as exc:
        raise FrameError(502, f"SYNTAX_ERROR - cannot decode {cls.name}: {exc}",
                         method_id >> 16, method_id & 0xFFFF) from None
    return method


_publishes: dict[bytes, Publish] = {}
_headers: dict[bytes, dict[str, Any]] = {}  # by the bytes after the body size
_DECODED_MAX = 1024


def decode_publish(payload: memoryview) -> Publish:
    """basic.publish's arguments (after the method id): ticket, exchange, routing key, bits.
    A publisher repeats the same few frames: recent ones are decoded once."""
    key = bytes(payload)
    found = _publishes.get(key)
    if found is None:
        found = _decode_publish(payload)
        if len(_publishes) >= _DECODED_MAX:
            _publishes.clear()
        _publishes[key] = found
    return found


def _decode_publish(payload: memoryview) -> Publish:
    try:
        pos = 6
        size = payload[pos]
        exchange = str(payload[pos + 1:pos + 1 + size], "utf-8", "surrogateescape")
        pos += 1 + size
        size = payload[pos]
        routing_key = str(payload[pos + 1:pos + 1 + size], "utf-8", "surrogateescape")
        pos += 1 + size
        bits = payload[pos]
    except IndexError:
        raise FrameError(502, "SYNTAX_ERROR - basic.publish arguments are truncated", 60, 40) from None
    return Publish(exchange, routing_key, bool(bits & 1), bool(bits & 2))


def decode_content_header(payload: memoryview) -> ContentHeader:
    """A content header's body size and properties (class 60 only). Recent property lists
    are decoded once (a publisher's messages mostly carry the same properties, whatever
    their sizes), so the properties dict is shared: read it, never change it."""
    try:
        class_id, _, body_size = _HEADER_FIXED.unpack_from(payload)
    except struct.error as exc:
        raise FrameError(502, f"SYNTAX_ERROR - cannot decode the content header: {exc}") from None
    if class_id != 60:
        raise FrameError(505, f"UNEXPECTED_FRAME - content header of class {class_id}")
    return ContentHeader(body_size, decode_properties(bytes(payload[12:])))


def decode_properties(flags_and_list: bytes, remember: bool = True) -> dict[str, Any]:
    """A content header's properties from its property flags on. Recent property lists
    are decoded once (a publisher's messages mostly carry the same properties, whatever
    their sizes), so the properties dict is shared: read it, never change it. Lists that
    will not come again (``remember`` False: a keyed publisher's) are not kept."""
    properties = _headers.get(flags_and_list)
    if properties is None:
        properties = _decode_properties(flags_and_list, 0)
        if not remember:
            return properties
        if len(_headers) >= _DECODED_MAX:
            _headers.clear()
        _headers[flags_and_list] = properties
    return properties


def _decode_properties(payload: bytes | memoryview, at: int) -> dict[str, Any]:
    """The property flags and list from ``at`` on."""
    try:
        (flags,) = _U16.unpack_from(payload, at)
        if flags & 1:
            raise FrameError(502, "SYNTAX_ERROR - content header property flags continue past 16 bits")
        properties: dict[str, Any] = {}
        pos = at + 2
        bit = 15
        for name, kind in PROPERTY_FIELDS:
            if flags >> bit & 1:
                if kind == "s":
                    size = payload[pos]
                    end = pos + 1 + size
                    if end > len(payload):
                        raise IndexError
                    properties[name] = str(payload[pos + 1:end], "utf-8", "surrogateescape")
                    pos = end
                elif kind == "o":
                    properties[name] = payload[pos]
                    pos += 1
                elif kind == "t":
                    properties[name] = _U64.unpack_from(payload, pos)[0]
                    pos += 8
                else:
                    texts, used, typed = header_texts(payload, pos)
                    properties[name] = dict(texts)
                    if typed:  # each header's text, and the table as it came (`properties.HEADERS_TABLE`)
                        properties["headers_table"] = bytes(payload[pos:pos + used])
                    pos += used
            bit -= 1
    except (struct.error, ValueError, TypeError, IndexError, UnmarshalingException) as exc:
        raise FrameError(502, f"SYNTAX_ERROR - cannot decode the content header: {exc}") from None
    return properties


def method_frame(channel: int, method: Frame) -> bytes:
    payload = _METHOD_ID.pack(method.index) + method.marshal()
    return FRAME_HEAD.pack(FRAME_METHOD, channel, len(payload)) + payload + FRAME_END_BYTE


def content_frames(channel: int, properties: bytes, body: bytes | memoryview,
                   frame_max: int) -> list[bytes | memoryview]:
    """The content header (``properties`` already marshalled) and the body frames, the
    body split so that no frame exceeds ``frame_max``."""
    size = len(body)
    out: list[bytes | memoryview] = [
        _CONTENT_HEAD.pack(FRAME_HEADER, channel, 12 + len(properties), 60, 0, size)
        + properties + FRAME_END_BYTE]
    if size == 0:
        return out
    chunk = frame_max - FRAME_OVERHEAD
    if size <= chunk:
        out.append(_BODY_HEAD.pack(FRAME_BODY, channel, size))
        out.append(body)
        out.append(FRAME_END_BYTE)
        return out
    view = memoryview(body)
    for start in range(0, size, chunk):
        part = view[start:start + chunk]
        out.append(_BODY_HEAD.pack(FRAME_BODY, channel, len(part)))
        out.append(part)
        out.append(FRAME_END_BYTE)
    return out


def _shortstr(value: bytes) -> bytes:
    return bytes((len(value),)) + value


@lru_cache(maxsize=4096)
def shortstr_of(text: str) -> bytes:
    """A name (exchange, routing key) as a shortstr: UTF-8 as stored, at most 255 bytes;
    names repeat, so they are encoded once."""
    raw = text.encode("utf-8", "surrogateescape")[:255]
    return bytes((len(raw),)) + raw


class Deliveries:
    """basic.deliver with its content header and body for one consumer's deliveries that
    name one exchange and routing key and carry one set of properties: what does not change
    from one such delivery to the next is encoded once (the method frame up to the delivery
    tag, the names, and per body size the content header and the body frame's head), so a
    delivery whose body fits one frame is seven parts."""

    __slots__ = ("_channel", "_head", "_names", "_properties", "_content")

    def __init__(self, channel: int, consumer_tag: bytes, names: bytes, properties: bytes) -> None:
        """``consumer_tag`` is a shortstr, ``names`` the exchange and routing key shortstrs
        (`shortstr_of`), ``properties`` the content header's flags and list."""
        self._channel = channel
        self._head = FRAME_HEAD.pack(FRAME_METHOD, channel, 13 + len(consumer_tag) + len(names)) \
            + _DELIVER_ID_BYTES + consumer_tag
        self._names = names + FRAME_END_BYTE
        self._properties = properties
        self._content: dict[int, bytes] = {}  # by body size: content header + body frame head

    def frames_into(self, parts: list, delivery_tag: int, redelivered: bool, body: bytes,
                    frame_max: int) -> None:
        """Append one delivery's frames to ``parts`` as byte strings: a caller joins a
        run's deliveries into one write (a bytes object each costs more than the copy)."""
        size = len(body)
        content = self._content.get(size)
        if content is None:
            if size == 0 or size > frame_max - FRAME_OVERHEAD:
                parts += (self._head, _U64.pack(delivery_tag), _REDELIVERED[redelivered], self._names)
                parts += content_frames(self._channel, self._properties, body, frame_max)
                return
            if len(self._content) >= _SIZES_MAX:
                self._content.clear()
            content = self._content[size] = (
                _CONTENT_HEAD.pack(FRAME_HEADER, self._channel, 12 + len(self._properties), 60, 0, size)
                + self._properties + FRAME_END_BYTE + _BODY_HEAD.pack(FRAME_BODY, self._channel, size))
        parts += (self._head, _U64.pack(delivery_tag), _REDELIVERED[redelivered], self._names, content,
                  body, FRAME_END_BYTE)


_REDELIVERED: Final = (b"\x00", b"\x01")
_SIZES_MAX: Final = 64  # body sizes remembered per `Deliveries`


def declare_ok_frame(channel: int, queue: str, message_count: int, consumer_count: int) -> bytes:
    """queue.declare-ok, encoded by hand: a queue may be named with characters pamqp's
    validation of the spec's queue-name domain refuses (RabbitMQ takes any UTF-8 name)."""
    args = shortstr_of(queue) + _U32.pack(min(message_count, 0xFFFFFFFF)) + _U32.pack(consumer_count)
    return FRAME_HEAD.pack(FRAME_METHOD, channel, 4 + len(args)) + _DECLARE_OK_ID_BYTES + args + FRAME_END_BYTE


def get_ok_frame(channel: int, delivery_tag: int, redelivered: bool, exchange: bytes,
                 routing_key: bytes, message_count: int) -> bytes:
    args = (_U64.pack(delivery_tag) + (b"\x01" if redelivered else b"\x00") + _shortstr(exchange)
            + _shortstr(routing_key) + _U32.pack(message_count))
    return FRAME_HEAD.pack(FRAME_METHOD, channel, 4 + len(args)) + _GET_OK_ID_BYTES + args + FRAME_END_BYTE

