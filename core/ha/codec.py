"""The HA wire format, RocketMQ 4.x's, without I/O.

Slave to master: its CommitLog max offset, 8 bytes big-endian, on connect, after each append
and at least every haSendHeartbeatInterval. Master to slave: frames of physical offset (8),
size (4) and that many CommitLog bytes from the offset; a frame may cut a record, and a
frame of size 0 is a heart-beat that also says where the master's stream stands. Decoders
are fed whatever a read returned and hand back whole items; bad input raises HAProtocolError
(the connection is dropped, the broker goes on).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

REPORT = struct.Struct(">q")
FRAME_HEADER = struct.Struct(">qi")
MAX_FRAME = 64 << 20  # the largest haTransferBatchSize accepted


class HAProtocolError(ValueError):
    """The peer's bytes are not the HA protocol (or not sane numbers in it)."""


@dataclass(slots=True)
class Frame:
    offset: int
    data: bytes  # empty: a heart-beat


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def encode_frame_header(offset: int, size: int) -> bytes:
    return FRAME_HEADER.pack(offset, size)


class ReportDecoder:
    """The master's view of a slave's reports: offsets, in order."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[int]:
        buf = self._buf + data if self._buf else data
        whole = len(buf) - len(buf) % REPORT.size
        offsets = [o for (o,) in REPORT.iter_unpack(buf[:whole])] if whole else []
        self._buf = buf[whole:]
        if any(o < 0 for o in offsets):
            raise HAProtocolError(f"a negative offset report ({min(offsets)})")
        return offsets


class FrameDecoder:
    """The slave's view of the master's stream: whole frames, in order."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame

    def feed(self, data: bytes) -> list[Frame]:
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        head = FRAME_HEADER.size
        with memoryview(buf) as view:  # one copy per frame (a bytearray slice is a copy too)
            while len(buf) - pos >= head:
                offset, size = FRAME_HEADER.unpack_from(buf, pos)
                if offset < 0 or not 0 <= size <= self._max:
                    raise HAProtocolError(f"a frame of {size} bytes at offset {offset}")
                if len(buf) - pos - head < size:
                    break
                frames.append(Frame(offset, view[pos + head:pos + head + size].tobytes()))
                pos += head + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes held for a frame not yet whole."""
        return len(self._buf)
