"""Connections to brokers and name servers: pipelined requests matched by opaque.

One `Connection` per peer address carries any number of requests at once; each awaits
its own future, resolved when the response with its opaque arrives (or failed by its own
timer, or by the connection closing). Requests the peer initiates (CHECK_TRANSACTION_STATE,
NOTIFY_CONSUMER_IDS_CHANGED) go to the owner's `on_request`. Frames are encoded and decoded
by the shared sans-IO codec (`rocketport.protocols.remoting`); this module only moves its
buffers. Unlike `protocols.remoting.client.RemotingClient` (one request at a time per
tool call, no oneway, no reconnection), it is built for a client's hot path: an
asyncio.Protocol with no reader task, per-request timers instead of `wait_for`, write
backpressure and a pool that reconnects on demand. It must never retry a request.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import Callable

from rocketport.protocols.remoting import (
    FLAG_ONEWAY,
    CommandReceived,
    RemotingCommand,
    RemotingConnection,
    encode_command,
)
from rocketport.protocols.remoting.acl_sign import sign_request
from rocketport.protocols.remoting.command import Buffer
from rocketport.protocols.remoting.frame import JsonFrameTemplate

from .errors import ClientError

log = logging.getLogger("rocketport.client")

OnRequest = Callable[["Connection", RemotingCommand], None]
Sent = tuple[int, "asyncio.Future[RemotingCommand]"]  # a request's opaque and its answer
Credentials = tuple[str, str]
# TLS to the name servers and brokers: True (the system's CAs), or a context of one's own
# (a private CA, a client certificate for mutual TLS); None/False: plaintext
Tls = bool | ssl.SSLContext | None


def tls_context(tls: Tls) -> ssl.SSLContext | None:
    if isinstance(tls, ssl.SSLContext):
        return tls
    return ssl.create_default_context() if tls else None
_opaques = itertools.count(1)  # process-wide, as RocketMQ's requestId: unique per peer too


class Connection(asyncio.Protocol):
    """One TCP connection; build with `Connection.open`."""

    def __init__(self, addr: str, on_request: OnRequest | None,
                 credentials: Credentials | None = None) -> None:
        self.addr = addr
        # (access key, secret key): every request is ACL-signed (RocketMQ's AclClientRPCHook);
        # a signature covers the final fields, so precompiled templates are not used then
        self.credentials = credentials
        self._on_request = on_request
        self._codec = RemotingConnection()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._transport: asyncio.Transport | None = None
        self._closed: ClientError | None = None
        self._drain: asyncio.Future[None] | None = None
        self._out: list[Buffer] = []
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(cls, addr: str, on_request: OnRequest | None = None,
                   timeout_s: float = 3.0, credentials: Credentials | None = None,
                   tls: Tls = None) -> Connection:
        host, _, port = addr.rpartition(":")
        loop = asyncio.get_running_loop()
        context = tls_context(tls)
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: cls(addr, on_request, credentials), host, int(port),
                                       ssl=context, server_hostname=host if context else None),
                timeout_s)
        except (OSError, asyncio.TimeoutError, ValueError) as exc:
            raise ClientError(f"cannot connect to {addr}: {exc or 'timeout'}") from None
        return conn

    # ---------------------------------------------------------------- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=4 << 20)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        pending = self._pending
        for event in self._codec.receive_data(data):
            if type(event) is not CommandReceived:
                if event.fatal:
                    self._fail(ClientError(f"bad frame from {self.addr}: {event.reason}"))
                    return
                if event.opaque is not None and (fut := pending.pop(event.opaque, None)):
                    fut.set_exception(ClientError(f"bad response from {self.addr}: {event.reason}"))
                continue
            command = event.command
            if command.flag & 1:  # a response
                fut = pending.pop(command.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(command)
            elif self._on_request is not None:
                try:
                    self._on_request(self, command)
                except Exception:  # a handler's bug must not cost the connection
                    log.exception("handling request %d from %s failed", command.code, self.addr)

    def pause_writing(self) -> None:
        if self._drain is None:
            self._drain = self._loop.create_future()

    def resume_writing(self) -> None:
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ClientError(f"connection to {self.addr} closed"
                               + (f": {exc}" if exc else "")))

    # ---------------------------------------------------------------- requests
    @property
    def is_open(self) -> bool:
        return self._closed is None

    def _fail(self, error: ClientError) -> None:
        if self._closed is None:
            self._closed = error
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(error)
        self.resume_writing()
        if self._transport is not None:
            self._transport.close()

    def _write(self, buffers: list[Buffer]) -> None:
        """Queue `buffers`; everything queued in one loop iteration leaves in one write
        (many queues' pulls, a window of sends: one syscall instead of one each)."""
        if self._closed is not None:
            raise self._closed
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out += buffers

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._closed is None and out:
            self._transport.writelines(out)  # type: ignore[union-attr]

    async def response(self, sent: Sent, timeout_s: float) -> RemotingCommand:
        """The answer to a request `request` or `request_template` sent (it may have
        arrived already)."""
        opaque, fut = sent
        if self._drain is not None:
            await asyncio.shield(self._drain)
        timer = self._loop.call_later(timeout_s, _expire, fut, self.addr, timeout_s)
        try:
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(opaque, None)

    def _register(self) -> Sent:
        if self._closed is not None:
            raise self._closed
        opaque = next(_opaques) & 0x7FFFFFFF
        fut = self._pending[opaque] = self._loop.create_future()
        return opaque, fut

    def request(self, request: RemotingCommand) -> Sent:
        """Send `request` (signed when the connection has credentials); what `response`
        awaits. Sending and awaiting apart lets a consumer put its next pull on the wire
        before it decodes the answer it just got."""
        sent = self._register()
        request.opaque = sent[0]
        if self.credentials is not None:
            sign_request(request, *self.credentials)
        self._write(encode_command(request))
        return sent

    def request_template(self, template: JsonFrameTemplate, values: tuple[bytes | int, ...],
                         body: Buffer) -> Sent:
        """`request` for a request precompiled as a frame template (sends and pulls)."""
        sent = self._register()
        size = len(body)
        frame = template.frame(sent[0], 399, *values, body_size=size)
        self._write([frame, body] if size else [frame])
        return sent

    async def invoke(self, request: RemotingCommand, timeout_s: float = 10.0) -> RemotingCommand:
        """Send `request` and wait for its response (ClientError on timeout or close)."""
        return await self.response(self.request(request), timeout_s)

    async def invoke_template(self, template: JsonFrameTemplate, values: tuple[bytes | int, ...],
                              body: Buffer, timeout_s: float) -> RemotingCommand:
        """`invoke` for a request precompiled as a frame template."""
        return await self.response(self.request_template(template, values, body), timeout_s)

    def invoke_template_oneway(self, template: JsonFrameTemplate,
                               values: tuple[bytes | int, ...], body: Buffer) -> None:
        """`invoke_template` for a template compiled with the oneway flag."""
        frame = template.frame(next(_opaques) & 0x7FFFFFFF, 399, *values, body_size=len(body))
        self._write([frame, body])

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send `request` with the oneway flag; no response is awaited."""
        request.opaque = next(_opaques) & 0x7FFFFFFF
        request.flag |= FLAG_ONEWAY
        if self.credentials is not None:
            sign_request(request, *self.credentials)
        self._write(encode_command(request))

    def respond(self, response: RemotingCommand) -> None:
        if self._closed is None:
            self._write(encode_command(response))

    def close(self) -> None:
        self._fail(ClientError(f"connection to {self.addr} closed by the client"))


def _expire(fut: asyncio.Future[RemotingCommand], addr: str, timeout_s: float) -> None:
    if not fut.done():
        fut.set_exception(ClientError(f"no response from {addr} within {timeout_s:g} s"))


class ConnectionPool:
    """One open connection per address, opened on first use and again after a close."""

    def __init__(self, on_request: OnRequest | None = None,
                 credentials: Credentials | None = None, tls: Tls = None) -> None:
        self._on_request = on_request
        self._credentials = credentials
        self._tls = tls_context(tls)  # one context for every connection (session reuse)
        self._conns: dict[str, Connection] = {}
        self._opening: dict[str, asyncio.Future[Connection]] = {}

    async def get(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and conn.is_open:
            return conn
        opening = self._opening.get(addr)
        if opening is None:
            opening = self._opening[addr] = asyncio.ensure_future(
                Connection.open(addr, self._on_request, credentials=self._credentials, tls=self._tls))
            try:
                conn = self._conns[addr] = await opening
            finally:
                del self._opening[addr]
            return conn
        return await asyncio.shield(opening)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
