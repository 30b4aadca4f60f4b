"""Sans-IO remoting connection: bytes in, events out; commands in, buffers out.

`RemotingConnection` splits a byte stream into frames, decodes their headers and reports
`CommandReceived` or `ProtocolError` events; `send` turns a command into buffers for
`writelines`. `receive_raw` stops a JSON header at its loaded dict, so that a session can
try a handler's fast path on it before a command is built. It keeps no state beyond a
partial frame, so one instance serves a broker session and a client alike. It must never
import asyncio or sockets, never block, and never raise whatever bytes it is fed.
"""

from __future__ import annotations

from typing import Any

from .codes import SerializeType
from .command import Buffer, RemotingCommand
from .events import CommandReceived, ProtocolError
from .frame import (
    DEFAULT_MAX_FRAME_LENGTH,
    LENGTH,
    PREFIX,
    FrameError,
    command_from_json,
    decode_rocketmq_header,
    encode_command,
    load_json_header,
)

Event = CommandReceived | ProtocolError
# A JSON frame as `receive_raw` reports it: the header loaded but not checked, and the body.
RawJson = tuple[dict[str, Any], Buffer]

_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ


class RemotingConnection:
    """One peer's frame stream.

    `max_frame_length` bounds the total-length field (which counts everything after
    itself); it also bounds the memory a slow or hostile peer can make us buffer.
    """

    __slots__ = ("_max_frame_length", "_pending", "_need", "_failed")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        if max_frame_length < 4:
            raise ValueError("max_frame_length must leave room for the header-length word")
        self._max_frame_length = max_frame_length
        self._pending = bytearray()  # start of a frame whose rest has not arrived yet
        self._need = 4  # bytes `_pending` must hold before parsing is worth trying again
        self._failed = False

    @property
    def failed(self) -> bool:
        """True once a fatal ProtocolError was reported; no event will follow."""
        return self._failed

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back (for backpressure accounting)."""
        return len(self._pending)

    def send(self, command: RemotingCommand) -> list[Buffer]:
        """Buffers to write, in order, to put `command` on the wire."""
        return encode_command(command)

    def receive_data(self, data: Buffer) -> list[Event]:
        """Feed received bytes; returns the events for every frame they complete.

        Bodies of the commands returned are read-only memoryviews into the received bytes
        or into the buffer that gathered a frame split across reads, which is handed over
        and never written again: when `data` is `bytes` holding whole frames, or completes
        a split frame, nothing is copied.
        """
        return [command_event(item) if type(item) is tuple else item
                for item in self.receive_raw(data)]

    def receive_raw(self, data: Buffer) -> list[Event | RawJson]:
        """`receive_data`, except that a JSON frame comes as (loaded header, body): pass
        it to `command_event` unless a fast path takes the header as it is."""
        if self._failed:
            return []
        if self._pending:
            self._pending += data
            if len(self._pending) < self._need:
                return []
            data, self._pending = self._pending, bytearray()
        elif type(data) is not bytes:
            data = bytes(data)
        return self._parse(data)

    def _parse(self, data: bytes | bytearray) -> list[Event | RawJson]:
        events: list[Event | RawJson] = []
        append = events.append
        view = memoryview(data).toreadonly()
        end = len(data)
        pos = 0
        max_length = self._max_frame_length
        unpack_prefix = PREFIX.unpack_from
        while end - pos >= 8:
            length, word = unpack_prefix(data, pos)
            if length < 4 or length > max_length:
                return self._fail(events, _bad_length(length, max_length))
            frame_end = pos + 4 + length
            if frame_end > end:
                break
            header_start = pos + 8
            body_start = header_start + (word & 0xFFFFFF)
            if body_start > frame_end:
                return self._fail(
                    events,
                    f"header length {word & 0xFFFFFF} exceeds the frame's {length - 4} bytes",
                )
            serialize_type = word >> 24
            body = view[body_start:frame_end] if body_start < frame_end else b""
            try:
                if serialize_type == _JSON:
                    append((load_json_header(view[header_start:body_start]), body))
                elif serialize_type == _ROCKETMQ:
                    command = decode_rocketmq_header(view[header_start:body_start])
                    command.body = body
                    append(CommandReceived(command))
                else:
                    return self._fail(events, f"unknown serialize type {serialize_type}")
            except FrameError as exc:
                append(ProtocolError(exc.reason, exc.opaque, False))
            pos = frame_end
        if pos == end:
            self._need = 4
            return events
        if end - pos >= 4:
            length = LENGTH.unpack_from(data, pos)[0]
            if length < 4 or length > max_length:
                return self._fail(events, _bad_length(length, max_length))
            self._need = 4 + length
        else:
            self._need = 4
        self._pending = bytearray(view[pos:])
        return events

    def _fail(self, events: list[Event], reason: str) -> list[Event]:
        self._failed = True
        self._pending = bytearray()
        events.append(ProtocolError(reason, None, True))
        return events


def _bad_length(length: int, max_length: int) -> str:
    if length < 0:
        return f"negative frame length {length}"
    if length < 4:
        return f"frame length {length} cannot hold the header-length word"
    return f"frame length {length} exceeds the maximum {max_length}"


def command_event(raw: RawJson) -> CommandReceived | ProtocolError:
    """The event `receive_data` reports for a frame `receive_raw` gave as `raw`."""
    header, body = raw
    try:
        command = command_from_json(header)
    except FrameError as exc:
        return ProtocolError(exc.reason, exc.opaque, False)
    command.body = body
    return CommandReceived(command)
