"""One STOMP client connection's transport: bytes through the codec to the frame handlers,
their answers back in order.

The session owns the connection's state machine (nothing but CONNECT or STOMP until one is
accepted, `login` deciding; then the handlers, made for the negotiated version and the
account), the heart-beats, and the order of answers: frames are handled in the order they
arrive and their answers (RECEIPT, ERROR) leave in that order (`OrderedSession`), but a
SEND's store write does not hold back the frames behind it: each frame's handler starts at
once (`eager.start`) and only its answer waits its turn, so a pipelining producer under
SYNC_FLUSH has many writes in one fsync. A run of plain SENDs to one topic that came in one
read goes to the publisher's plain-send lane at once (`Publisher.put_run`), with a receipt
per frame as asked. At most ``max_in_flight`` frames wait for their answer; past that,
reading pauses. DISCONNECT is answered once everything before it is, so its RECEIPT means
every earlier SEND is stored (synced under SYNC_FLUSH).

What a frame means is the handlers' (`handlers`: `publish`, `deliver`, `transactions`);
the session writes the MESSAGE frames the deliverer renders, a slice in one write, and
while the transport's buffer is full every subscriber is paused, so a slow consumer never
makes the broker buffer without bound. Heart-beats are negotiated as the specification
says; a client silent for twice its interval (at least its interval plus two seconds) is
dropped. Any protocol or broker error is an ERROR frame (``message`` from the error map,
`errors`, and ``receipt-id`` when the frame asked for one) and the connection closes;
nothing here can reach another connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Final

from rocketport.core.auth.plain_acl import AclError, PlainAcl
from rocketport.core.broker import Broker
from rocketport.core.facade.types import Delivery

from .. import eager
from ..frontend import Traffic
from ..session_base import OrderedSession, Outcome, Pausable, Session
from ..tls import certificate_name
from .codec import VERSIONS, Frame, Limits
from .connection import ProtocolError, StompConnection
from .deliver import Subscription
from .errors import StompError, error_message, is_refusal
from .handlers import StompHandlers
from .login import VersionRefused, log_in
from .publish import SendPlan

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT: Final = 1024
_HELD: Final = frozenset({"SEND", "ACK", "NACK"})  # what a transaction holds for its COMMIT
_OWN_DELIVERY_WAIT_S: Final = 2.0
_LINGER_S: Final = 10.0  # at most, reading what a refused client still sends before closing
SERVER_NAME: Final = "Rocketport/0.1.0"


@dataclass(slots=True)
class StompContext:
    """What every STOMP connection of one front-end shares."""

    broker: Broker
    acl: PlainAcl | None
    limits: Limits
    spawn: Callable[[Coroutine[Any, Any, Any], str], None]  # work outliving a connection
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    serials: itertools.count = field(default_factory=lambda: itertools.count(1))
    traffic: Traffic = field(default_factory=Traffic)  # the front-end's (/metrics)


@dataclass(slots=True)
class _Pending:
    """A frame awaiting its turn to be answered."""

    result: Outcome
    receipt: str | None
    disconnect: bool = False
    receipts: bool = False  # its result: receipts to send (a COMMIT's held frames'), as RabbitMQ
    held: bool = False  # a transaction's frame: its receipt comes after its COMMIT's (as RabbitMQ's)
    command: str = ""  # with started (perf_counter, 0: not timed): rocketmq_rpc_latency
    started: float = 0.0


def _silence_allowed(interval_ms: int) -> float:
    """Seconds without input before a client that promised heart-beats is dropped: twice
    its interval, and at least two seconds more than one (a busy client's timer slips)."""
    return max(2 * interval_ms, interval_ms + 2000) / 1000


class StompSession(OrderedSession[_Pending]):
    def __init__(self, ctx: StompContext, on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None) -> None:
        super().__init__(ctx.max_in_flight, on_open, on_closed)
        self.ctx = ctx
        self.conn = StompConnection(ctx.limits)
        self.serial = next(ctx.serials)
        self.handlers: StompHandlers | None = None  # once CONNECT is accepted
        self._beat_send = 0
        self._beat_receive = 0
        self._beat_timer: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None  # see `_close_after_output`

    # ------------------------------------------------------------------ transport callbacks
    def data_received(self, data: bytes) -> None:
        self._receive(data)

    def _receive(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        events = self.conn.receive_data(data)
        self._note_input(bool(events), self.conn.buffered > 0)
        self._received(events)

    @property
    def consumes(self) -> bool:  # type: ignore[override]
        """Whether it holds a subscription now (/metrics' consumer connections)."""
        return self.handlers is not None and bool(self.handlers.deliver.subs)

    @property
    def consumer_groups(self) -> frozenset[str]:  # type: ignore[override]
        """The groups of its subscriptions now."""
        if self.handlers is None:
            return frozenset()
        return frozenset(s.group.name for s in self.handlers.deliver.subs.values())

    @property
    def in_flight(self) -> int:
        """Frames awaiting their answer, and subscriptions awaiting messages: a subscriber
        with nothing to read is not idle (the listener's idle sweep must leave it open)."""
        subs = len(self.handlers.deliver.subs) if self.handlers is not None else 0
        return len(self._queue) + subs

    def _subscribers(self) -> list[Pausable]:
        if self.handlers is None:
            return []
        return [s.sub for s in self.handlers.deliver.subs.values() if s.sub is not None]

    def _closed_hook(self) -> None:
        self._abandon()
        if self._linger is not None:
            self._linger.cancel()
        if self._beat_timer is not None:
            self._beat_timer.cancel()
        handlers = self.handlers
        if handlers is not None:
            handlers.transactions.clear()
            subs = handlers.deliver.take_all()
            if subs:
                self.ctx.spawn(handlers.deliver.release_all(subs), f"stomp-release-{self.serial}")

    # ------------------------------------------------------------------ output
    def _fail(self, message: str, receipt: str | None = None, detail: str = "") -> None:
        """ERROR, then close: the specification's answer to anything the server refuses."""
        if self._closing:
            return
        headers = {"message": message[:1000], "content-type": "text/plain"}
        if receipt is not None:
            headers["receipt-id"] = receipt
        body = (detail or message).encode("utf-8", "replace")
        headers["content-length"] = str(len(body))
        log.info("STOMP client %s:%d: %s; closing", *self.peer, message)
        self._emit(self.conn.send("ERROR", headers, body))
        self._close_after_output()

    def _close_after_output(self) -> None:
        self._closing = True
        self._backlog.clear()
        self._flush()
        transport = self.transport
        if transport is None:
            return
        if self.conn.failed and transport.can_write_eof():
            # the client may still be sending the frame refused (a body over the limit):
            # closing with its bytes unread would reset the connection, and the client
            # would never read the ERROR. Half-close instead, drop what it still sends,
            # and close at its EOF (`eof_received`), or after `_LINGER_S`.
            transport.write_eof()
            transport.resume_reading()
            self._linger = self._loop.call_later(_LINGER_S, transport.close)
            return
        transport.close()  # sends what is buffered first

    def _write_messages(self, s: Subscription, deliveries: list[Delivery]) -> None:
        """The delivery engine's callback with a slice's deliveries to ``s``: their MESSAGE
        frames, written at once (or with this iteration's write when one is due)."""
        if self._closing:
            return  # unacked deliveries go back when the subscription is released
        self.handlers.deliver.render(s, deliveries, self._out)  # type: ignore[union-attr]
        traffic = self.ctx.traffic
        traffic.messages_out += len(deliveries)
        traffic.bytes_out += sum([len(delivery.message.body) for delivery in deliveries])
        if not self._flush_due:  # else they join the write already due this iteration
            self._flush()  # a slice is one write: now, not an iteration later (latency)

    # ------------------------------------------------------------------ frames
    def _start(self, backlog: deque[Frame | ProtocolError]) -> None:
        queue, limit = self._queue, self.max_in_flight
        # a run of plain SENDs to one topic (`Publisher.plan`): bodies, plans and receipts
        bodies: list[bytes] = []
        plans: list[SendPlan] = []
        receipts: list[str | None] = []
        lane_bytes = 0
        handlers = self.handlers
        publish = handlers.publish if handlers is not None else None
        cap = publish.lane_cap if publish is not None else 0
        traffic = self.ctx.traffic  # /metrics: SENDs received, as RabbitMQ counts publishes
        started = perf_counter() if traffic.latency is not None else 0.0
        while backlog and len(queue) + len(bodies) < limit and not self._closing:
            event = backlog.popleft()
            if type(event) is Frame and event.command == "SEND" and publish is not None:
                traffic.messages_in += 1
                traffic.bytes_in += len(event.body)
                if traffic.sizes is not None:
                    traffic.sizes.observe(len(event.body))
                self.produces = True
                plan = publish.plan(event.headers)
                if plan is not None and (size := len(event.body) + plan.overhead) <= cap:
                    if bodies and (plan.topic != plans[0].topic or lane_bytes + size > cap):
                        self._put_run(bodies, plans, receipts)
                        bodies, plans, receipts, lane_bytes = [], [], [], 0
                    bodies.append(event.body)
                    plans.append(plan)
                    receipts.append(event.headers.get("receipt"))
                    lane_bytes += size
                    continue
            if bodies:
                self._put_run(bodies, plans, receipts)
                bodies, plans, receipts, lane_bytes = [], [], [], 0
            if type(event) is ProtocolError:
                self._track(_Pending(eager.Done(error=StompError(event.reason)), None))
                backlog.clear()
                break
            frame: Frame = event  # type: ignore[assignment]
            receipt = frame.headers.get("receipt")
            if handlers is None:  # the frames behind CONNECT: `_pump` starts them anew, with the handlers
                self._connect(frame)
                return
            if frame.command == "DISCONNECT":  # its receipt: what was sent is on disk (SYNC_FLUSH)
                durable = self.ctx.broker.durable() if receipt is not None else None
                outcome = durable or eager.Done()
                if receipt is not None and handlers.deliver.subs:  # after what it subscribed to
                    outcome = eager.start(self._after_own_deliveries(outcome, None))
                self._track(_Pending(outcome, receipt, disconnect=True, command="DISCONNECT", started=started))
                backlog.clear()
                break
            handler = handlers.table.get(frame.command)
            if handler is None:  # CONNECT again
                outcome: Outcome = eager.Done(error=StompError(f"{frame.command} on a connected session"))
            else:
                outcome = eager.start(handler(frame))
                if receipt is not None and handlers.deliver.subs and frame.command == "SEND" \
                        and "transaction" not in frame.headers:  # (a held SEND's receipt comes after COMMIT's)
                    outcome = eager.start(self._after_own_deliveries(outcome, self._topic_of(frame)))
            self._track(_Pending(outcome, receipt, held="transaction" in frame.headers and frame.command in _HELD,
                                 command=frame.command, started=started))
            if frame.command == "COMMIT":  # RECEIPT, then the MESSAGEs it makes for this
                # connection, then its held frames' RECEIPTs, in RabbitMQ's order
                held = outcome if not handlers.deliver.subs else \
                    eager.start(self._after_own_deliveries(outcome, None))
                self._track(_Pending(held, None, receipts=True))
        if bodies:
            self._put_run(bodies, plans, receipts)

    def _put_run(self, bodies: list[bytes], plans: list[SendPlan], receipts: list[str | None]) -> None:
        """Hand a run of plain SENDs to the lane; queue the frames it leaves to answer."""
        handlers: StompHandlers = self.handlers  # type: ignore[assignment]
        started = perf_counter() if self.ctx.traffic.latency is not None else 0.0
        answers = handlers.publish.put_run(bodies, plans, receipts, self._on_done)
        if handlers.deliver.subs:  # a receipt after the MESSAGEs this connection subscribed to
            topic = plans[0].topic
            for outcome, receipt in answers:
                if receipt is not None:
                    outcome = eager.start(self._after_own_deliveries(outcome, topic))
                self._track(_Pending(outcome, receipt, command="SEND", started=started))
        else:
            self._queue.extend([_Pending(outcome, receipt, command="SEND", started=started)
                                for outcome, receipt in answers])

    async def _after_own_deliveries(self, outcome: Outcome, topic: str | None) -> Any:
        """``outcome``'s value, once this connection's subscriptions to ``topic`` (None:
        all) have been handed what their topic holds by then: a SEND's RECEIPT follows the
        MESSAGE it makes for the connection itself, and a DISCONNECT's every MESSAGE that
        was due, as on RabbitMQ. Bounded: a receipt is never held longer than
        `_OWN_DELIVERY_WAIT_S` for it."""
        value = await outcome if type(outcome) is not eager.Done else outcome.result()  # type: ignore[misc]
        if self.handlers is not None and topic != "":
            waits = [future for s in self.handlers.deliver.subs.values() if topic is None or s.topic == topic
                     if (future := s.group.handed_out(s.topic)) is not None]
            if waits:
                await asyncio.wait(waits, timeout=_OWN_DELIVERY_WAIT_S)
                for future in waits:
                    future.cancel()
        return value

    def _topic_of(self, frame: Frame) -> str:
        """The topic a SEND names ("" when it names none: the handler says why)."""
        try:
            return self.handlers.publish.dests.of(frame.headers)[1].topic  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - refused by the SEND's handler, which answers
            return ""

    def _answer(self, pending: _Pending) -> bool:
        """A frame's RECEIPT when it asked for one; an ERROR (and the end) when it failed."""
        if pending.started:  # timed from its handling's start (rocketmq_rpc_latency by command)
            latency = self.ctx.traffic.latency
            if latency is not None:
                latency.observe(pending.command, (perf_counter() - pending.started) * 1000)
        try:
            value = pending.result.result()
        except asyncio.CancelledError:
            return False
        except Exception as exc:  # noqa: BLE001 - said to the client through the error map
            if not is_refusal(exc):  # our bug: this connection only
                log.exception("STOMP frame from %s:%d failed", *self.peer)
            self._fail(error_message(exc), pending.receipt)
            return False
        if pending.receipt is not None and not pending.held:
            self._out.append(self.conn.send("RECEIPT", {"receipt-id": pending.receipt}))
        if pending.receipts:
            self._out += [self.conn.send("RECEIPT", {"receipt-id": receipt}) for receipt in value]
        if pending.disconnect:
            self._close_after_output()
            return False
        return True

    # ------------------------------------------------------------------ CONNECT
    def _connect(self, frame: Frame) -> None:
        receipt = frame.headers.get("receipt")
        if frame.command not in ("CONNECT", "STOMP"):
            self._fail(f"expected CONNECT or STOMP, got {frame.command}", receipt)
            return
        try:
            login = log_in(frame.headers, self.ctx.acl, certificate_name(self.transport))
        except VersionRefused:
            body = f"Supported protocol versions are {' '.join(reversed(VERSIONS))}"
            self._emit(self.conn.send("ERROR", {"version": ",".join(reversed(VERSIONS)),
                                               "content-type": "text/plain",
                                               "message": "Supported protocol versions are 1.0 1.1 1.2"},
                                      body.encode()))
            self._close_after_output()
            return
        except (StompError, AclError) as exc:
            self._fail(error_message(exc), receipt)
            return
        self.handlers = StompHandlers(self.ctx.broker, login, self.peer, self.ctx.serials,
                                      self._write_messages, lambda: self._write_paused,
                                      self.ctx.traffic.topics)
        self._backlog.extend(self.conn.negotiated(login.version))
        self._beat_send, self._beat_receive = login.beat_send_ms, login.beat_receive_ms
        reply = {"version": login.version, "server": SERVER_NAME, "session": f"session-{self.serial}",
                 "heart-beat": f"{login.beat_send_ms},{login.beat_receive_ms}"}
        self._emit(self.conn.send("CONNECTED", reply))
        if self._beat_send or self._beat_receive:
            self._schedule_beat()

    # ------------------------------------------------------------------ heart-beats
    def _schedule_beat(self) -> None:
        intervals = [ms for ms in (self._beat_send, self._beat_receive) if ms]
        self._beat_timer = self._loop.call_later(min(intervals) / 2000, self._beat)

    def _beat(self) -> None:
        if self._closing or self.transport is None:
            return
        now = self._loop.time()
        if self._beat_receive and now - self.last_input > _silence_allowed(self._beat_receive):
            log.info("STOMP client %s:%d sent no heart-beat for %.1f s; closing", *self.peer,
                     now - self.last_input)
            self._closing = True
            self.abort()
            return
        if self._beat_send and now - self._last_output >= self._beat_send / 2000:
            self._emit(b"\n")
        self._schedule_beat()
