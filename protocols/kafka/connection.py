"""Sans-IO Kafka server connection: request frames in, events out; responses in, buffers out.

A session feeds whatever the socket delivered to :meth:`KafkaServerConnection.receive_data`
and gets one event per complete frame; it answers each request with
:meth:`KafkaServerConnection.send_response`, in request order (Kafka clients match responses
by order as well as correlation id), and writes the returned buffers with ``writelines``.
Record blobs stay memoryviews of the received frame or of the caller's buffers: nothing
here copies or parses records.

This module must never import asyncio or sockets, and no exception may escape
``receive_data``: bad input becomes a :class:`BadRequest` event.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from . import codec
from .events import BadRequest, Event, RequestReceived, SaslTokenReceived, UnsupportedVersion

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "KafkaServerConnection"]

DEFAULT_MAX_FRAME_SIZE: Final = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_SIZE: Final = struct.Struct(">i")
_MIN_FRAME: Final = 8  # api key, api version, correlation id


class KafkaServerConnection:
    """The protocol state of one client connection, without the socket."""

    __slots__ = ("max_frame_size", "_pending", "_pending_len", "_need", "_closed", "_raw_next")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._pending: list[bytes] = []  # received bytes not yet framed, in order
        self._pending_len = 0
        self._need = 4  # bytes needed before framing is worth attempting again
        self._closed = False
        self._raw_next = False

    def expect_sasl_token(self) -> None:
        """The next frame is a raw SASL token (after a v0 SaslHandshake was accepted)."""
        self._raw_next = True

    @staticmethod
    def frame_sasl_token(token: bytes) -> bytes:
        """A raw SASL token as the server sends it back: length prefix, no header."""
        return _SIZE.pack(len(token)) + token

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back (the session's frame timeout reads it)."""
        return self._pending_len

    @property
    def closed(self) -> bool:
        """True after a BadRequest: further input is ignored."""
        return self._closed

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Feed received bytes; returns the events of every frame they complete."""
        if self._closed or not data:
            return []
        chunk = data if type(data) is bytes else bytes(data)  # the caller may reuse its buffer
        self._pending.append(chunk)
        self._pending_len += len(chunk)
        if self._pending_len < self._need:
            return []
        # Join once per completed frame, not per chunk: a 1 MiB produce arriving in 64 KiB
        # reads is copied once. Frames are slices of an immutable bytes object, so the
        # memoryviews handed out in events stay valid after we move on.
        buf = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending = []
        self._pending_len = 0
        view = memoryview(buf)
        end = len(buf)
        pos = 0
        events: list[Event] = []
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if self._raw_next and 0 <= size <= 64 * 1024:
                if end - pos - 4 < size:
                    self._need = 4 + size
                    break
                self._raw_next = False
                events.append(SaslTokenReceived(bytes(view[pos + 4 : pos + 4 + size])))
                pos += 4 + size
                continue
            if size < _MIN_FRAME or size > self.max_frame_size:
                self._closed = True
                events.append(BadRequest(f"frame size {size} outside [{_MIN_FRAME}, {self.max_frame_size}]"))
                return events
            if end - pos - 4 < size:
                self._need = 4 + size
                break
            events.append(self._decode_frame(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        else:
            self._need = 4
        if pos < end:
            rest = buf[pos:] if pos else buf
            self._pending.append(rest)
            self._pending_len = len(rest)
        return events

    def _decode_frame(self, frame: memoryview) -> Event:
        try:
            header, body_pos = codec.decode_request_header(frame)
        except codec.DecodeError as exc:
            self._closed = True
            if len(frame) >= _MIN_FRAME:
                api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
                return BadRequest(str(exc), correlation_id, api_key, api_version)
            return BadRequest(str(exc))
        if not codec.is_supported(header.api_key, header.api_version):
            return UnsupportedVersion(header.correlation_id, header.api_key, header.api_version, header.client_id)
        try:
            body = codec.decode_request(header.api_key, header.api_version, frame[body_pos:])
        except codec.DecodeError as exc:
            self._closed = True
            return BadRequest(
                f"malformed {header.api_key} v{header.api_version} request: {exc}",
                header.correlation_id,
                header.api_key,
                header.api_version,
                header.client_id,
            )
        return RequestReceived(header.correlation_id, header.api_key, header.api_version, header.client_id, body)

    def send_response(
        self, correlation_id: int, api_key: int, api_version: int, response_data: dict[str, Any]
    ) -> list[bytes | memoryview]:
        """Frame a response: size, header (v0 for ApiVersions), body; large records passed through.

        Raises ``codec.UnsupportedApi`` or ``ValueError`` for a response the session built
        wrongly: that is a broker bug, not client input.
        """
        body = codec.encode_response(api_key, api_version, response_data)
        header = codec.encode_response_header(api_key, api_version, correlation_id)
        size = len(header) + sum(len(part) for part in body)
        first = _SIZE.pack(size) + header
        if body and len(body[0]) < codec.PASS_THROUGH:
            return [first + body[0], *body[1:]]
        return [first, *body]
