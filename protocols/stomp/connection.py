"""Sans-IO STOMP server connection: bytes in, frames out; frames in, bytes out.

`StompConnection` gathers received bytes, skips heart-beats, and returns each complete
client frame; the first frame that breaks the grammar or a limit ends the stream with a
`ProtocolError` (after it nothing more is parsed: the session answers ERROR and closes, as
the specification says). The negotiated version, which decides header escaping both ways,
is set by the session once it has answered CONNECT (`negotiated`): until then parsing
stops after a CONNECT frame, so frames pipelined behind it are read with the version's
escaping, not 1.0's. Same shape as the remoting and Kafka
connections: no asyncio, no sockets, never raises whatever it is fed. Frames with the same
command and headers share one parsed ``headers`` dict (`codec.parse_frame`): read-only.
"""

from __future__ import annotations

from dataclasses import dataclass

from .codec import V10, Frame, FrameError, Heads, Limits, parse_frame, serialize, skip_eols


@dataclass(frozen=True, slots=True)
class ProtocolError:
    """The stream is broken here; ``reason`` goes into the ERROR frame's message."""

    reason: str


Event = Frame | ProtocolError

_COMPACT_AT = 1 << 16


class StompConnection:
    __slots__ = ("limits", "version", "_buf", "_pos", "_failed", "_connected", "_heads")

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.version = V10  # until CONNECT is answered: CONNECT frames are not escaped anyway
        self._buf = bytearray()
        self._pos = 0
        self._failed = False
        self._connected = False
        self._heads: Heads = {}  # parsed header blocks, once the version is known

    def negotiated(self, version: str) -> list[Event]:
        """CONNECT was accepted with ``version``: the frames already buffered behind it."""
        self.version = version
        self._connected = True
        self._heads.clear()
        return self.receive_data(b"")

    @property
    def failed(self) -> bool:
        return self._failed

    @property
    def buffered(self) -> int:
        """Octets of an incomplete frame held back."""
        return len(self._buf) - self._pos

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        if self._failed:
            return []
        buf = self._buf
        buf += data
        pos = self._pos
        out: list[Event] = []
        try:
            while True:
                pos = skip_eols(buf, pos)
                if pos >= len(buf):
                    break
                parsed = parse_frame(buf, pos, self.version, self.limits,
                                     self._heads if self._connected else None)
                if parsed is None:
                    break
                frame, pos = parsed
                out.append(frame)
                if not self._connected:
                    break  # CONNECT (or whatever came first): the rest waits for `negotiated`
        except FrameError as exc:
            self._failed = True
            out.append(ProtocolError(str(exc)))
            buf.clear()
            self._pos = 0
            return out
        if pos >= len(buf):
            buf.clear()
            pos = 0
        elif pos >= _COMPACT_AT:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return out

    def send(self, command: str, headers: dict[str, str] | list[tuple[str, str]],
             body: bytes = b"") -> bytes:
        return serialize(command, headers, body, self.version)

    def send_frame(self, frame: Frame) -> bytes:
        return serialize(frame.command, frame.headers, frame.body, self.version)
