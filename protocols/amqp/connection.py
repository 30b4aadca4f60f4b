"""The server side of one AMQP 0-9-1 connection, without I/O: bytes in, events out.

It owns what the spec fixes regardless of the broker: the protocol header, the connection
class's handshake (start, tune, open) and close, frame boundaries and the negotiated
frame_max and channel_max, content assembly (a publish's method, header and body frames,
in order on one channel), and the channels being closed (whose frames are dropped until
the client's close-ok). Connection-level errors come out as `ConnectionFailed`; after
`close` everything but close/close-ok is ignored, as the spec asks. The session decides
the rest (authentication, virtual hosts, every channel method) and writes the bytes the
``send_*`` methods return. Nothing here imports asyncio.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Final

from pamqp.base import Frame
from pamqp.commands import Channel, Connection

from . import codec
from .codec import (
    FRAME_BODY,
    FRAME_END,
    FRAME_END_BYTE,
    FRAME_HEAD,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    PUBLISH_ID_BYTES,
    FrameError,
    Publish,
)
from .events import (
    ChannelCloseOkReceived,
    CloseOkReceived,
    CloseReceived,
    ConnectionFailed,
    ContentReceived,
    ContentTooLarge,
    Event,
    HeaderMismatch,
    HeaderReceived,
    MethodReceived,
    OpenReceived,
    StartOkReceived,
)

# states
AWAIT_HEADER: Final = "header"
AWAIT_START_OK: Final = "start-ok"
AWAIT_TUNE_OK: Final = "tune-ok"
AWAIT_OPEN: Final = "open"
OPEN: Final = "open-done"
CLOSING: Final = "closing"  # we sent connection.close
CLOSED: Final = "closed"

DEFAULT_FRAME_MAX: Final = 131072  # RabbitMQ's
DEFAULT_CHANNEL_MAX: Final = 2047  # RabbitMQ's
_U64 = struct.Struct(">Q")
_BASIC_CLASS: Final = b"\x00\x3c"  # a content header's class id: basic


def shortstr_text(text: str) -> str:
    """Text a shortstr can carry: valid UTF-8 (a client's undecodable bytes, kept as
    surrogates, become U+FFFD) of at most 255 bytes."""
    raw = text.encode("utf-8", "replace")[:255]
    return raw.decode("utf-8", "ignore")


@dataclass(slots=True)
class _Assembly:
    """A publish whose header or body frames are still arriving."""

    method: Publish
    properties: dict[str, Any] | None = None
    size: int = -1  # from the content header
    parts: list[bytes] = field(default_factory=list)
    received: int = 0
    discard: bool = False  # over the size limit: read and drop


class AmqpServerConnection:
    def __init__(self, *, frame_max: int = DEFAULT_FRAME_MAX, channel_max: int = DEFAULT_CHANNEL_MAX,
                 heartbeat: int = 60, max_body: int = 4 << 20) -> None:
        self.state = AWAIT_HEADER
        self.frame_max = frame_max  # ours until tune-ok, then the negotiated value
        self.channel_max = channel_max
        self.heartbeat = heartbeat
        self.max_body = max_body
        self._buffer = bytearray()
        self._assembling: dict[int, _Assembly] = {}
        self._closing_channels: set[int] = set()
        # the publish run being read (see _more_of_run): its event; the bytes from a body's
        # frame end to the next body of the same size, and that size; the method frame;
        # the last publish's property bytes (flags on)
        self._run: ContentReceived | None = None
        self._run_gap = b""
        self._run_body_size = 0
        self._run_method = b""
        self._run_props = b""

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held (the listener's frame timeout reads it)."""
        return len(self._buffer)

    # ------------------------------------------------------------------ input
    def receive_data(self, data: bytes) -> list[Event]:
        if self.state == CLOSED:
            return []
        buf = self._buffer
        buf += data
        events: list[Event] = []
        if self.state == AWAIT_HEADER:
            if len(buf) < 8:
                if not codec.PROTOCOL_HEADER.startswith(bytes(buf[:len(codec.PROTOCOL_HEADER)])):
                    self._fail_header(events)
                return events
            if bytes(buf[:8]) != codec.PROTOCOL_HEADER:
                self._fail_header(events)
                return events
            del buf[:8]
            self.state = AWAIT_START_OK
            events.append(HeaderReceived())
        pos = 0
        size = len(buf)
        view = memoryview(buf)
        unpack = FRAME_HEAD.unpack_from
        assembling = self._assembling
        max_payload = self.frame_max - codec.FRAME_OVERHEAD
        try:
            while size - pos >= 7 and self.state != CLOSED:
                run = self._run
                if run is not None:
                    after = self._more_of_run(buf, view, pos, size, run, events)
                    if after:
                        pos = after
                        continue
                self._run = None
                frame_type, channel, length = unpack(buf, pos)
                if length > max_payload:
                    raise FrameError(501, f"FRAME_ERROR - frame of {length} bytes exceeds frame_max "
                                          f"{self.frame_max}")
                end = pos + 7 + length
                if end >= size:
                    break
                if buf[end] != FRAME_END:
                    raise FrameError(501, "FRAME_ERROR - frame does not end with 0xCE")
                if (frame_type == FRAME_METHOD and buf.startswith(PUBLISH_ID_BYTES, pos + 7)
                        and self.state == OPEN and channel and channel not in assembling
                        and channel not in self._closing_channels):
                    # the publish triple (method, header, one body frame) whole in the buffer:
                    # one event (the publishes alike after it join it, above), no assembly
                    after = self._publish_triple(buf, view, pos, end, channel, size, max_payload, events)
                    if after:
                        pos = after
                        continue
                elif frame_type == FRAME_BODY:  # the common case, inline: a body in one frame
                    assembly = assembling.get(channel)
                    if (assembly is not None and assembly.size == length and not assembly.received
                            and not assembly.discard and self.state == OPEN):
                        del assembling[channel]
                        events.append(ContentReceived(channel, assembly.method, assembly.properties,  # type: ignore[arg-type]
                                                      [bytes(view[pos + 7:end])]))
                        pos = end + 1
                        continue
                self._frame(frame_type, channel, view[pos + 7:end], events)
                pos = end + 1
        except FrameError as exc:
            events.append(ConnectionFailed(exc.code, exc.text, exc.class_id, exc.method_id))
            self.state = CLOSING
            pos = size
        finally:
            view.release()
            self._run = None  # a run never spans reads: the event may go
        del buf[:pos]
        return events

    def _publish_triple(self, buf: bytearray, view: memoryview, pos: int, end: int, channel: int,
                        size: int, max_payload: int, events: list[Event]) -> int:
        """The position after a basic.publish (its frame at [pos, end]) followed by its
        content header and one body frame holding the whole body, all on ``channel`` and
        all in the buffer, after adding its event, which the publishes alike straight after
        it join (`_more_of_run`); 0 when that is not what follows (the frames are then read
        one by one, with every check)."""
        header_at = end + 1
        if size - header_at < 7:
            return 0
        kind, ch, length = FRAME_HEAD.unpack_from(buf, header_at)
        header_end = header_at + 7 + length
        if kind != FRAME_HEADER or ch != channel or length < 14 or length > max_payload \
                or header_end >= size or buf[header_end] != FRAME_END:
            return 0
        (body_size,) = _U64.unpack_from(buf, header_at + 11)
        body_at = header_end + 1
        if body_size == 0 or body_size > self.max_body or size - body_at < 7:
            return 0
        kind, ch, length = FRAME_HEAD.unpack_from(buf, body_at)
        body_end = body_at + 7 + length
        if kind != FRAME_BODY or ch != channel or length != body_size or length > max_payload \
                or body_end >= size or buf[body_end] != FRAME_END:
            return 0
        method = codec.decode_publish(view[pos + 7:end])
        header = codec.decode_content_header(view[header_at + 7:header_end])
        self._run = run = ContentReceived(channel, method, header.properties, [bytes(view[body_at + 7:body_end])])
        self._run_gap = FRAME_END_BYTE + bytes(view[pos:body_at + 7])
        self._run_body_size = length
        self._run_method = bytes(view[pos:end + 1])
        self._run_props = bytes(view[header_at + 19:header_end])
        events.append(run)
        return body_end + 1

    def _more_of_run(self, buf: bytearray, view: memoryview, pos: int, size: int, run: ContentReceived,
                     events: list[Event]) -> int:
        """The position after the publishes at ``pos`` that join the run, whole in the
        buffer; 0 when none does. First those with the body size and properties of the
        run's last: what lies between two such bodies (frame end, method frame, content
        header, body frame head) is the same bytes, one comparison a publish. Else one
        with the run's method frame and any content header (another size, or properties of
        its own: a keyed publisher's, whose messages each carry their key; the run's event
        then holds each body's properties, ``varied``)."""
        gap = self._run_gap
        body_size = self._run_body_size
        width = len(gap) + body_size
        bodies = run.bodies
        at = pos - 1  # the frame end of the run's last body
        while buf.startswith(gap, at):
            end = at + width
            if end >= size or buf[end] != FRAME_END:
                break
            bodies.append(bytes(view[end - body_size:end]))
            at = end
        if at >= pos:
            if run.varied is not None:
                run.varied.extend([self._run_props] * (len(bodies) - len(run.varied)))
            return at + 1
        method_frame = self._run_method
        if not buf.startswith(method_frame, pos):
            return 0
        channel = run.channel
        max_payload = self.frame_max - codec.FRAME_OVERHEAD
        header_at = pos + len(method_frame)
        if size - header_at < 7:
            return 0
        kind, ch, length = FRAME_HEAD.unpack_from(buf, header_at)
        header_end = header_at + 7 + length
        if kind != FRAME_HEADER or ch != channel or length < 14 or length > max_payload \
                or header_end >= size or buf[header_end] != FRAME_END \
                or not buf.startswith(_BASIC_CLASS, header_at + 7):
            return 0
        (body_size,) = _U64.unpack_from(buf, header_at + 11)
        body_at = header_end + 1
        if not 0 < body_size <= self.max_body or size - body_at < 7:
            return 0
        kind, ch, length = FRAME_HEAD.unpack_from(buf, body_at)
        body_end = body_at + 7 + length
        if kind != FRAME_BODY or ch != channel or length != body_size or length > max_payload \
                or body_end >= size or buf[body_end] != FRAME_END:
            return 0
        props = bytes(view[header_at + 19:header_end])
        varied = run.varied
        if props != self._run_props:
            if varied is None:  # the run's first publish of its own: its event says so
                varied = [self._run_props] * len(bodies)
                self._run = run = events[-1] = ContentReceived(channel, run.method, run.properties, bodies, varied)
            self._run_props = props
        if varied is not None:
            varied.append(props)
        bodies.append(bytes(view[body_at + 7:body_end]))
        self._run_gap = FRAME_END_BYTE + bytes(view[pos:body_at + 7])
        self._run_body_size = length
        return body_end + 1

    def _fail_header(self, events: list[Event]) -> None:
        self._buffer.clear()
        self.state = CLOSED
        events.append(HeaderMismatch())

    def _frame(self, frame_type: int, channel: int, payload: memoryview, events: list[Event]) -> None:
        state = self.state
        if state == CLOSING:  # only close and close-ok matter now
            if frame_type == FRAME_METHOD and channel == 0:
                method = codec.decode_method(payload)
                if isinstance(method, Connection.Close):
                    events.append(CloseReceived(method.reply_code, method.reply_text))
                    self.state = CLOSED
                elif isinstance(method, Connection.CloseOk):
                    events.append(CloseOkReceived())
                    self.state = CLOSED
            return
        if frame_type == FRAME_HEARTBEAT:
            if channel != 0:
                raise FrameError(501, "FRAME_ERROR - heartbeat on a channel other than 0")
            return
        if channel > self.channel_max:
            raise FrameError(504, f"CHANNEL_ERROR - channel {channel} exceeds channel_max {self.channel_max}")
        if frame_type == FRAME_METHOD:
            if payload[:4] == PUBLISH_ID_BYTES and state == OPEN and channel \
                    and channel not in self._closing_channels:
                if channel in self._assembling:
                    raise FrameError(505, "UNEXPECTED_FRAME - expected content header for class 60, "
                                          f"got basic.publish on channel {channel}")
                self._assembling[channel] = _Assembly(codec.decode_publish(payload))
                return
            method = codec.decode_method(payload)
            if channel == 0:
                self._connection_method(method, events)
                return
            if state != OPEN:
                raise FrameError(504, "CHANNEL_ERROR - channel frame before connection.open-ok")
            if channel in self._closing_channels:
                if isinstance(method, Channel.CloseOk):
                    self._closing_channels.discard(channel)
                    events.append(ChannelCloseOkReceived(channel))
                elif isinstance(method, Channel.Close):  # both sides closed at once
                    self._closing_channels.discard(channel)
                    events.append(ChannelCloseOkReceived(channel))
                return
            if channel in self._assembling:
                raise FrameError(505, f"UNEXPECTED_FRAME - expected content header for class 60, "
                                      f"got {method.name} on channel {channel}")
            if method.name.startswith("Connection."):
                raise FrameError(503, f"COMMAND_INVALID - {method.name} on channel {channel}")
            events.append(MethodReceived(channel, method))
        elif frame_type == FRAME_HEADER:
            if channel in self._closing_channels:
                return
            assembly = self._assembling.get(channel)
            if assembly is None or assembly.size >= 0:
                raise FrameError(505, f"UNEXPECTED_FRAME - content header on channel {channel} "
                                      "without a publish before it")
            header = codec.decode_content_header(payload)
            assembly.properties = header.properties
            assembly.size = header.body_size
            assembly.discard = header.body_size > self.max_body
            if header.body_size == 0:
                self._content_done(channel, assembly, events)
        elif frame_type == FRAME_BODY:
            if channel in self._closing_channels:
                return
            assembly = self._assembling.get(channel)
            if assembly is None or assembly.size < 0:
                raise FrameError(505, f"UNEXPECTED_FRAME - content body on channel {channel} "
                                      "without a content header")
            assembly.received += len(payload)
            if assembly.received > assembly.size:
                raise FrameError(501, "FRAME_ERROR - content body longer than its header declared")
            if not assembly.discard:
                assembly.parts.append(bytes(payload))
            if assembly.received == assembly.size:
                self._content_done(channel, assembly, events)
        else:
            raise FrameError(501, f"FRAME_ERROR - unknown frame type {frame_type}")

    def _content_done(self, channel: int, assembly: _Assembly, events: list[Event]) -> None:
        del self._assembling[channel]
        if assembly.discard:
            events.append(ContentTooLarge(channel, assembly.size))
            return
        parts = assembly.parts
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        events.append(ContentReceived(channel, assembly.method, assembly.properties, [body]))  # type: ignore[arg-type]

    def _connection_method(self, method: Frame, events: list[Event]) -> None:
        state = self.state
        if isinstance(method, Connection.StartOk) and state == AWAIT_START_OK:
            response = method.response
            events.append(StartOkReceived(method.mechanism, response.encode("utf-8") if isinstance(
                response, str) else bytes(response), dict(method.client_properties or {})))
            self.state = AWAIT_TUNE_OK
        elif isinstance(method, Connection.TuneOk) and state == AWAIT_TUNE_OK:
            if method.frame_max and method.frame_max < codec.FRAME_MIN_SIZE:
                raise FrameError(530, f"NOT_ALLOWED - frame_max {method.frame_max} is below the "
                                      f"minimum {codec.FRAME_MIN_SIZE}", 10, 31)
            if method.frame_max > self.frame_max or method.channel_max > self.channel_max:
                raise FrameError(530, "NOT_ALLOWED - tune-ok asks for more than the server offered", 10, 31)
            self.frame_max = method.frame_max or self.frame_max
            self.channel_max = method.channel_max or self.channel_max
            self.heartbeat = method.heartbeat
            self.state = AWAIT_OPEN
        elif isinstance(method, Connection.Open) and state == AWAIT_OPEN:
            events.append(OpenReceived(method.virtual_host))
        elif isinstance(method, Connection.Close):
            events.append(CloseReceived(method.reply_code, method.reply_text))
            self.state = CLOSED
        elif isinstance(method, Connection.CloseOk):
            self.state = CLOSED
            events.append(CloseOkReceived())
        elif isinstance(method, (Connection.Blocked, Connection.Unblocked)):
            pass  # the client's own flow notice: nothing for us to do
        else:
            class_id, method_id = divmod(method.index, 1 << 16)
            raise FrameError(503, f"COMMAND_INVALID - {method.name} on channel 0 in state {state}",
                             class_id, method_id)

    # ------------------------------------------------------------------ output
    def send_start(self, server_properties: dict, mechanisms: str) -> bytes:
        return codec.method_frame(0, Connection.Start(server_properties=server_properties,
                                                      mechanisms=mechanisms))

    def send_tune(self) -> bytes:
        return codec.method_frame(0, Connection.Tune(channel_max=self.channel_max, frame_max=self.frame_max,
                                                     heartbeat=self.heartbeat))

    def send_open_ok(self) -> bytes:
        self.state = OPEN
        return codec.method_frame(0, Connection.OpenOk())

    def send_method(self, channel: int, method: Frame) -> bytes:
        return codec.method_frame(channel, method)

    def close(self, code: int, text: str, class_id: int = 0, method_id: int = 0) -> bytes:
        """Our connection.close: from now on only close/close-ok are read."""
        if self.state != CLOSED:
            self.state = CLOSING
        return codec.method_frame(0, Connection.Close(reply_code=code, reply_text=shortstr_text(text),
                                                      class_id=class_id, method_id=method_id))

    def send_close_ok(self) -> bytes:
        self.state = CLOSED
        return codec.method_frame(0, Connection.CloseOk())

    def close_channel(self, channel: int, code: int, text: str, class_id: int = 0,
                      method_id: int = 0) -> bytes:
        """Our channel.close: the channel's frames are dropped until the client's close-ok."""
        self._closing_channels.add(channel)
        self._assembling.pop(channel, None)
        return codec.method_frame(channel, Channel.Close(reply_code=code, reply_text=shortstr_text(text),
                                                         class_id=class_id, method_id=method_id))

    def forget_channel(self, channel: int) -> None:
        """The client closed ``channel``: a half-received publish on it is dropped."""
        self._assembling.pop(channel, None)
