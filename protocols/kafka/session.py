"""One Kafka client connection: socket bytes to codec events, events to handlers, responses back.

Kafka clients match responses to requests by order, so responses leave in request order
even though requests run concurrently (a Fetch waiting for data must not hold back the
Produce pipelined behind it from being stored, only from being answered): the ordered
pipeline of `session_base.OrderedSession`, with its bound (``max_in_flight`` running
requests; later ones wait decoded and reading pauses) and its write coalescing (responses
of pipelined requests that become ready together leave in one writev: a client pipelining
small Produce requests otherwise costs one send syscall, the largest single item of such a
request's broker CPU, per response; a lone request, a consumer's Fetch, is answered at
once). Produce with acks=0 is processed in its turn but never answered.

With SASL on (``kafkaSaslMechanisms``) the session runs the handshake itself and serves
nothing but ApiVersions until the client has authenticated; the account then travels in
each request's context for the handlers' permission checks.

A malformed frame, an unsupported API (other than ApiVersions, which answers
UNSUPPORTED_VERSION) or a handler bug closes this connection only; it is logged and the
broker goes on. This is the only Kafka module that touches a transport.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from time import perf_counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from rocketport.core.auth.plain_acl import Account, AclError

from .. import eager
from ..session_base import OrderedSession, Session
from ..tls import certificate_name
from .connection import KafkaServerConnection
from .errors import ErrorCode
from .events import BadRequest, Event, RequestReceived, SaslTokenReceived, UnsupportedVersion
from .cluster import api_versions_body
from .handlers import KafkaHandlers
from .sasl import SaslExchange
from .requests import BrokerNode, RequestContext
from .schema import ApiKey

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT: Final = 128
_PRODUCE: Final = int(ApiKey.PRODUCE)
_FETCH: Final = int(ApiKey.FETCH)
# requests naming the consumer group a connection consumes for
_GROUP_KEYS: Final = frozenset({int(ApiKey.JOIN_GROUP), int(ApiKey.CONSUMER_GROUP_HEARTBEAT)})
_SASL_APIS: Final = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


@dataclass(slots=True)
class _Pending:
    """A request awaiting its turn to be answered."""

    result: asyncio.Future | eager.Done  # a handler's task, or its outcome if it never waited
    correlation_id: int
    api_key: int
    api_version: int
    started: float = 0.0  # perf_counter() when it was dispatched (rocketmq_rpc_latency); 0: not timed


class KafkaSession(OrderedSession[_Pending]):
    def __init__(self, handlers: KafkaHandlers, *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 max_frame_size: int | None = None,
                 on_open: Callable[[Session], bool] | None = None,
                 on_closed: Callable[[Session], None] | None = None, node: BrokerNode | None = None) -> None:
        super().__init__(max_in_flight, on_open, on_closed)
        self.handlers = handlers
        self._traffic = handlers.produce.traffic  # the front-end's (its latency histograms)
        self.node = node  # the TLS listener's advertised node; None: the handlers' own
        self.conn = KafkaServerConnection(max_frame_size) if max_frame_size else KafkaServerConnection()
        self.principal: Account | None = None  # the authenticated account (SASL or a client certificate)
        self._by_certificate = False  # principal is the client certificate's: SASL may still replace it
        self._handshaken = False  # a v1 SaslHandshake was accepted: SaslAuthenticate next
        self._mechanism = ""  # the SASL mechanism the handshake accepted
        self._exchange: SaslExchange | None = None  # its exchange, between tokens (SCRAM: two)

    # ------------------------------------------------------------------ transport callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.principal = self.handlers.certificate_account(certificate_name(transport))  # mutual TLS: Kafka's SSL principal
        self._by_certificate = self.principal is not None

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        events = self.conn.receive_data(data)
        self._note_input(bool(events), self.conn.buffered > 0)
        self._received(events)

    def _start(self, backlog: deque[Event]) -> None:
        """Start the received requests, in order, while fewer than max_in_flight are running.

        Requests past the bound wait in the backlog, decoded, and reading pauses until they
        start, so one connection holds at most max_in_flight running requests plus one
        read's worth.
        """
        queue, limit = self._queue, self.max_in_flight
        while backlog and len(queue) < limit and not self._closing:
            event = backlog.popleft()
            if type(event) is RequestReceived:
                if event.api_key in _SASL_APIS or (self.principal is None and self.handlers.sasl is not None):
                    self._sasl_request(event)
                else:
                    self._dispatch(event)
            elif type(event) is SaslTokenReceived:
                self._sasl_token(event.token)
            elif type(event) is UnsupportedVersion:
                if event.api_key == ApiKey.API_VERSIONS:
                    self._answer_now(event.correlation_id, ApiKey.API_VERSIONS, 0,
                                     api_versions_body(ErrorCode.UNSUPPORTED_VERSION))
                else:
                    log.info("client %s:%d sent unsupported api %d v%d; closing", *self.peer,
                             event.api_key, event.api_version)
                    self.close()
            else:
                assert isinstance(event, BadRequest)
                log.warning("bad request from %s:%d (%s); closing", *self.peer, event.reason)
                self.close()

    # ------------------------------------------------------------------ requests
    def _dispatch(self, event: RequestReceived) -> None:
        key = event.api_key
        if key == _FETCH:
            self.consumes = True
        elif key == _PRODUCE:
            self.produces = True
        elif key in _GROUP_KEYS:
            self.note_group(event.body["group_id"])
        handler = self.handlers.table[key]
        ctx = RequestContext(event.api_version, event.client_id, self.peer, self.principal, self.node)
        self._track(_Pending(eager.start(handler(ctx, event.body)), event.correlation_id,
                             event.api_key, event.api_version, perf_counter()))

    # ------------------------------------------------------------------ SASL
    def _sasl_request(self, event: RequestReceived) -> None:
        """SaslHandshake and SaslAuthenticate, and the gate before authentication: only
        ApiVersions may come first; anything else closes the connection, as Kafka does."""
        sasl = self.handlers.sasl
        key, version, cid = event.api_key, event.api_version, event.correlation_id
        if key == ApiKey.API_VERSIONS:
            self._dispatch(event)
        elif key == ApiKey.SASL_HANDSHAKE:
            if sasl is None or (self.principal is not None and not self._by_certificate) or self._handshaken:
                error = ErrorCode.UNSUPPORTED_SASL_MECHANISM if sasl is None else ErrorCode.ILLEGAL_SASL_STATE
                self._answer_now(cid, key, version, {"error_code": error,
                                                     "mechanisms": sasl.mechanisms if sasl else []})
                return
            error = sasl.handshake(event.body["mechanism"])
            self._answer_now(cid, key, version, {"error_code": error, "mechanisms": sasl.mechanisms})
            if error == ErrorCode.NONE:
                self._mechanism = event.body["mechanism"]
                if version == 0:
                    self.conn.expect_sasl_token()
                else:
                    self._handshaken = True
        elif key == ApiKey.SASL_AUTHENTICATE:
            reply = {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": b"",
                     "session_lifetime_ms": 0}
            if sasl is None or not self._handshaken:
                reply.update(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                             error_message="SaslAuthenticate without an accepted SaslHandshake")
            else:
                try:
                    if self._exchange is None:
                        self._exchange = sasl.start(self._mechanism)
                    reply["auth_bytes"], account = self._exchange.step(event.body["auth_bytes"])
                    if account is not None:
                        self.principal, self._handshaken, self._exchange = account, False, None
                        self._by_certificate = False
                except AclError as exc:
                    reply.update(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc))
            self._answer_now(cid, key, version, reply)
            if reply["error_code"] != ErrorCode.NONE:
                log.info("client %s:%d: %s; closing", *self.peer, reply["error_message"])
                self.close()
        else:
            log.info("client %s:%d sent api %d before authenticating; closing", *self.peer, key)
            self.close()

    def _sasl_token(self, token: bytes) -> None:
        """A raw token after a v0 handshake: an empty token back on success, else close."""
        try:
            if self._exchange is None:
                self._exchange = self.handlers.sasl.start(self._mechanism)  # type: ignore[union-attr]
            reply, account = self._exchange.step(token)
        except AclError as exc:
            log.info("client %s:%d: %s; closing", *self.peer, exc)
            self.close()
            return
        if account is None:
            self.conn.expect_sasl_token()  # SCRAM's client-final comes raw too
        else:
            self.principal, self._exchange, self._by_certificate = account, None, False
        self._emit(self.conn.frame_sasl_token(reply))

    def _answer_now(self, correlation_id: int, api_key: int, api_version: int, body: dict[str, Any]) -> None:
        self._track(_Pending(eager.Done(body), correlation_id, api_key, api_version))
        self._answer_ready()

    def _answer(self, pending: _Pending) -> bool:
        try:
            body = pending.result.result()
        except asyncio.CancelledError:
            return False
        except Exception:
            log.exception("api %d v%d from %s:%d failed; closing the connection",
                          pending.api_key, pending.api_version, *self.peer)
            self.close()  # after the answers before the failed one
            return False
        if body is not None:  # None: an acks=0 produce, which Kafka clients expect no answer to
            self._out.extend(self.conn.send_response(
                pending.correlation_id, pending.api_key, pending.api_version, body))
        latency = self._traffic.latency
        if latency is not None and pending.started:
            latency.observe(pending.api_key, (perf_counter() - pending.started) * 1000)
        return True

    def close(self) -> None:
        """Drop this connection (only this one), after the answers already encoded: pending
        requests are abandoned."""
        if self._closing:
            return
        self._abandon()
        super().close()
