"""Writes into a TLS transport in record-sized chunks, as fast as the socket takes them.

asyncio's and uvloop's TLS transports encrypt everything handed to one ``write`` or
``writelines`` into an OpenSSL memory BIO, then read the BIO out whole and hand that to the
socket; once the socket is full (a fetch answer of 8 MiB to a loopback reader gets there)
the rest piles up in the BIO. OpenSSL grows a memory BIO by copying it and wiping the old
copy and zeroes its new room before every record: in py-spy of the broker during a 100 B
Kafka fetch over TLS that cost about as much as the encryption itself, and the BIO was read
out into bytes objects of many MiB. Every small buffer of a ``writelines`` is also a TLS
record of its own.

`ChunkedTlsTransport` stands in front of the session's TLS transport: what the session
writes is queued, and handed over in pieces of `CHUNK` bytes (small buffers joined, so a
burst of small frames shares records; large ones sliced, never copied) while the session
is not paused, so the BIO stays below the transport's high-water mark and each piece goes
from cache to socket. The session's `pause_writing` stops the queue and `resume_writing`
restarts it (`pause`, `resume`). A close waits for the queue, as a plaintext transport's
close waits for its buffer. Plaintext connections never see this class.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Union

Buffer = Union[bytes, bytearray, memoryview]

# 64 KiB: four full TLS records a piece, well inside the transport's 512 KiB high-water mark
# and the CPU's cache; a piece's fixed cost (an SSL_write, a BIO read, a socket write) is
# spread over some 600 messages of 100 B (256 KiB pieces measured no better)
CHUNK = 64 * 1024


class ChunkedTlsTransport:
    """A TLS transport's write side, chunked and paced (see the module); the rest forwarded."""

    __slots__ = ("_transport", "_queue", "_paused", "_closing", "_pumping")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._queue: deque[Buffer] = deque()
        self._paused = False
        self._closing = False  # close() called: nothing more is queued, the queue drains first
        self._pumping = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def write(self, data: Buffer) -> None:
        if data and not self._closing:
            self._queue.append(data)
            self._pump()

    def writelines(self, buffers: Any) -> None:
        if not self._closing:
            self._queue.extend(buffers)
            self._pump()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(b) for b in self._queue)

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def close(self) -> None:
        self._closing = True
        if not self._queue:
            self._transport.close()

    def abort(self) -> None:
        self._closing = True
        self._queue.clear()
        self._transport.abort()

    def pause(self) -> None:
        """The transport's buffer is full (the session's pause_writing)."""
        self._paused = True

    def resume(self) -> None:
        """The transport's buffer drained (the session's resume_writing): write on."""
        self._paused = False
        self._pump()

    def _pump(self) -> None:
        """Hand over CHUNK-sized pieces until the queue is empty or the transport pauses us
        (its pause_writing comes back through the session during a write)."""
        if self._pumping:
            return  # a write's callback wrote again: the running loop takes it
        self._pumping = True
        queue, transport = self._queue, self._transport
        try:
            while queue and not self._paused and not transport.is_closing():
                head = queue[0]
                size = len(head)
                if size >= CHUNK:
                    view = head if type(head) is memoryview else memoryview(head)
                    if size == CHUNK:
                        queue.popleft()
                    else:
                        queue[0] = view[CHUNK:]
                    transport.write(view[:CHUNK])
                    continue
                queue.popleft()
                if not queue or size + len(queue[0]) > CHUNK:
                    transport.write(head)
                    continue
                parts = [head]
                while queue and size + len(queue[0]) <= CHUNK:
                    part = queue.popleft()
                    parts.append(part)
                    size += len(part)
                transport.write(b"".join(parts))
        finally:
            self._pumping = False
        if transport.is_closing():
            queue.clear()  # the connection is gone: nothing more can be sent
        elif self._closing and not queue:
            transport.close()
