"""Remoting sessions: one asyncio protocol per TCP connection, and the listener owning them.

A session feeds received bytes to the sans-IO `RemotingConnection` and runs each request
as its own task, so one connection can carry many parked long polls next to a stream of
sends; responses go out by opaque, in whatever order handlers finish. Every request that
lacks the oneway bit is answered (clients rarely set it, see remoting.md), with an error
response when its handler fails. Bounded: at most `max_in_flight` requests run per
connection (reading pauses beyond that) and reading also pauses while the transport's
write buffer is above its high-water mark. A fatal framing error closes only that
connection. This module knows nothing of request codes: `RequestHandler` does the work;
it must never let one connection's failure reach the broker or another connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from .. import eager
from .codes import ResponseCode
from .command import FLAG_ONEWAY, FLAG_RESPONSE, Buffer, RemotingCommand, make_response
from .connection import RemotingConnection, command_event
from .errors import code_for
from .events import CommandReceived
from .frame import DEFAULT_MAX_FRAME_LENGTH, encode_command

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT = 4096


class FastLane(Protocol):
    """A handler's path for the one kind of request that dominates a busy connection
    (a plain send): taken from the loaded JSON header, before any command is built, and
    answered for all the requests one read delivered together."""

    def take(self, session: RemotingSession, header: dict[str, Any], body: Buffer) -> object | None:
        """An item for `answer` if this request is the lane's, else None (then a command
        is built and the handler serves it). Must not store anything: `answer` does."""

    def answer(self, session: RemotingSession, items: list[Any]) -> list[Buffer]:
        """Serve the taken items, in order, and return their response frames."""


class RequestHandler(Protocol):
    """What a session delegates to: the broker's or the name server's handlers."""

    lane: FastLane | None

    async def handle(self, session: RemotingSession, request: RemotingCommand) -> RemotingCommand | None:
        """The response to `request`, or None for none (a oneway request)."""

    def handle_now(self, session: RemotingSession, header: dict[str, Any], body: Buffer) -> list[Buffer] | None:
        """The response frame's buffers for a JSON request (its loaded header) that can be
        answered as it is, without suspending (e.g. a pull that needs no wait), else None:
        a command is built and `handle` serves it, errors included (raising counts as
        None). Saves the command, the coroutine and the response's encoding."""

    def session_closed(self, session: RemotingSession) -> None:
        """Forget whatever `session` registered (consumers, producers, locks stay)."""


class RemotingSession(asyncio.Protocol):
    """One client connection. Also the "channel" the consumer and producer tables hold."""

    def __init__(self, handler: RequestHandler, *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
                 on_closed: Callable[[RemotingSession], None] | None = None) -> None:
        self._handler = handler
        self._conn = RemotingConnection(max_frame_length)
        self._max_in_flight = max_in_flight
        self._on_closed = on_closed
        self._tasks: set[asyncio.Task[None]] = set()
        self._transport: asyncio.Transport | None = None
        self._read_paused = False
        self._write_paused = False
        self._opaque = itertools.count(1)
        self._out: list[Buffer] = []
        # Kept rather than looked up in callbacks: hosted under trio-asyncio, protocol
        # callbacks may run where asyncio.get_running_loop() cannot see the loop.
        self._loop = asyncio.get_running_loop()
        self._closed = self._loop.create_future()
        self.peer: tuple[str, int] = ("0.0.0.0", 0)

    # ------------------------------------------------------------------ asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))

    def data_received(self, data: bytes) -> None:
        """Serve each frame in order; requests the handler's lane takes are gathered and
        answered together, before the next request it does not take (so the store sees
        every connection's requests in the order they were sent)."""
        lane = self._handler.lane
        taken: list[Any] = []
        for event in self._conn.receive_raw(data):
            if type(event) is tuple:
                if lane is not None:
                    item = lane.take(self, *event)
                    if item is not None:
                        taken.append(item)
                        continue
                if taken:
                    self._answer(lane, taken)
                    taken = []
                if self._answered_now(*event):
                    continue
                event = command_event(event)
            elif taken:
                self._answer(lane, taken)
                taken = []
            if type(event) is CommandReceived:
                command = event.command
                if command.flag & FLAG_RESPONSE:
                    continue  # answers to our oneway pushes: nothing waits for them
                self._start(command)
            else:
                log.info("remoting %s:%d: %s", *self.peer, event.reason)
                if event.opaque is not None:
                    self._write(RemotingCommand(code=ResponseCode.SYSTEM_ERROR, opaque=event.opaque,
                                                flag=FLAG_RESPONSE, remark=event.reason))
                if event.fatal:
                    self.close()
                    return
        if taken:
            self._answer(lane, taken)
        self._update_reading()

    def _answered_now(self, header: dict[str, Any], body: Buffer) -> bool:
        try:
            frames = self._handler.handle_now(self, header, body)
        except Exception as exc:  # the general path answers it, naming what is wrong
            log.debug("request from %s:%d left to the general path: %r", *self.peer, exc)
            return False
        if frames is None:
            return False
        if self._transport is not None:
            self._queue(frames)
        return True

    def _answer(self, lane: FastLane, taken: list[Any]) -> None:
        frames = lane.answer(self, taken)
        if self._transport is not None:
            self._queue(frames)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        for task in self._tasks:
            task.cancel()
        try:
            self._handler.session_closed(self)
        except Exception:
            log.exception("session_closed failed")
        if self._on_closed is not None:
            self._on_closed(self)
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # ------------------------------------------------------------------ requests
    def _start(self, request: RemotingCommand) -> None:
        """Run a request now, up to its first suspension, and only then make it a task.

        Most requests (batch sends under ASYNC_FLUSH, offsets, heartbeats) finish without
        ever suspending, so they cost no task, no loop round trip and no delay; a request
        that suspends (a held pull, a synchronous flush) continues as a task owned by this
        session. Python 3.12's eager tasks do the same; 3.11 lacks them.
        """
        task = eager.start(self._run(request))
        if type(task) is eager.Done:
            return
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    async def _run(self, request: RemotingCommand) -> None:
        try:
            response = await self._handler.handle(self, request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = self._failure(request, exc)
        self._reply(request, response)

    def _failure(self, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        """The error response for a handler's exception, logged by kind."""
        code, remark = code_for(exc)
        if isinstance(exc, ValueError):  # a malformed request: the client hears why
            log.debug("request %d from %s:%d refused: %s", request.code, *self.peer, remark)
        elif code == ResponseCode.SYSTEM_ERROR:
            log.warning("request %d from %s:%d failed: %s", request.code, *self.peer, remark,
                        exc_info=exc)
        return make_response(request, code, remark)

    def _reply(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is not None and not request.flag & FLAG_ONEWAY:
            self._write(response)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if self._read_paused:
            self._update_reading()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None:
            return
        busy = self._write_paused or len(self._tasks) >= self._max_in_flight
        if busy and not self._read_paused:
            self._read_paused = True
            transport.pause_reading()
        elif not busy and self._read_paused:
            self._read_paused = False
            transport.resume_reading()

    def _write(self, command: RemotingCommand) -> None:
        """Encode and queue a command (dropped once the connection is closing)."""
        if self._transport is None or self._transport.is_closing():
            return
        try:
            frame = encode_command(command)
        except ValueError as exc:  # unrepresentable (e.g. a header over 16 MiB): say so
            log.warning("cannot encode response %d to %s:%d: %s", command.opaque, *self.peer, exc)
            frame = encode_command(RemotingCommand(code=ResponseCode.SYSTEM_ERROR, opaque=command.opaque,
                                                   flag=command.flag, remark="response too large"))
        self._queue(frame)

    def _queue(self, frame: list[Buffer]) -> None:
        """Queue a frame's buffers; frames queued in one loop iteration go out in one write.

        Pipelining clients get many responses per iteration, so coalescing saves a
        syscall per response; the queue is bounded by the in-flight limit.
        """
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.extend(frame)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if out and self._transport is not None and not self._transport.is_closing():
            self._transport.writelines(out)

    # ------------------------------------------------------------------ public
    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def push_oneway(self, request: RemotingCommand) -> None:
        """Send a broker-initiated request (39, 40) without waiting for any answer."""
        request.opaque = next(self._opaque)
        request.flag |= FLAG_ONEWAY
        self._write(request)

    def close(self) -> None:
        """Close after queued responses are written; running requests are cancelled."""
        if self._transport is not None:
            self._flush()
            self._transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class RemotingListener:
    """A TCP listener whose sessions all share one handler; owns and stops them."""

    def __init__(self, handler: RequestHandler, host: str, port: int, *,
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.handler = handler
        self.host = host
        self.port = port
        self._max_in_flight = max_in_flight
        self._max_frame_length = max_frame_length
        self._server: asyncio.Server | None = None
        self.sessions: set[RemotingSession] = set()

    def _new_session(self) -> RemotingSession:
        session = RemotingSession(self.handler, max_in_flight=self._max_in_flight,
                                  max_frame_length=self._max_frame_length,
                                  on_closed=self.sessions.discard)
        self.sessions.add(session)
        return session

    async def start(self) -> None:
        self._server = await asyncio.get_running_loop().create_server(
            self._new_session, self.host, self.port, reuse_address=True)
        if self.port == 0:  # tests ask for any free port
            self.port = self._server.sockets[0].getsockname()[1]
        log.info("remoting listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        """Stop accepting, close every session and wait for their requests to end."""
        if self._server is None:
            return
        self._server.close()
        sessions = list(self.sessions)
        for session in sessions:
            session.close()
        await asyncio.gather(*(s.wait_closed() for s in sessions), return_exceptions=True)
        await self._server.wait_closed()
        self._server = None
