"""Connection plumbing every protocol's session shares: what is not the protocol's own.

A protocol's session subclasses `Session` and keeps only its request pipeline (feeding its
sans-IO connection, running handlers, ordering answers). The base holds the transport and
the peer, coalesces writes (`_queue`: every frame queued in one loop iteration goes out in
one ``writelines``, so a pipelining client costs one syscall per burst, not per answer),
pauses reading while the transport's write buffer is above its high-water mark
or the subclass says it is busy (its in-flight bound), records when input last came and
whether a frame is half received (the listener's idle and frame timeouts read these), and
gives the listener one way to close and await any session. It must never block, and never
let one connection's failure reach another.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Union

Buffer = Union[bytes, bytearray, memoryview]

log = logging.getLogger(__name__)


class Session(asyncio.Protocol):
    """One client connection; subclasses implement `data_received`, `_busy`, `_closed_hook`."""

    def __init__(self, on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("0.0.0.0", 0)
        # Kept rather than looked up in callbacks: hosted under trio-asyncio, protocol
        # callbacks may run where asyncio.get_running_loop() cannot see the loop.
        self._loop = asyncio.get_running_loop()
        self._on_open = on_open
        self._on_closed = on_closed
        self._read_paused = False
        self._write_paused = False
        self._out: list[Buffer] = []
        self._ended = self._loop.create_future()
        self.last_input = self._loop.time()
        self.partial_since: float | None = None  # when a frame began that has not ended

    # ------------------------------------------------------------------ asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        if self._on_open is not None and not self._on_open(self):
            transport.close()  # over the listener's connection limit

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        try:
            self._closed_hook()
        except Exception:
            log.exception("closing the session of %s:%d failed", *self.peer)
        if self._on_closed is not None:
            self._on_closed(self)
        if not self._ended.done():
            self._ended.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # ------------------------------------------------------------------ for subclasses
    def _busy(self) -> bool:
        """True while the session holds as much work as it may (its in-flight bound)."""
        return False

    def _closed_hook(self) -> None:
        """Cancel this connection's work and forget what it registered."""

    def _note_input(self, framed: bool, partial: bool) -> None:
        """After each read: ``framed`` when it completed a frame, ``partial`` when bytes
        of an unfinished frame remain buffered. A frame that keeps arriving without ever
        completing (a slowloris) is what the listener's frame timeout closes."""
        now = self._loop.time()
        self.last_input = now
        if framed or not partial:
            self.partial_since = now if partial else None
        elif self.partial_since is None:
            self.partial_since = now

    def _queue(self, buffers: list[Buffer]) -> None:
        """Queue one frame's buffers; what is queued in one loop iteration goes out in one
        write. Bounded by the subclass's in-flight limit, since answers come from requests."""
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.extend(buffers)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None:
            return
        busy = self._write_paused or self._busy()
        if busy and not self._read_paused:
            self._read_paused = True
            transport.pause_reading()
        elif not busy and self._read_paused:
            self._read_paused = False
            transport.resume_reading()

    # ------------------------------------------------------------------ public
    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    @property
    def in_flight(self) -> int:
        """Requests running or awaiting their answer (an idle session has none)."""
        return 0

    def close(self) -> None:
        """Close this connection only, after writing what is queued."""
        if self.transport is not None:
            self._flush()
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection without writing what is queued (a peer that stopped reading)."""
        if self.transport is not None:
            self.transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._ended)
