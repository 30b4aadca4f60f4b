"""The HA wire format, RocketMQ 4.x's, without I/O.

Slave to master: its CommitLog max offset, 8 bytes big-endian, on connect, after each append
and at least every haSendHeartbeatInterval. Master to slave: frames of physical offset (8),
size (4) and that many CommitLog bytes from the offset; a frame may cut a record, and a
frame of size 0 is a heart-beat that also says where the master's stream stands. Decoders
are fed whatever a read returned and hand back whole reports, and frames' bytes as they come
(FrameReader); bad input raises HAProtocolError (the connection is dropped, the broker goes
on).
"""

from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
FRAME_HEADER = struct.Struct(">qi")
MAX_FRAME = 64 << 20  # the largest haTransferBatchSize accepted


class HAProtocolError(ValueError):
    """The peer's bytes are not the HA protocol (or not sane numbers in it)."""


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


class FrameReader:
    """The slave's view of the master's stream, without copying it: fed each read's bytes
    (a view of the reader's buffer), it hands back the frames' bytes as they come, as
    pieces ``(offset, data, frame_size)``: ``data`` a view of the fed bytes at log
    ``offset`` (any part of a frame is the master's log from its offset too, so a piece
    can be appended at once), ``frame_size`` the frame's size when the piece ends it, else
    -1. A heart-beat is one empty piece. The views are valid until the next read into the
    buffer; only a header cut by a read is copied (12 bytes at most)."""

    __slots__ = ("_head", "_offset", "_left", "_size", "_max")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._head = b""  # the start of a header cut by the last read
        self._offset = 0  # where the next byte of the frame being read goes
        self._left = 0  # bytes of that frame still to come
        self._size = 0  # that frame's size
        self._max = max_frame

    def feed(self, data: memoryview) -> list[tuple[int, memoryview, int]]:
        pieces = []
        pos, n, head = 0, len(data), FRAME_HEADER.size
        while pos < n:
            left = self._left
            if left:
                k = min(left, n - pos)
                self._left = left - k
                pieces.append((self._offset, data[pos:pos + k], -1 if k < left else self._size))
                self._offset += k
                pos += k
                continue
            if self._head or n - pos < head:
                take = min(head - len(self._head), n - pos)
                self._head += data[pos:pos + take].tobytes()
                pos += take
                if len(self._head) < head:
                    break
                offset, size = FRAME_HEADER.unpack(self._head)
                self._head = b""
            else:
                offset, size = FRAME_HEADER.unpack_from(data, pos)
                pos += head
            if offset < 0 or not 0 <= size <= self._max:
                raise HAProtocolError(f"a frame of {size} bytes at offset {offset}")
            if size == 0:
                pieces.append((offset, data[pos:pos], 0))
            self._offset, self._left, self._size = offset, size, size
        return pieces
