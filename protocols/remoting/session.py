"""Remoting sessions: one asyncio protocol per TCP connection, and the listener owning them.

A session feeds received bytes to the sans-IO `RemotingConnection` and runs each request
as its own task, so one connection can carry many parked long polls next to a stream of
sends; responses go out by opaque, in whatever order handlers finish. Every request that
lacks the oneway bit is answered (clients rarely set it, see remoting.md), with an error
response when its handler fails. Bounded: at most `max_in_flight` requests run per
connection (reading pauses beyond that) and reading also pauses while the transport's
write buffer is above its high-water mark. A fatal framing error closes only that
connection. The broker may also ask the client something and await its answer (`invoke`:
an admin's request relayed to a consumer), matched by opaque, bounded by a timeout and
failed when the connection closes. This module knows nothing of request codes:
`RequestHandler` does the work; it must never let one connection's failure reach the
broker or another connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from time import perf_counter
from typing import Any, Protocol

from rocketport.core.errors import BrokerError

from .. import eager
from ..frontend import Traffic
from ..listener import ConnectionLimits, Listener
from ..session_base import Session
from ..tls import TlsPolicy
from .codes import RequestCode, ResponseCode
from .command import FLAG_ONEWAY, FLAG_RESPONSE, Buffer, RemotingCommand, make_response
from .connection import RemotingConnection, command_event
from .errors import code_for
from .events import CommandReceived
from .frame import DEFAULT_MAX_FRAME_LENGTH, encode_command

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT = 4096
_LANE_CODE = int(RequestCode.SEND_MESSAGE_V2)  # what the send lane's answers count as (rpc latency)


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


class RemotingSession(Session):
    """One client connection. Also the "channel" the consumer and producer tables hold."""

    def __init__(self, handler: RequestHandler, *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
                 on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None) -> None:
        super().__init__(on_open, on_closed)
        self._handler = handler
        self._conn = RemotingConnection(max_frame_length)
        self._max_in_flight = max_in_flight
        self._tasks: set[asyncio.Task[None]] = set()
        self._opaque = itertools.count(1)
        self._answers: dict[int, asyncio.Future[RemotingCommand]] = {}  # `invoke`s awaiting
        # the broker's front-end traffic (its rpc latency histograms; none for the name server)
        self._traffic: Traffic | None = getattr(handler, "traffic", None)
        self._read_at = 0.0  # perf_counter() when this read came, while latency is recorded

    # ------------------------------------------------------------------ asyncio callbacks
    def data_received(self, data: bytes) -> None:
        """Serve each frame in order; requests the handler's lane takes are gathered and
        answered together, before the next request it does not take (so the store sees
        every connection's requests in the order they were sent)."""
        lane = self._handler.lane
        taken: list[Any] = []
        if self._traffic is not None and self._traffic.latency is not None:
            self._read_at = perf_counter()
        events = self._conn.receive_raw(data)
        self._note_input(bool(events), self._conn.buffered > 0)
        for event in events:
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
                if command.flag & FLAG_RESPONSE:  # to an `invoke`; else nothing waits for it
                    answer = self._answers.pop(command.opaque, None)
                    if answer is not None and not answer.done():
                        answer.set_result(command)
                    continue
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
        if self.transport is not None:
            self._emit_all(frames)
        self._timed(header.get("code"), 1)
        return True

    def _answer(self, lane: FastLane, taken: list[Any]) -> None:
        frames = lane.answer(self, taken)
        if self.transport is not None:
            self._emit_all(frames)
        self._timed(_LANE_CODE, len(taken))

    def _timed(self, code: Any, count: int) -> None:
        """``count`` requests of ``code`` answered from this read (rocketmq_rpc_latency)."""
        traffic = self._traffic
        if traffic is not None and traffic.latency is not None and self._read_at and type(code) is int:
            traffic.latency.observe(code, (perf_counter() - self._read_at) * 1000, count)

    def _closed_hook(self) -> None:
        for task in self._tasks:
            task.cancel()
        answers, self._answers = self._answers, {}
        for answer in answers.values():
            if not answer.done():
                answer.set_exception(ConnectionError("the connection closed before the client answered"))
        self._handler.session_closed(self)

    def _busy(self) -> bool:
        return len(self._tasks) >= self._max_in_flight

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
        started = perf_counter()
        try:
            response = await self._handler.handle(self, request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = self._failure(request, exc)
        self._reply(request, response)
        traffic = self._traffic
        if traffic is not None and traffic.latency is not None:
            traffic.latency.observe(request.code, (perf_counter() - started) * 1000)

    def _failure(self, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        """The error response for a handler's exception, logged by kind."""
        code, remark = code_for(exc)
        if isinstance(exc, (ValueError, BrokerError)):  # the client's request: it hears why
            log.debug("request %d from %s:%d refused: %s", request.code, *self.peer, remark)
        elif isinstance(exc, OSError):  # a limit or fault of the store's files: not a bug
            log.warning("request %d from %s:%d refused: %s", request.code, *self.peer, remark)
        elif code == ResponseCode.SYSTEM_ERROR:  # a bug of ours: logged with its traceback
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

    def _write(self, command: RemotingCommand) -> None:
        """Encode and queue a command (dropped once the connection is closing)."""
        if self.transport is None or self.transport.is_closing():
            return
        try:
            frame = encode_command(command)
        except ValueError as exc:  # unrepresentable (e.g. a header over 16 MiB): say so
            log.warning("cannot encode response %d to %s:%d: %s", command.opaque, *self.peer, exc)
            frame = encode_command(RemotingCommand(code=ResponseCode.SYSTEM_ERROR, opaque=command.opaque,
                                                   flag=command.flag, remark="response too large"))
        self._emit_all(frame)

    # ------------------------------------------------------------------ public
    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def emit(self, frames: list[Buffer]) -> None:
        """Queue response frames a lane built after a wait (SYNC_MASTER's slave, SYNC_FLUSH's
        fsync); dropped once the connection is closing."""
        if self.transport is not None and not self.transport.is_closing():
            self._emit_all(frames)

    def push_oneway(self, request: RemotingCommand) -> None:
        """Send a broker-initiated request (39, 40) without waiting for any answer."""
        request.opaque = next(self._opaque)
        request.flag |= FLAG_ONEWAY
        self._write(request)

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a broker-initiated request and await the client's answer: TimeoutError
        when none comes within `timeout_s`, ConnectionError when the connection is or
        becomes closed first. A late answer is dropped."""
        if not self.is_open or self.transport is None or self.transport.is_closing():
            raise ConnectionError("the connection is closed")
        request.opaque = opaque = next(self._opaque)
        request.flag &= ~(FLAG_ONEWAY | FLAG_RESPONSE)
        loop = asyncio.get_running_loop()
        answer = self._answers[opaque] = loop.create_future()
        timer = loop.call_later(timeout_s, _expire, answer, timeout_s)
        try:
            self._write(request)
            return await answer
        finally:
            timer.cancel()
            self._answers.pop(opaque, None)

    async def wait_closed(self) -> None:
        await super().wait_closed()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _expire(answer: asyncio.Future[RemotingCommand], timeout_s: float) -> None:
    """A timer, not `asyncio.wait_for`: on 3.11 a cancellation arriving as wait_for's
    timeout fires can be lost."""
    if not answer.done():
        answer.set_exception(TimeoutError(f"no answer within {timeout_s:g} s"))


class RemotingListener(Listener):
    """A TCP listener whose sessions all share one handler; owns and stops them."""

    def __init__(self, handler: RequestHandler, host: str, port: int, *, role: str = "remoting",
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
                 limits: ConnectionLimits | None = None, tls: TlsPolicy | None = None) -> None:
        self.handler = handler

        def new_session(on_open: Callable[[Session], bool],
                        on_closed: Callable[[Session], None]) -> RemotingSession:
            return RemotingSession(handler, max_in_flight=max_in_flight,
                                   max_frame_length=max_frame_length, on_open=on_open,
                                   on_closed=on_closed)

        super().__init__(role, host, port, new_session, limits, tls)
