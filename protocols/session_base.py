"""Connection plumbing every protocol's session shares: what is not the protocol's own.

A protocol's session subclasses `Session` (or `OrderedSession`, when its answers must leave
in request order) and keeps only its protocol: feeding its sans-IO connection, running
handlers, encoding answers. The base holds the transport and the peer; coalesces writes
(`_emit`: every buffer queued in one loop iteration goes out in one ``writelines``, so a
pipelining client costs one syscall per burst, not per answer; `_flush` writes at once when
waiting would only add latency); pauses reading while the transport's write buffer is above
its high-water mark or the subclass says it is busy (its in-flight bound), and pauses the
session's subscribers with it; records when input and output last happened and whether a
frame is half received (the listener's idle and frame timeouts and the heart-beats read
these), and gives the listener one way to close and await any session. `OrderedSession` adds
the ordered in-flight pipeline: requests start at once, up to ``max_in_flight``, and their
answers leave in request order. Nothing here may block, and one connection's failure must
never reach another.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar, Union

from . import eager
from .tls_writer import ChunkedTlsTransport

Buffer = Union[bytes, bytearray, memoryview]

log = logging.getLogger(__name__)


class Pausable(Protocol):
    """A subscriber whose deliveries stop while the connection cannot write."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class Outcome(Protocol):
    """A request's outcome: a handler's task, or `eager.Done` when it never waited."""

    def done(self) -> bool: ...

    def cancel(self) -> bool: ...

    def result(self) -> Any: ...


MAX_NOTED_GROUPS = 16  # consumer groups one connection is listed with (a client names them)
READ_SLICE_S = 0.01  # a connection's reads in one loop iteration before others get the loop


class Session(asyncio.Protocol):
    """One client connection; subclasses implement `data_received`, `_busy`, `_closed_hook`."""

    # what the client has done, for /metrics' producer and consumer connections: a protocol
    # sets them where a request stores messages or starts consuming (per request, not per message)
    produces = False
    consumes = False
    # the consumer groups it consumes for (the console's members, /metrics' consumer_group
    # label); a protocol notes a group where a request names one (`note_group`)
    consumer_groups: frozenset[str] = frozenset()

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
        self._slice_start = 0.0  # when this loop iteration's first read came (0: none yet)
        self._yielding = False  # reading paused to give the loop to other work (_note_input)
        self._out: list[Buffer] = []
        self._flush_due = False  # a `_flush` is scheduled for this loop iteration
        self._ended = self._loop.create_future()
        self.last_input = self._last_output = self._loop.time()
        self.partial_since: float | None = None  # when a frame began that has not ended

    # ------------------------------------------------------------------ asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if transport.get_extra_info("ssl_object") is not None:  # TLS: written in paced chunks
            transport = ChunkedTlsTransport(transport)  # type: ignore[arg-type,assignment]
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
        if type(self.transport) is ChunkedTlsTransport:
            self.transport.pause()
        self._update_reading()
        for subscriber in self._subscribers():
            subscriber.pause()

    def resume_writing(self) -> None:
        self._write_paused = False
        if type(self.transport) is ChunkedTlsTransport:
            self.transport.resume()  # may fill the transport again (and pause us)
            if self._write_paused:
                return
        self._update_reading()
        for subscriber in self._subscribers():
            subscriber.resume()

    def note_group(self, group: str) -> None:
        """This connection consumes for ``group`` (cheap when already noted: once a request)."""
        self.consumes = True
        if group not in self.consumer_groups and len(self.consumer_groups) < MAX_NOTED_GROUPS:
            self.consumer_groups = self.consumer_groups | {group}

    # ------------------------------------------------------------------ for subclasses
    def _busy(self) -> bool:
        """True while the session holds as much work as it may (its in-flight bound)."""
        return False

    def _closed_hook(self) -> None:
        """Cancel this connection's work and forget what it registered."""

    def _subscribers(self) -> Iterable[Pausable]:
        """The subscribers that deliver to this connection and may resume now (paused with
        the transport's writing, so a slow reader never makes the broker buffer)."""
        return ()

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
        # A busy socket is read many times in one loop iteration (libuv reads up to 32
        # times a poll event), and each read's frames are handled at once: a pipelining
        # client could hold the loop for seconds while timers, the index builder and other
        # connections wait. Past READ_SLICE_S of reads in one iteration, reading pauses
        # until the next iteration (the loop's own time is cached per iteration: a clock).
        started, clock = self._slice_start, time.perf_counter()
        if not started:
            self._slice_start = clock
            self._loop.call_soon(self._end_slice)
        elif clock - started > READ_SLICE_S and not self._yielding:
            self._yielding = True
            self._update_reading()

    def _end_slice(self) -> None:
        self._slice_start = 0.0
        if self._yielding:
            self._yielding = False
            self._update_reading()

    def _emit(self, data: Buffer) -> None:
        """Queue one buffer; what is queued in one loop iteration goes out in one write.
        Bounded by the subclass's in-flight limit and its subscribers' prefetch, since
        what is written answers a request or delivers a prefetched message."""
        self._out.append(data)
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush)

    def _emit_all(self, buffers: Iterable[Buffer]) -> None:
        """Queue several buffers (one frame's parts, or many frames), as `_emit`."""
        self._out.extend(buffers)
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush)

    def _flush_soon(self) -> None:
        """Write what is queued (or queued directly into ``_out``) in this loop iteration."""
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Write what is queued now; a write already due finds nothing left. The list is
        emptied in place: a subclass may hold it (a deliverer appends to it directly)."""
        self._flush_due = False
        out = self._out
        if out:
            transport = self.transport
            if transport is not None and not transport.is_closing():
                self._write_out(out)
                self._last_output = self._loop.time()
            out.clear()

    def _write_out(self, buffers: list[Buffer]) -> None:
        """Put the queued buffers on the wire (a framing transport, WebSocket, wraps them)."""
        self.transport.writelines(buffers)  # type: ignore[union-attr]

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None:
            return
        busy = self._write_paused or self._yielding or self._busy()
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


P = TypeVar("P")  # a protocol's record of one request awaiting its answer (has ``result``)


class OrderedSession(Session, Generic[P], ABC):
    """A session whose requests run concurrently but whose answers leave in request order
    (Kafka matches answers by order; STOMP's RECEIPTs and ERRORs follow their frames).

    Each received event waits in ``_backlog`` until fewer than ``max_in_flight`` requests
    are running (reading pauses meanwhile); the subclass's `_start` starts requests from
    there (eagerly: `eager.start`) and `_track`s each; `_answer` encodes one request's
    answer into ``_out`` once it and every request before it are done. Answers of requests
    that finish together leave in one write; a lone one at once."""

    def __init__(self, max_in_flight: int, on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None) -> None:
        super().__init__(on_open, on_closed)
        self.max_in_flight = max_in_flight
        self._queue: deque[P] = deque()  # started, in order: running or answered-but-unsent
        self._backlog: deque[Any] = deque()  # received, not yet started
        self._closing = False

    # ------------------------------------------------------------------ for subclasses
    @abstractmethod
    def _start(self, backlog: deque[Any]) -> None:
        """Start requests from the head of ``backlog`` while fewer than ``max_in_flight``
        run (``_queue``'s length), `_track`ing each."""

    @abstractmethod
    def _answer(self, pending: P) -> bool:
        """Put a finished request's answer into ``_out``; False stops answering (the
        session is closing)."""

    # ------------------------------------------------------------------ the pipeline
    def _busy(self) -> bool:
        return bool(self._backlog) or len(self._queue) >= self.max_in_flight

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    def _received(self, events: list[Any]) -> None:
        self._backlog.extend(events)
        self._pump()

    def _pump(self) -> None:
        """Start what the bound allows, answer what is done (one write for the read)."""
        backlog, queue = self._backlog, self._queue
        limit = self.max_in_flight
        while backlog and len(queue) < limit and not self._closing:
            self._start(backlog)
            self._answer_ready()  # requests done at once leave room for more
        self._update_reading()

    def _track(self, pending: P) -> None:
        """Queue a started request for answering in turn; answered when its outcome is done."""
        self._queue.append(pending)
        outcome: Outcome = pending.result  # type: ignore[attr-defined]
        if type(outcome) is not eager.Done:
            outcome.add_done_callback(self._on_done)  # type: ignore[attr-defined]

    def _on_done(self, _: Any) -> None:
        if not self._closing:
            self._answer_ready()
            self._pump()  # room for the backlog; reading resumes below the bound

    def _answer_ready(self) -> None:
        """Answer the requests at the head of the queue that are done, in order: at once
        when none is left running, else with the write due this iteration (requests that
        finish together are answered in one write)."""
        queue = self._queue
        while queue and queue[0].result.done() and not self._closing:  # type: ignore[attr-defined]
            if not self._answer(queue.popleft()):
                break
        if self._out:
            if queue:
                self._flush_soon()
            else:
                self._flush()

    def _abandon(self) -> None:
        """Cancel what is running and forget what waits: the connection is going."""
        self._closing = True
        for pending in self._queue:
            pending.result.cancel()  # type: ignore[attr-defined]
        self._queue.clear()
        self._backlog.clear()

    def _closed_hook(self) -> None:
        self._abandon()
